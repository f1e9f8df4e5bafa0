// Package mediatype is the media type an artifact gets when its writer
// names none (For): one table and one rule, used by the engine.
package mediatype

import (
	"path"
	"strings"

	"github.com/agentspace/agentspace/internal/printable"
)

// contentTypes is the extension table of For: ours, so that
// the answer is the same on every machine and every face.
var contentTypes = map[string]string{
	".md":   "text/markdown; charset=utf-8",
	".txt":  "text/plain; charset=utf-8",
	".json": "application/json",
	".yaml": "application/yaml",
	".yml":  "application/yaml",
	".toml": "application/toml",
	".html": "text/html; charset=utf-8",
	".csv":  "text/csv; charset=utf-8",
	".go":   "text/x-go; charset=utf-8",
	".py":   "text/x-python; charset=utf-8",
	".sh":   "text/x-shellscript; charset=utf-8",
	".ts":   "text/x-typescript; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".png":  "image/png",
	".jpg":  "image/jpeg",
	".jpeg": "image/jpeg",
	".pdf":  "application/pdf",
}

// For is the media type an artifact named name with content
// gets when its writer names none: by the name's extension (a fixed table,
// case-insensitive), else text/plain for valid UTF-8 without NUL bytes,
// else application/octet-stream. The engine gives it to an artifact created
// without a content type, so the same write gets the same type on every
// face (the Go API, HTTP, MCP, wsctl) and every backend.
func For(name string, content []byte) string {
	if ct, ok := contentTypes[strings.ToLower(path.Ext(name))]; ok {
		return ct
	}
	if printable.IsText(content) {
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}

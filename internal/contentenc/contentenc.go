// Package contentenc decodes an artifact's content as the shared JSON shape
// carries it (content, content_encoding): the one rule behind package
// workspace's JSON decoding and the wire package's request bodies.
package contentenc

import (
	"encoding/base64"
	"fmt"
)

// The encodings the shape names.
const (
	UTF8   = "utf-8"
	Base64 = "base64"
)

// Decode decodes content (nil when absent) in encoding: utf-8 when that is
// empty, or base64. A bad encoding returns the field at fault and why.
func Decode(content *string, encoding string) (b []byte, field, reason string) {
	switch {
	case content == nil:
		if encoding != "" {
			return nil, "content_encoding", fmt.Sprintf("%q without content", truncate(encoding, 32))
		}
		return nil, "", ""
	case encoding == "" || encoding == UTF8:
		return []byte(*content), "", ""
	case encoding == Base64:
		c, err := base64.StdEncoding.DecodeString(*content)
		if err != nil {
			return nil, "content", fmt.Sprintf("not base64: %v", err)
		}
		return c, "", ""
	default:
		return nil, "content_encoding", fmt.Sprintf("%q is neither %q nor %q", truncate(encoding, 32), UTF8, Base64)
	}
}

// truncate shortens s to at most n bytes for a message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

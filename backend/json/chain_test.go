package jsonstore_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/conformance"
)

// dirOf is the directory a json: DSN names.
func dirOf(dsn string) string {
	dir, _, _ := strings.Cut(strings.TrimPrefix(dsn, "json:"), "?")
	return dir
}

// editLog rewrites events.ndjson, each line through edit (nil drops it).
func editLog(t testing.TB, dsn string, edit func(ev map[string]any) map[string]any) {
	t.Helper()
	path := filepath.Join(dirOf(dsn), "events.ndjson")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out bytes.Buffer
	for line := range bytes.Lines(data) {
		var ev map[string]any
		require.NoError(t, json.Unmarshal(line, &ev))
		if ev = edit(ev); ev == nil {
			continue
		}
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		out.Write(append(b, '\n'))
	}
	require.NoError(t, os.WriteFile(path, out.Bytes(), 0o600))
}

// TestTamperedLogFailsVerify edits events.ndjson and a blob with plain
// file writes, as a hand or a tool could.
func TestTamperedLogFailsVerify(t *testing.T) {
	conformance.RunTamper(t, harness{}, conformance.Tamper{
		EditMessage: func(t testing.TB, dsn string, seq int64) {
			editLog(t, dsn, func(ev map[string]any) map[string]any {
				if ev["seq"] == float64(seq) {
					ev["message"] = "nothing to see here"
				}
				return ev
			})
		},
		DeleteEvent: func(t testing.TB, dsn string, seq int64) {
			editLog(t, dsn, func(ev map[string]any) map[string]any {
				if ev["seq"] == float64(seq) {
					return nil
				}
				return ev
			})
		},
		EditContent: func(t testing.TB, dsn string, id string) {
			found := 0
			root := filepath.Join(dirOf(dsn), "blobs")
			require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && strings.Contains(p, id) {
					found++
					return os.WriteFile(p, []byte("another plan"), 0o600)
				}
				return err
			}))
			require.Equal(t, 1, found, "one blob of artifact %s under %s", id, root)
		},
	})
}

package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEventsTypeKnowsEveryTypeTheLogHolds reads the workspace's Event*
// constants from its source: `wsctl events --type` accepts each of them
// (and only them), so a new event type cannot be refused as unknown.
func TestEventsTypeKnowsEveryTypeTheLogHolds(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "..", "workspace", "types.go"), nil, 0)
	require.NoError(t, err)
	var declared []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if !strings.HasPrefix(name.Name, "Event") || i >= len(vs.Values) {
				continue
			}
			if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				v, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				declared = append(declared, v)
			}
		}
		return true
	})
	require.NotEmpty(t, declared)
	assert.ElementsMatch(t, declared, eventTypes)
}

// TestEventsTypeTakesCommasAndDenied: --type takes the API's
// comma-separated list and the policy's denied events; an unknown type
// is still refused; following past the log's head is refused at once,
// saying where to resume, instead of retrying forever.
func TestEventsTypeTakesCommasAndDenied(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	_, errOut, code := wsctl(t, dsn, "init")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = wsctl(t, dsn, "--as", "lead", "task", "add", "one")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = wsctl(t, dsn, "--as", "ann", "task", "claim")
	require.Equal(t, 0, code, errOut)

	out, errOut, code := wsctl(t, dsn, "events", "--type", "task.created,task.claimed", "--json")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, 2, strings.Count(out, "\n"), out)
	assert.Contains(t, out, `"type":"task.created"`)
	assert.Contains(t, out, `"type":"task.claimed"`)
	out, errOut, code = wsctl(t, dsn, "events", "--type", "denied")
	assert.Equal(t, 0, code, errOut)
	assert.Empty(t, out, "no policy, nothing denied")
	_, errOut, code = wsctl(t, dsn, "events", "--type", "task.created,task.done")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `--type "task.done": unknown event type`)

	_, errOut, code = wsctl(t, dsn, "events", "--follow", "--after", "999")
	assert.Equal(t, exitError, code, errOut)
	assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line, no retries: %s", errOut)
	assert.Contains(t, errOut, "seq 999 is past the log's head 2")
	assert.Contains(t, errOut, "resume from the head (after=2), or read the whole log again (after=0)")
	assert.Contains(t, errOut, "'wsctl events --follow' follows from the head, '--after 0' reads the whole log")
}

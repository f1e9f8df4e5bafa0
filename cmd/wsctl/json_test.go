package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// schemaValidator validates JSON against one $defs entry of the shared
// schema, docs/schema/workspace.schema.json.
type schemaValidator struct {
	t *testing.T
	c *jsonschema.Compiler
}

func newSchemaValidator(t *testing.T) schemaValidator {
	t.Helper()
	f, err := os.Open("../../docs/schema/workspace.schema.json")
	require.NoError(t, err)
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	require.NoError(t, c.AddResource("workspace.schema.json", doc))
	return schemaValidator{t: t, c: c}
}

// valid checks that doc is one def.
func (v schemaValidator) valid(def string, doc []byte) {
	v.t.Helper()
	sch, err := v.c.Compile("workspace.schema.json#/$defs/" + def)
	require.NoError(v.t, err)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	require.NoError(v.t, err, "%s", doc)
	assert.NoError(v.t, sch.Validate(inst), "%s", doc)
}

// list checks that doc is a JSON array of n defs.
func (v schemaValidator) list(def string, doc []byte, n int) {
	v.t.Helper()
	var items []json.RawMessage
	require.NoError(v.t, json.Unmarshal(doc, &items), "%s", doc)
	require.NotNil(v.t, items, "a list prints [], not null: %s", doc)
	assert.Len(v.t, items, n, "%s", doc)
	for _, it := range items {
		v.valid(def, it)
	}
}

// TestJSONOutputMatchesTheSchema runs the commands a script reads records
// from with --json and validates what they print against the schema.
func TestJSONOutputMatchesTheSchema(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	wsctl := func(stdin string, args ...string) []byte {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append([]string{"--dsn", dsn, "--as", "alice", "--json"}, args...)
		code := run(context.Background(), args, strings.NewReader(stdin), &out, &errOut, func(string) string { return "" })
		require.Equal(t, 0, code, "wsctl %s: %s", strings.Join(args, " "), errOut.String())
		return out.Bytes()
	}
	v := newSchemaValidator(t)
	wsctl("", "init")

	v.list("Lease", wsctl("", "lock", "ls"), 0)
	v.valid("Status", wsctl("", "status"))

	v.valid("Artifact", wsctl("# plan\n", "artifact", "put", "plans/a.md", "--label", "team=core"))
	v.valid("Artifact", wsctl("a\x00b", "artifact", "put", "out/blob.bin"))
	text := wsctl("", "artifact", "get", "plans/a.md")
	v.valid("Artifact", text)
	assert.Contains(t, string(text), `"content": "# plan\n"`)
	blob := wsctl("", "artifact", "get", "out/blob.bin")
	v.valid("Artifact", blob)
	assert.Contains(t, string(blob), `"content_encoding": "base64"`)
	v.list("Artifact", wsctl("", "artifact", "ls"), 2)
	v.list("Artifact", wsctl("", "artifact", "log", "plans/a.md"), 1)

	var task struct{ ID string }
	added := wsctl("", "task", "add", "write the plan")
	v.valid("Task", added)
	require.NoError(t, json.Unmarshal(added, &task))
	v.valid("Task", wsctl("", "task", "claim"))
	v.valid("Task", wsctl("", "task", "show", task.ID))
	v.list("Task", wsctl("", "task", "ls"), 1)

	v.valid("Note", wsctl("", "note", "put", "decision", "db", "--title", "DB", "--body", "sqlite"))
	v.valid("Note", wsctl("", "note", "get", "decision", "db"))
	v.list("Note", wsctl("", "note", "ls"), 1)

	var lease struct{ Token int64 }
	acquired := wsctl("", "lock", "acquire", "role:lead", "--ttl", "1m")
	v.valid("Lease", acquired)
	require.NoError(t, json.Unmarshal(acquired, &lease))
	v.list("Lease", wsctl("", "lock", "ls"), 1)
	v.valid("Status", wsctl("", "status"))

	v.valid("Subject", wsctl("", "lock", "release", "role:lead", "--token", "1"))
	v.valid("Subject", wsctl("", "note", "rm", "decision", "db"))
	v.valid("Subject", wsctl("", "artifact", "rm", "out/blob.bin"))

	lines := strings.Split(strings.TrimSpace(string(wsctl("", "events"))), "\n")
	require.Len(t, lines, 9)
	for _, l := range lines {
		v.valid("Event", []byte(l))
	}
}

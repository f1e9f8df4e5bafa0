package mcp_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/workspace"
)

// TestBadInputThroughEveryToolWritesNothing sends the conformance suite's
// kinds of bad input through the tools: each is a tool error of class
// invalid (or too_large) naming the field, and the log does not move.
func TestBadInputThroughEveryToolWritesNothing(t *testing.T) {
	ws := openWS(t, sqliteBackend.dsn(t)+"?ws_max_artifact_size=1024")
	cs := connect(t, newServer(t, ws, "alice"), "", nil)
	task := ok(t, cs, "task_add", map[string]any{"title": "t"})
	ok(t, cs, "artifact_write", map[string]any{"name": "docs/a.md", "content": "a"})
	long := strings.Repeat("a", workspace.MaxNameLen+1)
	type args = map[string]any
	cases := []struct {
		name  string
		tool  string
		args  args
		class string
	}{
		{"absolute name", "artifact_write", args{"name": "/etc/passwd", "content": "x"}, mcp.ClassInvalid},
		{"dot-dot name", "artifact_write", args{"name": "a/../../etc/passwd", "content": "x"}, mcp.ClassInvalid},
		{"backslash name", "artifact_write", args{"name": `a\b`, "content": "x"}, mcp.ClassInvalid},
		{"NUL in name", "artifact_write", args{"name": "a\x00b", "content": "x"}, mcp.ClassInvalid},
		{"over-long name", "artifact_write", args{"name": long, "content": "x"}, mcp.ClassInvalid},
		{"upper-case kind", "artifact_write", args{"name": "k", "kind": "Plan"}, mcp.ClassInvalid},
		{"content type with a newline", "artifact_write", args{"name": "k", "content_type": "text/plain\nX: y"}, mcp.ClassInvalid},
		{"task id not a UUID", "artifact_write", args{"name": "k", "task_id": "task-1"}, mcp.ClassInvalid},
		{"oversized content", "artifact_write", args{"name": "k", "content": strings.Repeat("x", 1025)}, mcp.ClassTooLarge},
		{"NUL in message", "artifact_write", args{"name": "k", "message": "a\x00b"}, mcp.ClassInvalid},
		{"negative if_version", "artifact_write", args{"name": "docs/a.md", "content": "x", "if_version": -1}, mcp.ClassInvalid},
		{"negative fence", "artifact_write", args{"name": "docs/a.md", "content": "x", "fence": -1}, mcp.ClassInvalid},
		{"unknown op", "artifact_write", args{"name": "docs/a.md", "op": "append"}, mcp.ClassInvalid},
		{"rollback to a negative version", "artifact_write", args{"name": "docs/a.md", "op": "rollback", "rollback_to": -3}, mcp.ClassInvalid},
		{"rollback without a version", "artifact_write", args{"name": "docs/a.md", "op": "rollback"}, mcp.ClassInvalid},
		{"read a name with ..", "artifact_read", args{"name": "../docs/a.md"}, mcp.ClassInvalid},
		{"read a negative version", "artifact_read", args{"name": "docs/a.md", "version": -1}, mcp.ClassInvalid},
		{"log of an absolute name", "artifact_read", args{"name": "/docs/a.md", "log": true}, mcp.ClassInvalid},
		{"list with a negative limit", "artifact_list", args{"limit": -1}, mcp.ClassInvalid},
		{"list with a bad kind", "artifact_list", args{"kind": "Bad Kind"}, mcp.ClassInvalid},
		{"empty task title", "task_add", args{"title": ""}, mcp.ClassInvalid},
		{"title with a newline", "task_add", args{"title": "a\nb"}, mcp.ClassInvalid},
		{"parent not a UUID", "task_add", args{"title": "t", "parent_id": "parent"}, mcp.ClassInvalid},
		{"dependency not a UUID", "task_add", args{"title": "t", "depends_on": []string{"dep"}}, mcp.ClassInvalid},
		{"priority out of range", "task_add", args{"title": "t", "priority": 2_000_000}, mcp.ClassInvalid},
		{"claim with a negative lease", "task_claim", args{"lease_seconds": -1}, mcp.ClassInvalid},
		{"claim with a lease over the maximum", "task_claim", args{"lease_seconds": int(workspace.MaxTTL.Seconds()) + 1}, mcp.ClassInvalid},
		{"claim waiting too long", "task_claim", args{"wait_seconds": 3600}, mcp.ClassInvalid},
		{"claim with a bad parent", "task_claim", args{"parent_id": "p"}, mcp.ClassInvalid},
		{"unknown action", "task_update", args{"id": task["id"], "action": "finish"}, mcp.ClassInvalid},
		{"update a bad id", "task_update", args{"id": "42", "action": "done"}, mcp.ClassInvalid},
		{"heartbeat over the maximum", "task_update", args{"id": task["id"], "action": "heartbeat", "lease_seconds": 8 * 24 * 3600}, mcp.ClassInvalid},
		{"done naming a bad artifact", "task_update", args{"id": task["id"], "action": "done", "artifacts": []string{"/abs"}}, mcp.ClassInvalid},
		{"edit with a negative if_version", "task_update", args{"id": task["id"], "action": "edit", "title": "x", "if_version": -2}, mcp.ClassInvalid},
		{"get a task by a bad id", "task_list", args{"id": "42"}, mcp.ClassInvalid},
		{"list by a bad status", "task_list", args{"status": "open"}, mcp.ClassInvalid},
		{"upper-case note kind", "note", args{"op": "put", "kind": "Decision", "key": "k"}, mcp.ClassInvalid},
		{"empty note key", "note", args{"op": "put", "kind": "decision"}, mcp.ClassInvalid},
		{"note key with a control character", "note", args{"op": "put", "kind": "decision", "key": "k\x1b[2J"}, mcp.ClassInvalid},
		{"note body of invalid UTF-8", "note", args{"op": "put", "kind": "decision", "key": "k", "body": "\xc3\x28"}, mcp.ClassInvalid},
		{"get a note of a bad kind", "note", args{"op": "get", "kind": "no kind", "key": "k"}, mcp.ClassInvalid},
		{"delete a note with an empty key", "note", args{"op": "delete", "kind": "decision"}, mcp.ClassInvalid},
		{"list notes from a bad cursor", "note", args{"op": "list", "after": "no-slash"}, mcp.ClassInvalid},
		{"unknown note op", "note", args{"op": "append", "kind": "decision", "key": "k"}, mcp.ClassInvalid},
		{"negative TTL", "lock", args{"op": "acquire", "resource": "r", "ttl_seconds": -60}, mcp.ClassInvalid},
		{"TTL over the maximum", "lock", args{"op": "acquire", "resource": "r", "ttl_seconds": 8 * 24 * 3600}, mcp.ClassInvalid},
		{"empty resource", "lock", args{"op": "acquire"}, mcp.ClassInvalid},
		{"resource with NUL", "lock", args{"op": "acquire", "resource": "r\x00"}, mcp.ClassInvalid},
		{"renew with token 0", "lock", args{"op": "renew", "resource": "r"}, mcp.ClassInvalid},
		{"release with a negative token", "lock", args{"op": "release", "resource": "r", "token": -1}, mcp.ClassInvalid},
		{"unknown lock op", "lock", args{"op": "steal", "resource": "r"}, mcp.ClassInvalid},
		{"wait after a negative seq", "events_wait", args{"after_seq": -1}, mcp.ClassInvalid},
		{"wait with an empty type", "events_wait", args{"types": []string{""}}, mcp.ClassInvalid},
		{"wait too long", "events_wait", args{"timeout_seconds": 3600}, mcp.ClassInvalid},
		{"wait with a negative limit", "events_wait", args{"limit": -5}, mcp.ClassInvalid},
		{"inbox waiting too long", "inbox", args{"wait_seconds": 61}, mcp.ClassInvalid},
		{"inbox of a thread not a UUID", "inbox", args{"thread": "t-1"}, mcp.ClassInvalid},
		{"message without a recipient", "message", args{"body": "hi"}, mcp.ClassInvalid},
		{"message to no one known", "message", args{"to": []string{"nobody"}, "body": "hi"}, mcp.ClassInvalid},
		{"message with an empty body", "message", args{"to": []string{"alice"}}, mcp.ClassInvalid},
		{"message with a bad severity", "message", args{"to": []string{"alice"}, "body": "hi", "severity": "loud"}, mcp.ClassInvalid},
		{"message with data not an object", "message", args{"to": []string{"alice"}, "body": "hi", "data": "x"}, mcp.ClassInvalid},
		{"message with a deadline and no ack", "message", args{"to": []string{"alice"}, "body": "hi", "deadline_seconds": 60}, mcp.ClassInvalid},
		{"ack of a bad id", "message", args{"ack": "m-1"}, mcp.ClassInvalid},
		{"stop no agent", "agents", args{"action": "stop"}, mcp.ClassInvalid},
		{"pause an agent with a NUL", "agents", args{"action": "pause", "agent": "a\x00b"}, mcp.ClassInvalid},
		{"unknown agents action", "agents", args{"action": "kill", "agent": "alice"}, mcp.ClassInvalid},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := head(t, ws)
			te := fails(t, cs, c.tool, c.args, c.class)
			assert.NotEmpty(t, te.Field, "the error names the field")
			assert.Equal(t, before, head(t, ws), "nothing was written")
		})
		covered[c.tool] = true
	}
	// Arguments of the wrong type never reach the workspace: the SDK
	// refuses them against the schema, as a tool error too.
	for _, c := range []struct{ tool, field string }{
		{"artifact_write", "if_version"}, {"task_claim", "lease_seconds"}, {"lock", "token"}, {"events_wait", "after_seq"},
	} {
		before := head(t, ws)
		r := call(t, cs, c.tool, map[string]any{"name": "x", "op": "acquire", "resource": "r", c.field: "three"})
		assert.True(t, r.isError, "%s with %s of the wrong type: %s", c.tool, c.field, r.text)
		assert.Equal(t, before, head(t, ws))
	}
	tools, err := cs.ListTools(testCtx(t), nil)
	require.NoError(t, err)
	for _, tl := range tools.Tools {
		if tl.Name != "status" {
			assert.True(t, covered[tl.Name], "the table has a case for %s", tl.Name)
		}
	}
}

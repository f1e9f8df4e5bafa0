package mcp_test

import (
	"context"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/workspace"
)

// notice is the line a tool result carries after its own content, or "".
func notice(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(testCtx(t), &sdk.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	if len(res.Content) < 2 {
		return ""
	}
	require.Len(t, res.Content, 2, "%s: its content, and one line", name)
	tc, ok := res.Content[1].(*sdk.TextContent)
	require.True(t, ok)
	assert.NotContains(t, tc.Text, "\n", "one line")
	return tc.Text
}

func TestMessageToolsSendReadAndAckOnEveryBackend(t *testing.T) {
	for _, b := range allBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ws := openWS(t, b.dsn(t))
			alice := connect(t, newServer(t, ws, "alice"), "", nil)
			bob := connect(t, newServer(t, ws, "bob"), "", nil)
			ok(t, bob, "task_add", map[string]any{"title": "bob was here"})
			assert.Empty(t, notice(t, bob, "status", nil), "an empty inbox adds nothing")

			sent := ok(t, alice, "message", map[string]any{"to": []string{"bob"}, "subject": "review", "body": "review the plan",
				"type": "question", "severity": "warning", "data": map[string]any{"path": "plan.md"}, "requires_ack": true, "deadline_seconds": 600})
			id := sent["id"].(string)
			assert.Equal(t, "alice", sent["from"])
			assert.Equal(t, []any{"bob"}, sent["pending"])
			ok(t, alice, "message", map[string]any{"to": []string{"bob"}, "body": "fyi", "reply_to": id})

			line := notice(t, bob, "status", nil)
			assert.Equal(t, "agentspace: you have 2 unread and 1 awaiting your ack (inbox)", line)
			t.Logf("the notice adds %d bytes to a tool result", len(line))

			page := ok(t, bob, "inbox", nil)
			assert.Len(t, page["messages"], 2)
			assert.EqualValues(t, 2, page["unread"])
			assert.EqualValues(t, 1, page["unacked"])
			assert.Empty(t, notice(t, bob, "inbox", nil), "the inbox's own result has its counts, not the line")
			page = ok(t, bob, "inbox", map[string]any{"mark_read": true})
			assert.EqualValues(t, 0, page["unread"])
			assert.Empty(t, ok(t, bob, "inbox", nil)["messages"])
			unacked := ok(t, bob, "inbox", map[string]any{"unacked": true})["messages"].([]any)
			require.Len(t, unacked, 1)
			assert.Equal(t, id, unacked[0].(map[string]any)["id"])
			assert.Equal(t, "agentspace: you have 1 awaiting your ack (inbox)", notice(t, bob, "status", nil))

			acked := ok(t, bob, "message", map[string]any{"ack": id, "body": "on it"})
			assert.Empty(t, acked["pending"])
			again := ok(t, bob, "message", map[string]any{"ack": id, "body": "again"})
			assert.Equal(t, acked["acks"], again["acks"], "a second ack answers with the first")
			assert.Empty(t, notice(t, bob, "status", nil))

			// A wait returns what comes while it waits.
			done := make(chan map[string]any, 1)
			go func() { done <- ok(t, bob, "inbox", map[string]any{"wait_seconds": 60}) }()
			ok(t, alice, "message", map[string]any{"to": []string{"bob"}, "body": "wake up"})
			woke := <-done
			require.NotEmpty(t, woke["messages"])
		})
	}
}

func TestMessageToolsRefuseBadInputAndWriteNothing(t *testing.T) {
	ws := openWS(t, sqliteBackend.dsn(t))
	alice := connect(t, newServer(t, ws, "alice"), "", nil)
	bob := connect(t, newServer(t, ws, "bob"), "", nil)
	carol := connect(t, newServer(t, ws, "carol"), "", nil)
	ok(t, bob, "task_add", map[string]any{"title": "bob was here"})
	ok(t, carol, "task_add", map[string]any{"title": "carol was here"})
	ask := ok(t, alice, "message", map[string]any{"to": []string{"bob"}, "body": "ack me", "requires_ack": true})["id"].(string)
	fyi := ok(t, alice, "message", map[string]any{"to": []string{"bob"}, "body": "fyi"})["id"].(string)
	before := head(t, ws)
	for _, c := range []struct {
		name  string
		cs    *sdk.ClientSession
		args  map[string]any
		class string
		field string
	}{
		{"unknown recipient", alice, map[string]any{"to": []string{"nobody"}, "body": "hi"}, mcp.ClassInvalid, "to"},
		{"no recipient", alice, map[string]any{"body": "hi"}, mcp.ClassInvalid, "to"},
		{"empty body", alice, map[string]any{"to": []string{"bob"}, "body": ""}, mcp.ClassInvalid, "body"},
		{"data not an object", alice, map[string]any{"to": []string{"bob"}, "body": "hi", "data": []int{1}}, mcp.ClassInvalid, "data"},
		{"bad severity", alice, map[string]any{"to": []string{"bob"}, "body": "hi", "severity": "loud"}, mcp.ClassInvalid, "severity"},
		{"deadline without ack", alice, map[string]any{"to": []string{"bob"}, "body": "hi", "deadline_seconds": 60}, mcp.ClassInvalid, "deadline"},
		{"negative deadline", alice, map[string]any{"to": []string{"bob"}, "body": "hi", "requires_ack": true, "deadline_seconds": -5}, mcp.ClassInvalid, "deadline_seconds"},
		{"ack of one that needs none", bob, map[string]any{"ack": fyi}, mcp.ClassInvalid, "message id"},
		{"ack of another's", carol, map[string]any{"ack": ask}, mcp.ClassForbidden, ""},
		{"ack with a recipient", bob, map[string]any{"ack": ask, "to": []string{"alice"}}, mcp.ClassInvalid, "ack"},
		{"wait too long", bob, nil, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.class == "" {
				te := fails(t, c.cs, "inbox", map[string]any{"wait_seconds": 61}, mcp.ClassInvalid)
				assert.Equal(t, "wait_seconds", te.Field)
				return
			}
			te := fails(t, c.cs, "message", c.args, c.class)
			if c.field != "" {
				assert.Equal(t, c.field, te.Field, te.Message)
			}
		})
	}
	assert.Equal(t, before, head(t, ws), "a refused call writes nothing")
}

func TestMCPSurfacesAPauseOnEveryResult(t *testing.T) {
	ctx := context.Background()
	ws := openWS(t, sqliteBackend.dsn(t))
	bob := connect(t, newServer(t, ws, "bob"), "", nil)
	ok(t, bob, "artifact_write", map[string]any{"name": "a.md", "content": "v1"})
	res, err := ws.Commit(ctx, workspace.Batch{Actor: "lead", Ops: []workspace.Op{workspace.PauseActorOp{Actor: "bob", AckTimeout: time.Hour}}})
	require.NoError(t, err)
	pause := res.Results[0].Msg.ID

	r := call(t, bob, "artifact_write", map[string]any{"name": "a.md", "content": "v2"})
	require.True(t, r.isError)
	assert.Equal(t, mcp.ClassPaused, r.err.Error, r.text)
	assert.Contains(t, r.err.Hint, "ack the pause message")
	for _, tool := range []string{"status", "artifact_write", "task_list"} {
		line := notice(t, bob, tool, map[string]any{"name": "a.md", "content": "v2"})
		assert.True(t, strings.HasPrefix(line, "agentspace: you are paused by lead: "), "%s: %q", tool, line)
		assert.Contains(t, line, "ack message "+pause)
		t.Logf("the pause line adds %d bytes", len(line))
	}
	ok(t, bob, "message", map[string]any{"ack": pause, "body": "stopped"})
	fails(t, bob, "artifact_write", map[string]any{"name": "a.md", "content": "v2"}, mcp.ClassPaused)

	_, err = ws.Commit(ctx, workspace.Batch{Actor: "lead", Ops: []workspace.Op{workspace.ResumeActorOp{Actor: "bob"}}})
	require.NoError(t, err)
	ok(t, bob, "artifact_write", map[string]any{"name": "a.md", "content": "v2"})
	assert.NotContains(t, notice(t, bob, "status", nil), "paused")
}

func TestPrimeShowsTheInboxInTwoLinesOrNothing(t *testing.T) {
	ctx := context.Background()
	ws := openWS(t, sqliteBackend.dsn(t))
	prime := func() string {
		var b strings.Builder
		require.NoError(t, mcp.Prime(ctx, ws, &b, mcp.PrimeOptions{Actor: "bob"}))
		return b.String()
	}
	_, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "bob"}, workspace.NewTask{Title: "bob was here"})
	require.NoError(t, err)
	assert.NotContains(t, prime(), "Inbox", "an empty inbox adds nothing")

	m, err := ws.Messages().Send(ctx, workspace.Write{Actor: "alice"}, workspace.NewMsg{To: []string{"bob"}, Subject: "review the plan", Body: "please", RequiresAck: true})
	require.NoError(t, err)
	_, err = ws.Messages().Send(ctx, workspace.Write{Actor: "alice"}, workspace.NewMsg{To: []string{"bob"}, Body: "fyi"})
	require.NoError(t, err)
	out := prime()
	assert.Contains(t, out, "\nInbox: 2 unread, 1 awaiting your ack (inbox tool, or wsctl inbox).\nAck first: "+m.ID+" from alice (note: review the plan);\n")

	_, err = ws.Commit(ctx, workspace.Batch{Actor: "lead", Ops: []workspace.Op{workspace.PauseActorOp{Actor: "bob"}}})
	require.NoError(t, err)
	assert.Contains(t, prime(), "you are PAUSED")
}

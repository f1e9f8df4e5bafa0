package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// TestHookLineCostsFewBytesPerMessage measures what the inbox hook adds
// to an agent's context when one message arrives (docs/agents.md states
// it): the line, of a size that does not grow with the message.
func TestHookLineCostsFewBytesPerMessage(t *testing.T) {
	one := workspace.InboxPage{Messages: []workspace.Msg{{ID: "01a23450-c4f2-7042-92d5-dea21c781dce", From: "lead", Type: "question",
		Subject: strings.Repeat("long subject ", 20), Body: strings.Repeat("a long body ", 200), RequiresAck: true, Pending: []string{"bob"}}}}
	line := newMessagesLine(one)
	t.Logf("one message: %d bytes: %s", len(line), line)
	assert.Equal(t, "agentspace: 1 new message(s) from lead, 1 need your ack: `wsctl inbox --unread`.", line)
	assert.LessOrEqual(t, len(line), 100)
}

// TestMessageJSONMatchesTheSchema: send, inbox and ack --json print the
// workspace's Msg and InboxPage.
func TestMessageJSONMatchesTheSchema(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	wsctl := func(as string, args ...string) []byte {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append([]string{"--dsn", dsn, "--as", as, "--json"}, args...)
		code := run(context.Background(), args, strings.NewReader(""), &out, &errOut, func(string) string { return "" })
		require.Equal(t, 0, code, "wsctl %s: %s", strings.Join(args, " "), errOut.String())
		return out.Bytes()
	}
	v := newSchemaValidator(t)
	wsctl("alice", "init")
	wsctl("bob", "task", "add", "bob was here")
	sent := wsctl("alice", "send", "bob", "-s", "review", "-m", "please", "--ack", "--deadline", "1h", "--data", `{"path":"a.md"}`)
	v.valid("Msg", sent)
	var m struct{ ID string }
	require.NoError(t, json.Unmarshal(sent, &m))
	v.valid("InboxPage", wsctl("bob", "inbox"))
	v.valid("InboxPage", wsctl("bob", "inbox", "--unacked", "--mark-read"))
	acked := wsctl("bob", "ack", m.ID, "-m", "ok")
	v.valid("Msg", acked)
	assert.Contains(t, string(acked), `"reply": "ok"`)
}

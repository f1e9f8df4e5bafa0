package mcp_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// agentMailInboxItem is one message of mcp_agent_mail's fetch_inbox
// answer, as its public source builds it: the message's own fields, the
// sender's name and the recipient kind (the body only with
// include_bodies).
func agentMailInboxItem(m workspace.Msg, withBody bool) map[string]any {
	item := map[string]any{
		"id": 1042, "project_id": 3, "sender_id": 7, "thread_id": nil,
		"subject": m.Subject, "importance": "normal", "ack_required": m.RequiresAck,
		"created_ts": m.SentAt.Format("2006-01-02T15:04:05.000000+00:00"), "attachments": []any{},
		"from": m.From, "kind": "to",
	}
	if withBody {
		item["body_md"] = m.Body
	}
	return item
}

// TestTheContextAMessageCostsAnAgent measures what a coding agent reads
// for one message received, against mcp_agent_mail's fetch_inbox answer
// for the same message (docs/performance.md states both): the hook's
// line, the notice on another tool's result, and the inbox tool's answer.
// The budget: 400 bytes for the inbox tool's answer to this message.
func TestTheContextAMessageCostsAnAgent(t *testing.T) {
	ws := openWS(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	bob := connect(t, newServer(t, ws, "bob"), "", nil)
	ok(t, bob, "task_add", map[string]any{"title": "bob was here"})
	m, err := ws.Messages().Send(testCtx(t), workspace.Write{Actor: "lead"}, workspace.NewMsg{To: []string{"bob"},
		Subject: "review plans/api.md", Body: "Please review the API plan before noon; the auth section changed.", RequiresAck: true})
	require.NoError(t, err)

	line := notice(t, bob, "status", nil)
	res, err := bob.CallTool(testCtx(t), &sdk.CallToolParams{Name: "inbox", Arguments: map[string]any{}})
	require.NoError(t, err)
	var inbox int
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			inbox += len(tc.Text)
		}
	}
	theirs := func(body bool) int {
		b, err := json.Marshal([]any{agentMailInboxItem(m, body)})
		require.NoError(t, err)
		return len(b)
	}
	t.Logf("one message (%d-byte subject, %d-byte body): the notice on a tool result %d bytes; the inbox tool's answer %d bytes; mcp_agent_mail's fetch_inbox %d bytes without the body, %d with it",
		len(m.Subject), len(m.Body), len(line), inbox, theirs(false), theirs(true))
	assert.True(t, strings.HasPrefix(line, "agentspace: "), line)
	assert.LessOrEqual(t, len(line), 80, "the notice stays one short line")
	assert.LessOrEqual(t, inbox, 400, "the inbox tool's answer to one message, over its budget")
}

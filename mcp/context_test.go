package mcp_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/mcp"
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

// The budgets of what an agent reads for coordination through MCP, a few
// percent above what TestTheContextACycleCostsAnAgent measures today
// (docs/performance.md states both): every byte of them sits in the
// agent's context.
const (
	// toolsContextBudget is the tools as the agent's model sees them:
	// each tool's name, description and input schema (the tools/list
	// answer less its envelope; toolsListBudget bounds the whole answer).
	// 9,516 bytes on 2026-12-02: 9,062 before the agents tool (454
	// bytes), and the budget moved by that tool's cost and no more.
	toolsContextBudget = 9760
	// instructionsBudget is the instructions the server sends at start,
	// the briefing's MCP half (`wsctl prime` prints them with a live
	// part). 1,067 bytes.
	instructionsBudget = 1100
	// primeBudget is `wsctl prime`'s briefing on an empty workspace,
	// outside a git repository (the SessionStart hook's text). 1,462 bytes.
	primeBudget = 1500
	// claimBudget, writeBudget and doneBudget are one cycle's results:
	// task_claim, artifact_write creating a 120-byte artifact, and
	// task_update action=done with a summary and the artifact: 444, 436
	// and 446 bytes (each the whole record, JSON).
	claimBudget = 460
	writeBudget = 450
	doneBudget  = 460
)

// toolsContext is the bytes of tools as an agent's model reads them:
// a JSON array of {name, description, inputSchema}, compact, with <, >
// and & as they are (no HTML escaping).
func toolsContext(t *testing.T, tools []map[string]any) int {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(tools))
	return b.Len() - 1 // Encode's newline
}

// descPlaceholder is how peers_test.go writes a description: its length.
var descPlaceholder = regexp.MustCompile(`"~(\d+)~"`)

// peerToolsContext is toolsContext of a peer's tool list: each
// description a run of x as long as the real one.
func peerToolsContext(t *testing.T, peer []peerTool) int {
	t.Helper()
	var tools []map[string]any
	for _, p := range peer {
		schema := descPlaceholder.ReplaceAllStringFunc(p.schema, func(m string) string {
			n, err := strconv.Atoi(descPlaceholder.FindStringSubmatch(m)[1])
			require.NoError(t, err)
			return `"` + strings.Repeat("x", n) + `"`
		})
		require.True(t, json.Valid([]byte(schema)), p.name)
		tool := map[string]any{"name": p.name, "inputSchema": json.RawMessage(schema)}
		if p.descLen > 0 {
			tool["description"] = strings.Repeat("x", p.descLen)
		}
		tools = append(tools, tool)
	}
	return toolsContext(t, tools)
}

// resultText is the bytes of a tool result the agent reads: its text.
func resultText(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	require.False(t, res.IsError)
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// compact is v as the peers' servers write a result (FastMCP's
// pydantic_core.to_json: compact, None as null).
func compact(t *testing.T, v any) int {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return b.Len() - 1
}

// TestTheContextACycleCostsAnAgent measures, through an MCP client
// session, what a coding agent reads to coordinate: the tool list, the
// start-of-session briefing, and one claim → write → done cycle, each
// against its budget; and logs the same figures for mcp_agent_mail and
// beads' MCP server, built from their public sources (peers_test.go).
// docs/performance.md, "Context an agent spends", states them, and the
// test checks that it does (statedFigures).
func TestTheContextACycleCostsAnAgent(t *testing.T) {
	ws := openWS(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	var prime bytes.Buffer
	require.NoError(t, mcp.Prime(testCtx(t), ws, &prime, mcp.PrimeOptions{Actor: "claude"}))
	cs := connect(t, newServer(t, ws, "claude"), "", nil)

	// (a) The tools, as the model sees them.
	list, err := cs.ListTools(testCtx(t), nil)
	require.NoError(t, err)
	var tools []map[string]any
	for _, tl := range list.Tools {
		schema, err := json.Marshal(tl.InputSchema)
		require.NoError(t, err)
		tools = append(tools, map[string]any{"name": tl.Name, "description": tl.Description, "inputSchema": json.RawMessage(schema)})
	}
	ours := toolsContext(t, tools)

	// (b) The briefing: the instructions the session starts with.
	instructions := cs.InitializeResult().Instructions
	require.Equal(t, mcp.Instructions, instructions)

	// (c) One cycle: claim the task, write its artifact, mark it done.
	task := ok(t, cs, "task_add", map[string]any{"title": "write the API plan", "priority": 5})
	callText := func(name string, args map[string]any) string {
		res, err := cs.CallTool(testCtx(t), &sdk.CallToolParams{Name: name, Arguments: args})
		require.NoError(t, err)
		return resultText(t, res)
	}
	claim := callText("task_claim", map[string]any{"lease_seconds": 600})
	assert.Contains(t, claim, task["id"].(string))
	content := strings.Repeat("The API plan: one line of it.\n", 4) // 120 bytes
	write := callText("artifact_write", map[string]any{"name": "plans/api.md", "content": content, "task_id": task["id"]})
	summary := "Wrote the API plan: endpoints, auth, errors."
	done := callText("task_update", map[string]any{"id": task["id"], "action": "done", "summary": summary, "artifacts": []string{"plans/api.md"}})
	assert.Contains(t, done, `"done"`)
	cycle := len(claim) + len(write) + len(done)

	// The same for the peers. Their briefing is their server's
	// instructions (mcp_agent_mail 271 bytes, beads 356, from the sources
	// peers_test.go names). Their cycle, as their tools answer it:
	// beads has a queue, but claim takes an id, so an agent first asks
	// ready (one issue, its default answer), then claim and close (their
	// default brief answers); it keeps no artifacts, the agent edits files.
	// mcp_agent_mail has no tasks: an agent reserves the file
	// (file_reservation_paths), reports with send_message, and releases
	// (release_file_reservations).
	const when = "2026-12-02T09:00:00.000000+00:00"
	beadsCycle := []int{
		compact(t, []any{map[string]any{"id": "bd-a1b2", "title": "write the API plan", "status": "open", "priority": 2, "issue_type": "task",
			"assignee": nil, "labels": []any{}, "dependency_count": 0, "dependent_count": 0}}),
		compact(t, map[string]any{"id": "bd-a1b2", "action": "claimed", "message": nil}),
		compact(t, []any{map[string]any{"id": "bd-a1b2", "action": "closed", "message": summary}}),
	}
	agentMailCycle := []int{
		compact(t, map[string]any{"granted": []any{map[string]any{"id": 17, "path_pattern": "plans/api.md", "exclusive": true, "reason": "write the API plan",
			"expires_ts": when}}, "conflicts": []any{}}),
		compact(t, map[string]any{"deliveries": []any{map[string]any{"project": "/home/dev/project", "payload": map[string]any{
			"id": 1042, "project_id": 3, "sender_id": 7, "thread_id": nil, "topic": nil, "subject": "write the API plan: done", "importance": "normal",
			"ack_required": false, "created_ts": when, "attachments": []any{}, "body_md": summary,
			"to": []string{"lead"}, "cc": []string{}, "bcc": []string{}, "from": "claude"}}}, "count": 1, "verified_sender": true}),
		compact(t, map[string]any{"released": 1, "released_at": when}),
	}
	sum := func(xs []int) int {
		n := 0
		for _, x := range xs {
			n += x
		}
		return n
	}
	t.Logf("agentspace: %d tools, %d bytes; instructions %d bytes, wsctl prime %d bytes; cycle claim %d + write %d + done %d = %d bytes",
		len(list.Tools), ours, len(instructions), prime.Len(), len(claim), len(write), len(done), cycle)
	agentMail := peerFigure{"mcp_agent_mail", len(agentMailTools), peerToolsContext(t, agentMailTools), sum(agentMailCycle)}
	beads := peerFigure{"beads-mcp", len(beadsTools), peerToolsContext(t, beadsTools), sum(beadsCycle)}
	t.Logf("mcp_agent_mail: %d tools, %d bytes; instructions 271 bytes; cycle %v = %d bytes", agentMail.tools, agentMail.bytes, agentMailCycle, agentMail.cycle)
	t.Logf("beads-mcp: %d tools, %d bytes; instructions 356 bytes; cycle %v = %d bytes", beads.tools, beads.bytes, beadsCycle, beads.cycle)

	statedFigures(t, map[string][2]int{
		"14 tools,":                    {ours, toolsContextBudget},
		"instructions":                 {len(instructions), instructionsBudget},
		"`wsctl prime`, for the hook,": {prime.Len(), primeBudget},
		"`task_claim`":                 {len(claim), claimBudget},
		"`artifact_write`":             {len(write), writeBudget},
		"`task_update` done":           {len(done), doneBudget},
	})
	assert.LessOrEqual(t, ours, toolsContextBudget, "the tools as the model reads them, over their budget")
	assert.LessOrEqual(t, len(instructions), instructionsBudget, "the server's instructions, over their budget")
	assert.LessOrEqual(t, prime.Len(), primeBudget, "wsctl prime's briefing, over its budget")
	assert.LessOrEqual(t, len(claim), claimBudget, "task_claim's result, over its budget: %s", claim)
	assert.LessOrEqual(t, len(write), writeBudget, "artifact_write's result, over its budget: %s", write)
	assert.LessOrEqual(t, len(done), doneBudget, "task_update done's result, over its budget: %s", done)
}

// statedFigures checks docs/performance.md's "Context an agent spends"
// against what TestTheContextACycleCostsAnAgent measured: each budget
// exactly, each figure within 1% (timestamps' trailing zeros are trimmed,
// so a record's length moves by a byte or two).
func statedFigures(t *testing.T, figures map[string][2]int, peers ...peerFigure) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "performance.md"))
	require.NoError(t, err)
	doc := strings.Join(strings.Fields(string(b)), " ")
	start := strings.Index(doc, "## Context an agent spends")
	require.GreaterOrEqual(t, start, 0, "docs/performance.md has no section \"Context an agent spends\"")
	doc = doc[start:]
	if end := strings.Index(doc[1:], "## "); end >= 0 {
		doc = doc[:end+1]
	}
	atoi := func(s string) int {
		n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
		require.NoError(t, err, s)
		return n
	}
	for label, want := range figures {
		m := regexp.MustCompile(regexp.QuoteMeta(label) + ` ([\d,]+) \(([\d,]+)\)`).FindStringSubmatch(doc)
		require.NotNil(t, m, "docs/performance.md no longer states %q with its budget", label)
		got, budget := atoi(m[1]), atoi(m[2])
		assert.Equal(t, want[1], budget, "docs/performance.md: the budget of %q", label)
		assert.InDelta(t, want[0], got, float64(want[0])/100, "docs/performance.md: %q is %d now", label, want[0])
	}
	for _, p := range peers {
		assert.Contains(t, doc, fmt.Sprintf("%d tools, %s |", p.tools, thousands(p.bytes)), "docs/performance.md: %s's tools", p.name)
		assert.Contains(t, doc, "= "+thousands(p.cycle)+" |", "docs/performance.md: %s's cycle", p.name)
	}
}

// peerFigure is what the test counts for a peer's tools and cycle.
type peerFigure struct {
	name                string
	tools, bytes, cycle int
}

// thousands writes n with commas, as the docs do (9,062).
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

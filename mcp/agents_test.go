package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// teamTOML makes every actor a dev, who may write, claim and lock
// anything, and root the admin: only root holds admin.tokens.
const teamTOML = `default_role = "dev"

[roles.dev]
artifacts_read = ["**"]
artifacts_write = ["**"]
notes_read = ["*"]
notes_write = ["*"]
tasks = ["add", "claim", "finish"]
locks = ["**"]

[actors]
root = ["admin"]
`

// team is a workspace under teamTOML where alice holds a claim and the
// lease on plan.md (whose fencing token is lease), and bob wrote once.
type team struct {
	ws    *workspace.Workspace
	task  workspace.Task
	lease workspace.Lease
}

func newTeam(t *testing.T, dsn string) team {
	t.Helper()
	ctx := context.Background()
	ws := openWS(t, dsn)
	_, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(teamTOML)})
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: "plan.md", Content: []byte("v1")})
	require.NoError(t, err)
	_, err = ws.Tasks().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewTask{Title: "write the plan"})
	require.NoError(t, err)
	tm := team{ws: ws}
	tm.task, err = ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "alice", Lease: time.Hour})
	require.NoError(t, err)
	tm.lease, err = ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "artifact:plan.md", Owner: "alice", TTL: time.Hour})
	require.NoError(t, err)
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "bob"}, workspace.NotePut{Kind: "decision", Key: "style", Body: "gofmt"})
	require.NoError(t, err)
	return tm
}

// TestAgentsToolListsWhatAgentsListSays: the list has one line per agent
// of agents.List, in its order, with its state, claims and leases, under
// the server's rule; get is agents.Get's summary with its rule stated.
func TestAgentsToolListsWhatAgentsListSays(t *testing.T) {
	for _, b := range allBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			tm := newTeam(t, b.dsn(t))
			ctx := context.Background()
			// A stale rule (anyone holding work is stale at once) and the
			// default one (alice, who wrote just now, is working).
			for _, rule := range []agents.Rule{{}, {StaleAfter: time.Nanosecond}} {
				s := mcp.NewServer(tm.ws, mcp.Options{Actor: "lead", Agents: rule})
				t.Cleanup(func() { _ = s.Close() })
				lead := connect(t, s, "", nil)
				got := ok(t, lead, "agents", nil)
				want, err := agents.List(ctx, tm.ws, rule)
				require.NoError(t, err)
				lines, _ := got["agents"].([]any)
				require.Len(t, lines, len(want))
				for i, w := range want {
					l := lines[i].(map[string]any)
					assert.Equal(t, w.Actor, l["actor"])
					assert.Equal(t, string(w.State), l["state"], w.Actor)
					assert.Equal(t, len(w.Claims), len(asSlice(l["claims"])), w.Actor)
					assert.Equal(t, len(w.Leases), len(asSlice(l["leases"])), w.Actor)
				}
				byActor := map[string]map[string]any{}
				for _, l := range lines {
					byActor[l.(map[string]any)["actor"].(string)] = l.(map[string]any)
				}
				alice := byActor["alice"]
				require.NotNil(t, alice)
				assert.Equal(t, []any{tm.task.ID}, alice["claims"])
				assert.Equal(t, []any{"artifact:plan.md"}, alice["leases"])
				assert.Equal(t, "idle", byActor["bob"]["state"], "holds nothing, wrote just now")
				if rule.StaleAfter == 0 {
					assert.Equal(t, "working", alice["state"])
				} else {
					assert.Equal(t, "stale", alice["state"])
				}
				// The same list from action=list, said.
				assert.Equal(t, got, ok(t, lead, "agents", map[string]any{"action": "list"}))

				one := ok(t, lead, "agents", map[string]any{"action": "get", "agent": "alice"})
				a, err := agents.Get(ctx, tm.ws, rule, "alice")
				require.NoError(t, err)
				assert.Equal(t, string(a.State), one["state"])
				assert.Equal(t, rule.Explain(a.State), one["rule"])
				require.Len(t, one["claims"], 1)
				assert.Equal(t, tm.task.ID, one["claims"].([]any)[0].(map[string]any)["id"])
				require.Len(t, one["leases"], 1)
				assert.Equal(t, float64(tm.lease.Token), one["leases"].([]any)[0].(map[string]any)["token"])
				fails(t, lead, "agents", map[string]any{"action": "get", "agent": "nobody"}, mcp.ClassNotFound)
			}
		})
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// patchPlan writes plan.md over the HTTP API as alice, fenced with fence,
// and returns the problem code of the refusal ("" when it was taken).
func patchPlan(t *testing.T, url string, fence int64) string {
	t.Helper()
	body := fmt.Sprintf(`{"actor":"alice","fence":%d,"content":"from HTTP"}`, fence)
	req, err := http.NewRequest(http.MethodPatch, url+"/v1/artifacts/plan.md", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode == http.StatusOK {
		return ""
	}
	var p struct {
		Code string `json:"code"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&p))
	return p.Code
}

// eventsAfter are the types of the events after seq.
func eventsAfter(t *testing.T, ws *workspace.Workspace, seq int64) []string {
	t.Helper()
	page, err := ws.Events().Read(context.Background(), workspace.EventQuery{AfterSeq: seq, Limit: 100})
	require.NoError(t, err)
	var types []string
	for _, e := range page.Events {
		types = append(types, e.Type)
	}
	return types
}

// TestAgentsToolStopsPausesAndResumesForTheAdminOnly: under a policy, bob
// (a dev) is refused each of stop, pause and resume as forbidden on
// admin.tokens, and nothing is written but the refusals' denied events;
// root pauses alice (her write is refused as paused, over MCP and over
// HTTP alike), resumes her (her write is taken), then stops her: her
// fenced write is stale_fence and her heartbeat lock_lost, over MCP as
// over HTTP, and another agent can claim her task.
func TestAgentsToolStopsPausesAndResumesForTheAdminOnly(t *testing.T) {
	tm := newTeam(t, sqliteBackend.dsn(t))
	ctx := context.Background()
	_, hs := httpServer(t, tm.ws, server.Options{})
	root := connect(t, newServer(t, tm.ws, "root"), "", nil)
	bob := connect(t, newServer(t, tm.ws, "bob"), "", nil)
	alice := connect(t, newServer(t, tm.ws, "alice"), "", nil)

	before := head(t, tm.ws)
	for _, action := range []string{"stop", "pause", "resume"} {
		te := fails(t, bob, "agents", map[string]any{"action": action, "agent": "alice"}, mcp.ClassForbidden)
		assert.Equal(t, "admin.tokens", te.Action, action)
		assert.Contains(t, te.Hint, "do not retry", action)
	}
	for _, typ := range eventsAfter(t, tm.ws, before) {
		assert.Equal(t, workspace.EventDenied, typ, "a refused stop, pause or resume writes only its refusal")
	}
	held, err := agents.Get(ctx, tm.ws, agents.Rule{}, "alice")
	require.NoError(t, err)
	assert.Len(t, held.Claims, 1, "alice keeps her claim")
	assert.Len(t, held.Leases, 1, "alice keeps her lease")
	ok(t, alice, "artifact_write", map[string]any{"name": "plan.md", "content": "v2", "fence": tm.lease.Token})

	// Pause: the pause message needs alice's ack; her writes are refused.
	p := ok(t, root, "agents", map[string]any{"action": "pause", "agent": "alice", "message": "hold on", "ack_seconds": 600})
	assert.Equal(t, "alice", p["actor"])
	msg := p["message"].(map[string]any)
	assert.Equal(t, "pause", msg["type"])
	assert.Equal(t, "hold on", msg["body"])
	assert.NotEmpty(t, msg["deadline"], "ack_seconds sets the ack's deadline")
	again := ok(t, root, "agents", map[string]any{"action": "pause", "agent": "alice"})
	assert.Equal(t, msg["id"], again["message"].(map[string]any)["id"], "pausing a paused agent answers the first pause")
	r := call(t, alice, "artifact_write", map[string]any{"name": "plan.md", "content": "v3", "fence": tm.lease.Token})
	require.True(t, r.isError)
	assert.Equal(t, mcp.ClassPaused, r.err.Error)
	assert.Equal(t, r.err.Error, patchPlan(t, hs.URL, tm.lease.Token), "the same refusal over HTTP")

	ok(t, root, "agents", map[string]any{"action": "resume", "agent": "alice", "message": "go on"})
	ok(t, alice, "artifact_write", map[string]any{"name": "plan.md", "content": "v3", "fence": tm.lease.Token})
	fails(t, root, "agents", map[string]any{"action": "resume", "agent": "alice"}, mcp.ClassNotFound)

	// Stop: alice loses her lease (its fence) and her claim.
	st := ok(t, root, "agents", map[string]any{"action": "stop", "agent": "alice", "message": "looping"})
	assert.Equal(t, []any{"artifact:plan.md"}, st["leases"])
	assert.Equal(t, []any{tm.task.ID}, st["tasks"])
	for _, e := range st["events"].([]any) {
		assert.Equal(t, "root", e.(map[string]any)["actor"])
	}
	te := fails(t, alice, "artifact_write", map[string]any{"name": "plan.md", "content": "v4", "fence": tm.lease.Token}, mcp.ClassStaleFence)
	assert.Equal(t, te.Error, patchPlan(t, hs.URL, tm.lease.Token), "the same refusal over HTTP")
	_, err = tm.ws.Artifacts().Update(ctx, workspace.Write{Actor: "alice", Fence: tm.lease.Token}, workspace.ByName("plan.md"),
		workspace.ArtifactChange{Content: []byte("v4")})
	p2, isProblem := wire.ProblemOf(err)
	require.True(t, isProblem)
	assert.Equal(t, te.Error, p2.Code, "the wire table's code for the library's error")
	fails(t, alice, "task_update", map[string]any{"id": tm.task.ID, "action": "heartbeat"}, mcp.ClassLockLost)
	next := ok(t, bob, "task_claim", nil)
	assert.Equal(t, tm.task.ID, next["id"], "another agent claims her task")
}

// TestAgentsToolOverHTTPActsAsTheToken: without a policy, a token whose
// role is not admin is refused a stop (as over /v1), and nothing but the
// refusal is written; an admin's token stops the agent through the agents
// tool, and the stopped agent's next call through its own session is
// refused, its token revoked.
func TestAgentsToolOverHTTPActsAsTheToken(t *testing.T) {
	ws := openWS(t, sqliteBackend.dsn(t))
	ctx := context.Background()
	srv, hs := httpServer(t, ws, server.Options{RequireToken: true})
	token := func(actor, role string) string {
		secret, _, err := srv.Tokens().Create(ctx, agents.TokenRequest{Actor: actor, Role: role, By: "root"})
		require.NoError(t, err)
		return secret
	}
	session := func(secret string) map[string]string { return map[string]string{"Authorization": "Bearer " + secret} }
	alice, err := httpConnect(t, hs.URL, "2025-11-25", session(token("alice", "dev")))
	require.NoError(t, err)
	bob, err := httpConnect(t, hs.URL, "", session(token("bob", "dev")))
	require.NoError(t, err)
	root, err := httpConnect(t, hs.URL, "", session(token("root", "admin")))
	require.NoError(t, err)
	ok(t, alice, "lock", map[string]any{"op": "acquire", "resource": "file:go.mod", "ttl_seconds": 3600})

	lines := ok(t, bob, "agents", nil)["agents"].([]any)
	var names []string
	for _, l := range lines {
		names = append(names, l.(map[string]any)["actor"].(string))
	}
	assert.Contains(t, names, "alice", "any caller reads the list, as GET /v1/agents")

	before := head(t, ws)
	te := fails(t, bob, "agents", map[string]any{"action": "stop", "agent": "alice"}, mcp.ClassForbidden)
	assert.Equal(t, "admin.tokens", te.Action)
	for _, typ := range eventsAfter(t, ws, before) {
		assert.Equal(t, workspace.EventDenied, typ)
	}
	ok(t, alice, "status", nil)

	st := ok(t, root, "agents", map[string]any{"action": "stop", "agent": "alice"})
	assert.Len(t, st["tokens"], 1)
	assert.Equal(t, []any{"file:go.mod"}, st["leases"])
	_, err = alice.CallTool(testCtx(t), &sdk.CallToolParams{Name: "status"})
	require.Error(t, err, "the stopped agent's token is refused")
	a, err := agents.Get(ctx, ws, agents.Rule{}, "alice")
	require.NoError(t, err)
	assert.Equal(t, agents.Gone, a.State)
}

// TestAgentsToolBadInputWritesNothing: each refusal of bad input is
// invalid (or too_large) naming the argument, and the log does not move.
func TestAgentsToolBadInputWritesNothing(t *testing.T) {
	ws := openWS(t, sqliteBackend.dsn(t))
	cs := connect(t, newServer(t, ws, "root"), "", nil)
	ok(t, cs, "task_add", map[string]any{"title": "t"})
	long := strings.Repeat("a", workspace.MaxActorLen+1)
	type args = map[string]any
	cases := []struct {
		name  string
		args  args
		class string
		field string
	}{
		{"unknown action", args{"action": "kill", "agent": "alice"}, mcp.ClassInvalid, "action"},
		{"action not a string", args{"action": 3}, mcp.ClassInvalid, "action"},
		{"stop without an agent", args{"action": "stop"}, mcp.ClassInvalid, "agent"},
		{"pause with an empty agent", args{"action": "pause", "agent": ""}, mcp.ClassInvalid, "agent"},
		{"resume without an agent", args{"action": "resume"}, mcp.ClassInvalid, "agent"},
		{"get without an agent", args{"action": "get"}, mcp.ClassInvalid, "agent"},
		{"list naming an agent", args{"agent": "alice"}, mcp.ClassInvalid, "agent"},
		{"an over-long agent", args{"action": "stop", "agent": long}, mcp.ClassInvalid, "agent"},
		{"an over-long agent to get", args{"action": "get", "agent": long}, mcp.ClassInvalid, "agent"},
		{"an agent with a newline", args{"action": "stop", "agent": "a\nb"}, mcp.ClassInvalid, "agent"},
		{"an agent with a NUL", args{"action": "pause", "agent": "a\x00b"}, mcp.ClassInvalid, "agent"},
		{"an over-long message", args{"action": "pause", "agent": "alice", "message": strings.Repeat("m", workspace.MaxTextLen+1)}, "", "message"},
		{"a message to list", args{"message": "why"}, mcp.ClassInvalid, "message"},
		{"ack_seconds to stop", args{"action": "stop", "agent": "alice", "ack_seconds": 60}, mcp.ClassInvalid, "ack_seconds"},
		{"negative ack_seconds", args{"action": "pause", "agent": "alice", "ack_seconds": -1}, mcp.ClassInvalid, "ack_seconds"},
		{"ack_seconds over the maximum", args{"action": "pause", "agent": "alice", "ack_seconds": int(workspace.MaxTTL.Seconds()) + 1}, mcp.ClassInvalid, "ack_seconds"},
		{"an unknown argument", args{"actor": "alice"}, mcp.ClassInvalid, "arguments"},
	}
	h := head(t, ws)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, cs, "agents", c.args)
			require.True(t, r.isError, r.text)
			if c.class != "" {
				assert.Equal(t, c.class, r.err.Error, r.text)
			} else {
				assert.Contains(t, []string{mcp.ClassInvalid, mcp.ClassTooLarge}, r.err.Error, r.text)
			}
			assert.Equal(t, c.field, r.err.Field, r.text)
			assert.NotContains(t, r.err.Hint, "--as", "the hint is about the caller's actor, not the agent named")
		})
	}
	assert.Equal(t, h, head(t, ws), "bad input writes nothing")
}

// TestAgentsToolOverHTTPJudgesByTheServersRule: /mcp is given the
// server's thresholds of the state rule, so the agents tool there says
// what /v1/agents says (alice, holding work, is stale at once).
func TestAgentsToolOverHTTPJudgesByTheServersRule(t *testing.T) {
	tm := newTeam(t, sqliteBackend.dsn(t))
	_, hs := httpServer(t, tm.ws, server.Options{Agents: agents.Rule{StaleAfter: time.Nanosecond}})
	cs, err := httpConnect(t, hs.URL, "", map[string]string{wire.ActorHeader: "lead"})
	require.NoError(t, err)
	got := ok(t, cs, "agents", nil)
	states := map[string]string{}
	for _, l := range got["agents"].([]any) {
		states[l.(map[string]any)["actor"].(string)] = l.(map[string]any)["state"].(string)
	}
	assert.Equal(t, "stale", states["alice"], "the server's rule, not the default (working)")

	req, err := http.NewRequest(http.MethodGet, hs.URL+"/v1/agents", nil)
	require.NoError(t, err)
	req.Header.Set(wire.ActorHeader, "lead")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var page struct {
		Agents []struct {
			Actor string `json:"actor"`
			State string `json:"state"`
		} `json:"agents"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&page))
	require.NotEmpty(t, page.Agents)
	for _, a := range page.Agents {
		assert.Equal(t, a.State, states[a.Actor], "%s: /v1/agents and /mcp agree", a.Actor)
	}
}

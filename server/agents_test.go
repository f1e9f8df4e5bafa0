package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/agents"
	_ "github.com/agentspace/agentspace/backend/remote"
	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// TestStopAgentRevokesItsTokensAndEndsWhatItHolds: an agent working
// through its token holds a claim and a lease; the operator stops it over
// HTTP. One batch revokes its token, ends its lease (revoking the fencing
// token) and returns its claim; afterwards its token is refused, its
// fenced write is stale, another agent claims the task, and its summary
// says it is gone.
func TestStopAgentRevokesItsTokensAndEndsWhatItHolds(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{RequireToken: true})
	ctx := context.Background()
	zombie, zinfo, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "zombie"})
	require.NoError(t, err)
	op, _, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "operator", Role: "admin"})
	require.NoError(t, err)
	peer, _, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "peer"})
	require.NoError(t, err)
	_, err = e.ws.Artifacts().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewArtifact{Name: "out.md", Content: []byte("v1")})
	require.NoError(t, err)
	task, err := e.ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "write out.md"})
	require.NoError(t, err)

	var claimed workspace.Task
	e.ok(200, &claimed, "POST", "/v1/tasks/claim", map[string]any{"lease": "1h"}, bearer(zombie)...)
	require.Equal(t, task.ID, claimed.ID)
	var lease workspace.Lease
	e.ok(200, &lease, "POST", "/v1/locks/artifact:out.md/acquire", map[string]any{"ttl": "1h"}, bearer(zombie)...)

	var agent agents.Agent
	e.ok(200, &agent, "GET", "/v1/agents/zombie", nil, bearer(op)...)
	assert.Equal(t, agents.Working, agent.State)
	assert.Len(t, agent.Claims, 1)
	assert.Len(t, agent.Leases, 1)
	require.Len(t, agent.Tokens, 1)
	assert.Equal(t, zinfo.ID, agent.Tokens[0].ID)

	var stop wire.AgentStop
	e.ok(200, &stop, "POST", "/v1/agents/zombie/stop", map[string]any{"message": "looping"}, bearer(op)...)
	assert.Equal(t, []string{zinfo.ID}, stop.Tokens)
	assert.Equal(t, []string{"artifact:out.md"}, stop.Leases)
	assert.Equal(t, []string{task.ID}, stop.Tasks)
	require.Len(t, stop.Events, 3, "the token, the lease and the claim, in one batch")
	for i, ev := range stop.Events {
		assert.Equal(t, "operator", ev.Actor)
		if i > 0 {
			assert.Equal(t, stop.Events[i-1].Seq+1, ev.Seq, "consecutive: one batch")
		}
	}

	require.ErrorIs(t, e.fails(401, "GET", "/v1/whoami", nil, bearer(zombie)...), wire.ErrUnauthorized, "its token is refused")
	_, err = e.ws.Artifacts().Update(ctx, workspace.Write{Actor: "zombie", Fence: lease.Token}, workspace.ByName("out.md"),
		workspace.ArtifactChange{Content: []byte("late")})
	assert.ErrorIs(t, err, workspace.ErrStaleFence, "its fenced write, even in process")
	var next workspace.Task
	e.ok(200, &next, "POST", "/v1/tasks/claim", map[string]any{"lease": "1h"}, bearer(peer)...)
	assert.Equal(t, task.ID, next.ID, "another agent claims its task")

	e.ok(200, &agent, "GET", "/v1/agents/zombie", nil, bearer(op)...)
	assert.Equal(t, agents.Gone, agent.State, "holding nothing, every token revoked")
	assert.Empty(t, agent.Claims)
	assert.Empty(t, agent.Leases)
	var all struct {
		Agents []agents.Agent `json:"agents"`
	}
	e.ok(200, &all, "GET", "/v1/agents", nil, bearer(op)...)
	states := map[string]agents.State{}
	for _, a := range all.Agents {
		states[a.Actor] = a.State
	}
	assert.Equal(t, agents.Working, states["peer"])
	assert.Equal(t, agents.Gone, states["zombie"])
	assert.Equal(t, agents.Idle, states["operator"], "wrote lately, holds nothing")
	require.ErrorIs(t, e.fails(404, "GET", "/v1/agents/nobody", nil, bearer(op)...), workspace.ErrNotFound)
}

// TestStopWithoutAPolicyNeedsAnAdminToken: with no policy, a token of any
// other role (or none) cannot stop an agent, over the stop route or a
// batch: 403 forbidden naming admin.tokens, the refusal recorded as a
// denied event and nothing else written; the admin's tokens stay live.
// An admin-role token stops it.
func TestStopWithoutAPolicyNeedsAnAdminToken(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{RequireToken: true})
	ctx := context.Background()
	admin, _, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "op", Role: "admin"})
	require.NoError(t, err)
	observer, _, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "mallory", Role: "observer"})
	require.NoError(t, err)
	plain, _, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "eve"})
	require.NoError(t, err)
	_, err = e.ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:a", Owner: "op", TTL: time.Hour})
	require.NoError(t, err)

	for _, tok := range []string{observer, plain} {
		head, err := e.ws.Events().Head(ctx)
		require.NoError(t, err)
		err = e.fails(403, "POST", "/v1/agents/op/stop", map[string]any{}, bearer(tok)...)
		var fe *workspace.ForbiddenError
		require.True(t, errorsAs(err, &fe), "%v", err)
		assert.Equal(t, "admin.tokens", fe.Action)
		assert.Contains(t, fe.Reason, "no policy")
		e.fails(403, "POST", "/v1/batch", map[string]any{"ops": []map[string]any{{"op": "stop_actor", "actor": "op"}}}, bearer(tok)...)
		page, err := e.ws.Events().Read(ctx, workspace.EventQuery{AfterSeq: head})
		require.NoError(t, err)
		for _, ev := range page.Events {
			assert.Equal(t, workspace.EventDenied, ev.Type, "a refused stop wrote %+v", ev)
		}
		e.ok(200, nil, "GET", "/v1/whoami", nil, bearer(admin)...)
	}
	var stop wire.AgentStop
	e.ok(200, &stop, "POST", "/v1/agents/eve/stop", map[string]any{}, bearer(admin)...)
	assert.Len(t, stop.Tokens, 1)
}

// TestAgentStateRule drives the rule's thresholds with events of known
// age: a holder that wrote lately is working, one that did not is stale,
// a lapsed claim is stale, and a holder of nothing is idle, then gone.
func TestAgentStateRule(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{})
	ctx := context.Background()
	_, err := e.ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "t"})
	require.NoError(t, err)
	_, err = e.ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "worker", Lease: time.Hour})
	require.NoError(t, err)
	state := func(rule agents.Rule, actor string) agents.State {
		a, err := agents.Get(ctx, e.ws, rule, actor)
		require.NoError(t, err)
		return a.State
	}
	assert.Equal(t, agents.Working, state(agents.Rule{}, "worker"))
	assert.Equal(t, agents.Stale, state(agents.Rule{StaleAfter: time.Nanosecond}, "worker"), "holds work, wrote nothing since")
	assert.Equal(t, agents.Idle, state(agents.Rule{}, "lead"))
	assert.Equal(t, agents.Gone, state(agents.Rule{GoneAfter: time.Nanosecond}, "lead"))

	_, err = e.ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "u"})
	require.NoError(t, err)
	short, err := e.ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "sleeper", Lease: time.Millisecond})
	require.NoError(t, err)
	for {
		if got, err := e.ws.Tasks().Get(ctx, short.ID); err == nil && time.Now().After(got.LeaseExpiresAt) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	assert.Equal(t, agents.Stale, state(agents.Rule{}, "sleeper"), "its claim lapsed")
	_, err = agents.Stop(ctx, e.ws, agents.StopRequest{Actor: "sleeper", By: "operator"})
	require.NoError(t, err)
	st, _ := e.do(http.MethodGet, "/v1/agents/sleeper", nil)
	assert.Equal(t, 200, st)
}

// TestToolUseIsTheHeartbeatEndToEnd: over a real server with TouchEvery,
// ann works through a served client (backend/remote) and mo through an
// MCP session at /mcp, each holding a 2s claim. Both keep calling (reads
// and tool calls, no heartbeat of their own) and keep their claims well
// past their first leases, never renewed beyond 2s; once they stop, both
// claims lapse and bob takes both tasks. Without TouchEvery a request
// renews nothing. The cap and the expiry are tested deterministically in
// package workspace (touch_test.go); this is the one test on real time.
func TestToolUseIsTheHeartbeatEndToEnd(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{TouchEvery: 100 * time.Millisecond, MCP: mcpAt})
	ctx := context.Background()
	for range 2 {
		_, err := e.ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "t"})
		require.NoError(t, err)
	}
	remote, err := workspace.Open(ctx, e.hs.URL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = remote.Close() })
	annTask, err := remote.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "ann", Lease: 2 * time.Second})
	require.NoError(t, err)
	mo := mcpSession(t, e.hs.URL, "mo")
	res, err := mo.CallTool(ctx, &sdk.CallToolParams{Name: "task_claim", Arguments: map[string]any{"lease_seconds": 2}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	moTasks, err := e.ws.Tasks().List(ctx, workspace.TaskFilter{Assignee: "mo", Status: workspace.TaskInProgress})
	require.NoError(t, err)
	require.Len(t, moTasks.Tasks, 1)
	moTask := moTasks.Tasks[0]

	asAnn := workspace.WithPrincipal(ctx, workspace.Principal{Actor: "ann"})
	until := annTask.LeaseExpiresAt
	if moTask.LeaseExpiresAt.After(until) {
		until = moTask.LeaseExpiresAt
	}
	until = until.Add(2 * time.Second)
	for time.Now().Before(until) {
		_, err := remote.Tasks().List(asAnn, workspace.TaskFilter{Limit: 1})
		require.NoError(t, err)
		res, err := mo.CallTool(ctx, &sdk.CallToolParams{Name: "status", Arguments: map[string]any{}})
		require.NoError(t, err)
		require.False(t, res.IsError, "%v", res.Content)
		time.Sleep(50 * time.Millisecond)
	}
	for who, id := range map[string]string{"ann": annTask.ID, "mo": moTask.ID} {
		cur, err := e.ws.Tasks().Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, workspace.TaskInProgress, cur.Status, "%s kept its claim by its calls, past its first lease", who)
		assert.Equal(t, who, cur.Assignee)
		assert.Greater(t, cur.Version, int64(2), "%s's claim was renewed", who)
		assert.LessOrEqual(t, cur.LeaseExpiresAt.Sub(cur.UpdatedAt), 2*time.Second, "never renewed beyond its own lease")
	}

	// They stop calling: both claims lapse on time and bob gets both tasks.
	deadline := time.Now().Add(30 * time.Second)
	got := map[string]bool{}
	for len(got) < 2 {
		next, err := e.ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "bob", Lease: time.Hour})
		if err == nil {
			got[next.ID] = true
			continue
		}
		require.ErrorIs(t, err, workspace.ErrNoTask)
		require.True(t, time.Now().Before(deadline), "a claim never lapsed")
		time.Sleep(20 * time.Millisecond)
	}
	assert.Equal(t, map[string]bool{annTask.ID: true, moTask.ID: true}, got)

	off := newEnv(t, sqliteDSN(t), server.Options{})
	_, err = off.ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "t"})
	require.NoError(t, err)
	var claimed workspace.Task
	off.ok(200, &claimed, "POST", "/v1/tasks/claim", map[string]any{"lease": "1h"}, as, "ann")
	off.ok(200, nil, "GET", "/v1/status", nil, as, "ann")
	cur, err := off.ws.Tasks().Get(ctx, claimed.ID)
	require.NoError(t, err)
	assert.Equal(t, claimed.Version, cur.Version, "no renewal without TouchEvery")
}

// mcpAt is the MCP endpoint wsctl serves at /mcp (cmd/wsctl/mcphttp.go).
func mcpAt(p server.MCPParams) server.MCPEndpoint {
	m := mcp.NewServer(p.Workspace, mcp.Options{Version: p.Version, Logger: p.Logger, Redact: p.Redact})
	h := m.HTTPHandler(func(r *http.Request) mcp.Caller {
		c := p.Caller(r)
		return mcp.Caller{Actor: c.Actor, Bound: c.Bound, TokenID: c.TokenID, Expires: c.Expires}
	}, mcp.HTTPOptions{MaxBodyBytes: p.MaxBodyBytes})
	return mcpEndpoint{h, m}
}

type mcpEndpoint struct {
	http.Handler
	*mcp.Server
}

func (e mcpEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) { e.Handler.ServeHTTP(w, r) }

// mcpSession is an MCP client session at base's /mcp acting as actor.
func mcpSession(t *testing.T, base, actor string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: base + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: actorTransport(actor)}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// actorTransport names the acting agent on every request, as a server
// without tokens takes it.
type actorTransport string

func (a actorTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(wire.ActorHeader, string(a))
	return http.DefaultTransport.RoundTrip(r)
}

// TestAgentSummaryCountsDenialsAndStatesItsRule: a write the policy
// refuses counts as a denial in the agent's summary, and the rule is
// stated with the thresholds in force.
func TestAgentSummaryCountsDenialsAndStatesItsRule(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{})
	ctx := context.Background()
	policy := "[roles.watcher]\nartifacts_read = [\"**\"]\n\n[actors]\nroot = [\"admin\"]\nwendy = [\"watcher\"]\n"
	_, err := e.ws.Artifacts().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(policy)})
	require.NoError(t, err)
	_, err = e.ws.Tasks().Create(ctx, workspace.Write{Actor: "wendy"}, workspace.NewTask{Title: "not hers to make"})
	require.ErrorIs(t, err, workspace.ErrForbidden)
	rule := agents.Rule{StaleAfter: 5 * time.Minute, GoneAfter: 3 * time.Hour}
	a, err := agents.Get(ctx, e.ws, rule, "wendy")
	require.NoError(t, err)
	assert.Equal(t, 1, a.Denials)
	assert.Equal(t, 0, a.Conflicts)
	assert.Equal(t, agents.Idle, a.State)
	assert.Equal(t, "holds nothing and wrote something within 3h0m0s", rule.Explain(a.State))
	assert.Contains(t, rule.Explain(agents.Working), "within 5m0s")
	assert.Contains(t, agents.Rule{}.Explain(agents.Stale), "within 2m0s", "the defaults for zero fields")
	assert.Contains(t, rule.Explain("sleeping"), "not a state")
}

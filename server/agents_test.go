package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	zombie, zinfo, err := e.srv.Tokens().Create(ctx, server.TokenRequest{Actor: "zombie"})
	require.NoError(t, err)
	op, _, err := e.srv.Tokens().Create(ctx, server.TokenRequest{Actor: "operator"})
	require.NoError(t, err)
	peer, _, err := e.srv.Tokens().Create(ctx, server.TokenRequest{Actor: "peer"})
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

	var agent server.Agent
	e.ok(200, &agent, "GET", "/v1/agents/zombie", nil, bearer(op)...)
	assert.Equal(t, server.AgentWorking, agent.State)
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
	assert.Equal(t, server.AgentGone, agent.State, "holding nothing, every token revoked")
	assert.Empty(t, agent.Claims)
	assert.Empty(t, agent.Leases)
	var all struct {
		Agents []server.Agent `json:"agents"`
	}
	e.ok(200, &all, "GET", "/v1/agents", nil, bearer(op)...)
	states := map[string]server.AgentState{}
	for _, a := range all.Agents {
		states[a.Actor] = a.State
	}
	assert.Equal(t, server.AgentWorking, states["peer"])
	assert.Equal(t, server.AgentGone, states["zombie"])
	assert.Equal(t, server.AgentIdle, states["operator"], "wrote lately, holds nothing")
	require.ErrorIs(t, e.fails(404, "GET", "/v1/agents/nobody", nil, bearer(op)...), workspace.ErrNotFound)
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
	state := func(rule server.AgentRule, actor string) server.AgentState {
		a, err := server.GetAgent(ctx, e.ws, rule, actor)
		require.NoError(t, err)
		return a.State
	}
	assert.Equal(t, server.AgentWorking, state(server.AgentRule{}, "worker"))
	assert.Equal(t, server.AgentStale, state(server.AgentRule{StaleAfter: time.Nanosecond}, "worker"), "holds work, wrote nothing since")
	assert.Equal(t, server.AgentIdle, state(server.AgentRule{}, "lead"))
	assert.Equal(t, server.AgentGone, state(server.AgentRule{GoneAfter: time.Nanosecond}, "lead"))

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
	assert.Equal(t, server.AgentStale, state(server.AgentRule{}, "sleeper"), "its claim lapsed")
	_, err = server.StopAgent(ctx, e.ws, server.StopRequest{Actor: "sleeper", By: "operator"})
	require.NoError(t, err)
	st, _ := e.do(http.MethodGet, "/v1/agents/sleeper", nil)
	assert.Equal(t, 200, st)
}

// TestRequestsAreTheActorsHeartbeat: with TouchEvery, an agent that keeps
// making requests keeps its claim well past its lease without a heartbeat
// of its own; once it stops, the claim lapses and another agent takes the
// task. Without TouchEvery a request renews nothing.
func TestRequestsAreTheActorsHeartbeat(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{TouchEvery: 100 * time.Millisecond})
	ctx := context.Background()
	task, err := e.ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "t"})
	require.NoError(t, err)
	var claimed workspace.Task
	e.ok(200, &claimed, "POST", "/v1/tasks/claim", map[string]any{"lease": "2s"}, as, "ann")
	require.Equal(t, task.ID, claimed.ID)

	until := claimed.LeaseExpiresAt.Add(2 * time.Second)
	for time.Now().Before(until) {
		e.ok(200, nil, "GET", "/v1/status", nil, as, "ann")
		time.Sleep(50 * time.Millisecond)
	}
	cur, err := e.ws.Tasks().Get(ctx, task.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskInProgress, cur.Status, "kept by its requests, past its first lease")
	assert.Equal(t, "ann", cur.Assignee)
	assert.LessOrEqual(t, cur.LeaseExpiresAt.Sub(cur.UpdatedAt), 2*time.Second, "never renewed beyond its own lease")

	// It stops calling: the claim lapses on time and bob gets the task.
	deadline := time.Now().Add(30 * time.Second)
	for {
		next, err := e.ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "bob", Lease: time.Hour})
		if err == nil {
			assert.Equal(t, task.ID, next.ID)
			break
		}
		require.ErrorIs(t, err, workspace.ErrNoTask)
		require.True(t, time.Now().Before(deadline), "the claim never lapsed")
		time.Sleep(20 * time.Millisecond)
	}

	off := newEnv(t, sqliteDSN(t), server.Options{})
	_, err = off.ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "t"})
	require.NoError(t, err)
	off.ok(200, &claimed, "POST", "/v1/tasks/claim", map[string]any{"lease": "1h"}, as, "ann")
	off.ok(200, nil, "GET", "/v1/status", nil, as, "ann")
	cur, err = off.ws.Tasks().Get(ctx, claimed.ID)
	require.NoError(t, err)
	assert.Equal(t, claimed.Version, cur.Version, "no renewal without TouchEvery")
}

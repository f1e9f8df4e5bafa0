package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

const serverPolicy = `
[roles.planner]
artifacts_read  = ["plan-*"]
artifacts_write = ["plan-*"]
notes_read = ["decision"]

[roles.coder]
artifacts_read  = ["code-*", "plan-*"]
artifacts_write = ["code-*"]
notes_read = ["*"]

[actors]
root = ["admin"]
ann  = ["coder"]
`

// TestTokenRoleIsWhatThePolicyChecks runs a server that requires tokens,
// under a policy: a token for role planner can read and write only what
// planner may, whatever actor the body names and whatever roles the policy
// gives the token's actor (ann is a coder; her planner token is not).
func TestTokenRoleIsWhatThePolicyChecks(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{RequireToken: true})
	ctx := context.Background()
	_, err := e.ws.Artifacts().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(serverPolicy)})
	require.NoError(t, err)
	for _, name := range []string{"plan-a", "code-a"} {
		_, err = e.ws.Artifacts().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: name, Content: []byte("x")})
		require.NoError(t, err)
	}
	_, err = e.ws.Notes().Put(ctx, workspace.Write{Actor: "root"}, workspace.NotePut{Kind: "constraint", Key: "k", Body: "b"})
	require.NoError(t, err)
	plannerTok, _, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "ann", Role: "planner", By: "root"})
	require.NoError(t, err)
	coderTok, _, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "ann", By: "root"})
	require.NoError(t, err)

	// Reads: the planner token sees plans only, and gets 403 for code.
	var page workspace.ArtifactPage
	e.ok(200, &page, "GET", "/v1/artifacts", nil, bearer(plannerTok)...)
	var names []string
	for _, a := range page.Artifacts {
		names = append(names, a.Name)
	}
	assert.Equal(t, []string{workspace.PolicyArtifact, "plan-a"}, names)
	err = e.fails(403, "GET", "/v1/artifacts/code-a", nil, bearer(plannerTok)...)
	var fe *workspace.ForbiddenError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "ann", fe.Actor)
	assert.Equal(t, []string{"planner"}, fe.Roles)
	assert.Equal(t, "artifact.read", fe.Action)
	assert.Equal(t, "code-a", fe.Object)
	assert.Equal(t, "artifacts_read", fe.Rule)
	require.ErrorIs(t, e.fails(403, "GET", "/v1/notes/constraint/k", nil, bearer(plannerTok)...), workspace.ErrForbidden)
	// An actor header or body naming an admin changes nothing.
	require.ErrorIs(t, e.fails(403, "GET", "/v1/artifacts/code-a", nil, "Authorization", "Bearer "+plannerTok, wire.ActorHeader, "root"), workspace.ErrForbidden)

	// Writes: only plans; naming another actor in the body is refused too.
	head := e.head()
	require.ErrorIs(t, e.fails(403, "POST", "/v1/artifacts", map[string]any{"name": "code-b", "content": "x"}, bearer(plannerTok)...), workspace.ErrForbidden)
	require.ErrorIs(t, e.fails(403, "POST", "/v1/artifacts", map[string]any{"name": "code-b", "content": "x", "actor": "root"}, bearer(plannerTok)...), workspace.ErrForbidden)
	require.ErrorIs(t, e.fails(403, "POST", "/v1/batch", map[string]any{"ops": []any{
		map[string]any{"op": "create_artifact", "name": "plan-b", "content": "x"},
		map[string]any{"op": "create_artifact", "name": "code-b", "content": "x"},
	}}, bearer(plannerTok)...), workspace.ErrForbidden)
	_, err = e.ws.Artifacts().Get(ctx, workspace.ByName("plan-b"))
	require.ErrorIs(t, err, workspace.ErrNotFound, "a refused batch writes nothing")
	evs, err := e.ws.Events().Read(ctx, workspace.EventQuery{AfterSeq: head})
	require.NoError(t, err)
	for _, ev := range evs.Events {
		assert.Equal(t, workspace.EventDenied, ev.Type, "only denied events were written")
	}
	var a workspace.Artifact
	e.ok(201, &a, "POST", "/v1/artifacts", map[string]any{"name": "plan-c", "content": "x"}, bearer(plannerTok)...)
	assert.Equal(t, "ann", a.CreatedBy)

	// A token without a role has the policy's roles of its actor.
	e.ok(200, &a, "GET", "/v1/artifacts/code-a", nil, bearer(coderTok)...)
	e.ok(201, &a, "POST", "/v1/artifacts", map[string]any{"name": "code-c", "content": "x"}, bearer(coderTok)...)
}

// TestTokenRoleSeesNoEventOfWhatItMayNotRead: a token for role planner
// reads the log (a page, the stream, the status) without one event about
// an artifact or a note planner may not read, whatever the request names
// (filters; an actor header naming another is refused); the stream's
// cursor still moves past them.
func TestTokenRoleSeesNoEventOfWhatItMayNotRead(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{RequireToken: true})
	ctx := context.Background()
	root := workspace.Write{Actor: "root"}
	_, err := e.ws.Artifacts().Create(ctx, root, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(serverPolicy)})
	require.NoError(t, err)
	for _, name := range []string{"plan-a", "code-a"} {
		_, err = e.ws.Artifacts().Create(ctx, root, workspace.NewArtifact{Name: name, Content: []byte("x")})
		require.NoError(t, err)
	}
	_, err = e.ws.Notes().Put(ctx, root, workspace.NotePut{Kind: "constraint", Key: "k", Body: "b"})
	require.NoError(t, err)
	_, err = e.ws.Notes().Put(ctx, root, workspace.NotePut{Kind: "decision", Key: "d", Body: "b"})
	require.NoError(t, err)
	plannerTok, _, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "ann", Role: "planner", By: "root"})
	require.NoError(t, err)
	// A denied event about code-a, by the planner token.
	require.ErrorIs(t, e.fails(403, "GET", "/v1/artifacts/code-a", nil, bearer(plannerTok)...), workspace.ErrForbidden)
	head := e.head()

	hidden := func(ev workspace.Event) bool {
		return strings.HasPrefix(ev.Subject.Name, "code-") || ev.Subject.ID == "constraint/k"
	}
	// A header naming root does not read as root: it is refused.
	require.ErrorIs(t, e.fails(403, "GET", "/v1/events/history", nil, append(bearer(plannerTok), wire.ActorHeader, "root")...), wire.ErrForbidden)
	asPlanner := bearer(plannerTok)
	var all workspace.EventPage
	e.ok(200, &all, "GET", "/v1/events/history", nil, asPlanner...)
	var names []string
	for _, ev := range all.Events {
		require.False(t, hidden(ev), "event %d: %+v", ev.Seq, ev.Subject)
		names = append(names, ev.Subject.Name)
	}
	assert.Equal(t, []string{workspace.PolicyArtifact, "plan-a", "d"}, names)
	assert.Equal(t, head, all.Next)
	for _, q := range []string{"?subject_name=code-a", "?actor=root&subject_kind=artifact", "?subject_kind=note", "?subject_id=constraint/k", "?type=denied", "?after=2&limit=1"} {
		var page workspace.EventPage
		e.ok(200, &page, "GET", "/v1/events/history"+q, nil, asPlanner...)
		for _, ev := range page.Events {
			require.False(t, hidden(ev), "%s: event %d: %+v", q, ev.Seq, ev.Subject)
		}
	}
	var st workspace.Status
	e.ok(200, &st, "GET", "/v1/status", nil, asPlanner...)
	require.NotEmpty(t, st.RecentEvents)
	for _, ev := range st.RecentEvents {
		require.False(t, hidden(ev), "status: event %d: %+v", ev.Seq, ev.Subject)
	}

	// The stream: the backlog, then a live event planner may not read and
	// one it may. Heartbeats carry the head past the left-out events.
	ch, cancel := stream(t, e.hs.URL, "?heartbeat=20ms", 0, asPlanner...)
	defer cancel()
	_, err = e.ws.Artifacts().Update(ctx, root, workspace.ByName("code-a"), workspace.ArtifactChange{Content: []byte("y")})
	require.NoError(t, err)
	_, err = e.ws.Artifacts().Update(ctx, root, workspace.ByName("plan-a"), workspace.ArtifactChange{Content: []byte("y")})
	require.NoError(t, err)
	var got []workspace.Event
	for {
		r, ok := next(t, ch)
		require.True(t, ok, "the stream ended")
		if r.Data == "" {
			continue
		}
		var ev workspace.Event
		require.NoError(t, json.Unmarshal([]byte(r.Data), &ev))
		require.False(t, hidden(ev), "stream: event %d: %+v", ev.Seq, ev.Subject)
		got = append(got, ev)
		if ev.Seq > head {
			break
		}
	}
	last := got[len(got)-1]
	assert.Equal(t, "plan-a", last.Subject.Name)
	assert.Equal(t, head+2, last.Seq, "the live event planner may not read is left out, not renumbered")
	assert.Len(t, got, 4)
}

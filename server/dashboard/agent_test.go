package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/policy"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// TestAgentPageShowsWhatItHoldsAndDid: planner's page shows its state and
// the rule that gave it, its claim, its lease, its conflict, its recent
// events, and (to an operator only) its tokens without their secrets and
// the stop action. The agents list and the timeline's lanes link to it.
func TestAgentPageShowsWhatItHoldsAndDid(t *testing.T) {
	e := newEnv(t, server.Options{})
	s := seed(t, e.ws)
	ctx := context.Background()
	// A stale write of planner's: a conflict on its own plan.
	_, err := e.ws.Artifacts().Update(ctx, workspace.Write{Actor: "planner", IfVersion: 1}, workspace.ByName("plans/auth.md"),
		workspace.ArtifactChange{Content: []byte("# stale\n")})
	require.ErrorIs(t, err, workspace.ErrConflict)
	secret, info, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "planner", Role: "worker", By: "setup", TTL: -1})
	require.NoError(t, err)
	admin := e.token("ops", policy.AdminRole)
	reader := e.token("watcher", "")
	path := "/ui/agent?actor=planner"

	code, page := e.get(path, "Authorization", "Bearer "+reader)
	require.Equal(t, http.StatusOK, code, page)
	for _, want := range []string{
		`id="agent-state">working<`,
		"working: holds a claim or a lease, no claim of it has lapsed, and it wrote something within 2m0s.",
		"stale</dt><dd>holds a claim or a lease but wrote nothing within 2m0s", // the whole rule
		"Write the auth plan", "file:src/auth.go", ">" + itoa64(s.lease.Token) + "<",
		">1 conflicts</a>", ">0 denials</a>", "expected version 1, current is 3", "artifact.updated", "task.claimed",
		`hx-trigger="sse:events"`, // live: every event of the agent's changes its page
		"shown to an operator",
	} {
		assert.Contains(t, page, want)
	}
	assert.NotContains(t, page, info.ID, "tokens are an operator's to see")
	assert.NotContains(t, page, "/ui/action/agent/stop", "no stop action for a reader")

	code, page = e.get(path, "Authorization", "Bearer "+admin)
	require.Equal(t, http.StatusOK, code, page)
	assert.Contains(t, page, `<td class="mono">`+info.ID+`</td><td>worker</td><td>never</td>`)
	assert.Contains(t, page, `<span class="tag ok">live</span>`)
	_, tail, _ := strings.Cut(secret, info.ID)
	require.NotEmpty(t, tail)
	assert.NotContains(t, page, secret, "never the token itself")
	assert.NotContains(t, page, tail, "nor its secret part")
	assert.Contains(t, page, `action="/ui/action/agent/stop"`)
	assert.Contains(t, page, `name="actor" value="planner"`)

	code, frag := e.get("/ui/frag/agent?actor=planner", "Authorization", "Bearer "+admin)
	require.Equal(t, http.StatusOK, code, frag)
	assert.NotContains(t, frag, "<!doctype html>")
	assert.Contains(t, frag, `id="agent-state">working<`)

	_, list := e.get("/ui/agents")
	assert.Contains(t, list, `<a href="/ui/agent?actor=planner">planner</a>`)
	assert.Contains(t, list, `class="tag agent-working"`)
	assert.Contains(t, list, `class="tag agent-idle"`, "builder holds nothing and wrote lately")
	_, tl := e.get("/ui/timeline")
	assert.Contains(t, tl, `<a href="/ui/agent?actor=planner">`, "a lane opens its agent's page")

	// The stop on its page is the agents list's: the same form, checks
	// and library call.
	code, body := e.post("/ui/action/agent/stop", url.Values{"actor": {"planner"}}, "Authorization", "Bearer "+admin)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "stopped planner: 1 tokens revoked, 1 leases ended, 1 claims returned")
	_, page = e.get(path, "Authorization", "Bearer "+admin)
	assert.Contains(t, page, `id="agent-state">gone<`, "holding nothing, every token revoked")
	assert.Contains(t, page, "no tasks in progress")
	assert.Contains(t, page, "no live leases")
	assert.Contains(t, page, `<span class="tag bad">revoked</span>`)

	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/ui/agent", 400, "actor: missing"},
		{"/ui/agent?actor=nobody", 404, "agent nobody: nothing held or written by it"},
		{"/ui/agent?actor=" + strings.Repeat("x", 1025), 400, "longer than 1024 bytes"},
	} {
		code, body := e.get(c.path)
		assert.Equal(t, c.code, code, c.path)
		assert.Contains(t, body, c.want, c.path)
	}
}

// TestAgentPageCountsDenials: a write the policy refuses is a denial on
// the agent's page, linked to its denied events.
func TestAgentPageCountsDenials(t *testing.T) {
	e := newEnv(t, server.Options{})
	ctx := context.Background()
	_, err := e.ws.Artifacts().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(opsPolicy)})
	require.NoError(t, err)
	for range 2 {
		_, err = e.ws.Tasks().Create(ctx, workspace.Write{Actor: "wendy"}, workspace.NewTask{Title: "not mine to make"})
		require.ErrorIs(t, err, workspace.ErrForbidden)
	}
	code, page := e.get("/ui/agent?actor=wendy")
	require.Equal(t, http.StatusOK, code, page)
	assert.Contains(t, page, `<a href="/ui/feed?actor=wendy&amp;type=denied">2 denials</a>`)
	assert.Contains(t, page, `id="agent-state">idle<`)
}

// hostileActors are agent names that must render inert and readable:
// markup, script, a javascript: URL, right-to-left text with a combining
// mark. (Names with control or format characters, a bidi override say,
// are refused by the workspace: they reach the page only in a query or a
// message, tested below.)
var hostileActors = []string{
	`<script>alert(1)</script>`,
	`"><img src=x onerror=alert(2)>`,
	`javascript:alert(3)`,
	"agent-e\u0301-\u0645\u0631\u062d\u0628\u0627",
}

// TestAgentPagesOfHostileNamesAreInert: agents named to attack the page
// hold claims and leases and collide; their pages, the agents list and
// the timeline render every name escaped, format characters shown as
// [U+XXXX], and the stop action names the agent exactly.
func TestAgentPagesOfHostileNamesAreInert(t *testing.T) {
	e := newEnv(t, server.Options{})
	ctx := context.Background()
	admin := e.token("ops", policy.AdminRole)
	a, err := e.ws.Artifacts().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewArtifact{Name: "shared.md", Content: []byte("v1")})
	require.NoError(t, err)
	for i, name := range hostileActors {
		_, err := e.ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "task of agent " + strconv.Itoa(i)})
		require.NoError(t, err)
		_, err = e.ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: name, Lease: time.Hour})
		require.NoError(t, err)
		_, err = e.ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:" + name, Owner: name, TTL: time.Hour})
		require.NoError(t, err)
		_, err = e.ws.Artifacts().Update(ctx, workspace.Write{Actor: name, IfVersion: a.Version + int64(i) + 5, Message: "\u202egnp.exe \u200b" + name}, workspace.ByID(a.ID),
			workspace.ArtifactChange{Content: []byte("x")})
		require.ErrorIs(t, err, workspace.ErrConflict)
		_, _, err = e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: name, Role: "worker", By: "setup"})
		require.NoError(t, err)
	}
	_, err = e.ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "evil\u202Egnp.exe", Lease: time.Hour})
	require.ErrorIs(t, err, workspace.ErrInvalid, "a name with a bidi override is refused")
	code, page := e.get("/ui/agent?"+url.Values{"actor": {"evil\u202Egnp.exe"}}.Encode(), "Authorization", "Bearer "+admin)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, page, "agent evil[U&#43;202E]gnp.exe: nothing held or written by it", "shown, not obeyed")
	assert.NotContains(t, page, "\u202E")

	pages := []string{"/ui/agents", "/ui/timeline"}
	for _, name := range hostileActors {
		pages = append(pages, "/ui/agent?"+url.Values{"actor": {name}}.Encode())
	}
	for _, p := range pages {
		code, page = e.get(p, "Authorization", "Bearer "+admin)
		require.Equal(t, http.StatusOK, code, p)
		// The timeline's own drawing is the one svg element allowed.
		assert.LessOrEqual(t, strings.Count(page, "<svg"), 1, p)
		assertInert(t, p, strings.Replace(page, `<svg id="timeline"`, `<drawing id="timeline"`, 1))
		assert.NotContains(t, page, "\u202E", p)
		assert.NotContains(t, page, "\u200B", p)
	}
	_, page = e.get("/ui/agent?"+url.Values{"actor": {hostileActors[3]}}.Encode(), "Authorization", "Bearer "+admin)
	assert.Contains(t, page, `<span id="agent-name">`+hostileActors[3]+`</span>`)
	assert.Contains(t, page, `id="agent-state">working<`)
	assert.Contains(t, page, ">1 conflicts</a>")
	assert.Contains(t, page, "[U&#43;202E]gnp.exe [U&#43;200B]agent-", "the message's format and control characters are shown")
	_, page = e.get("/ui/agent?"+url.Values{"actor": {hostileActors[0]}}.Encode(), "Authorization", "Bearer "+admin)
	assert.Contains(t, page, `<span id="agent-name">&lt;script&gt;alert(1)&lt;/script&gt;</span>`)
	_, page = e.get("/ui/agent?"+url.Values{"actor": {hostileActors[2]}}.Encode(), "Authorization", "Bearer "+admin)
	assert.NotContains(t, page, `href="javascript:`)

	// Stopping one by its page's form stops that agent, no other.
	code, body := e.post("/ui/action/agent/stop", url.Values{"actor": {hostileActors[1]}}, "Authorization", "Bearer "+admin)
	require.Equal(t, http.StatusOK, code, body)
	assertInert(t, "the stop's answer", body)
	for i, name := range hostileActors {
		_, err := e.ws.Locks().Get(ctx, "file:"+name)
		if i == 1 {
			assert.ErrorIs(t, err, workspace.ErrNotFound, "its lease ended")
		} else {
			assert.NoError(t, err, "%q keeps its lease", name)
		}
	}
}

// TestAgentPageOnEveryBackend: the team's session on SQLite, JSON files
// and PostgreSQL gives each agent a page with its state, what it holds
// and its conflict.
func TestAgentPageOnEveryBackend(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *env) {
		team(t, e.ws)
		code, page := e.get("/ui/agent?actor=worker-1")
		require.Equal(t, http.StatusOK, code, page)
		assert.Contains(t, page, `id="agent-state">idle<`, "it holds nothing now and wrote lately")
		assert.Contains(t, page, ">1 conflicts</a>")
		assert.Contains(t, page, "task.released")
		code, page = e.get("/ui/agent?actor=reviewer")
		require.Equal(t, http.StatusOK, code, page)
		assert.Contains(t, page, `id="agent-state">working<`)
		assert.Contains(t, page, "write the tests", "the task worker-1 released, its second attempt")
		assert.Contains(t, page, "lock.forced", "its forced release is among its events")
		_, list := e.get("/ui/agents")
		assert.Contains(t, list, `<a href="/ui/agent?actor=worker-2">worker-2</a>`)
	})
}

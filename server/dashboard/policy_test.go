package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/policy"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/server/dashboard"
	"github.com/agentspace/agentspace/workspace"
)

// opsPolicy lets opal release locks on files and change others' tasks;
// wendy only reads. root administers the policy.
const opsPolicy = `
[roles.ops]
artifacts_read = ["**"]
notes_read     = ["*"]
locks          = ["file:src/**"]
tasks          = ["others"]

[roles.watcher]
artifacts_read = ["**"]
notes_read     = ["*"]

[actors]
root  = ["admin"]
setup = ["admin"] # makes the tokens
opal  = ["ops"]
wendy = ["watcher"]
`

func TestOperatorActionsUnderAPolicyAreTheTokenActorsWrites(t *testing.T) {
	e := newEnv(t, server.Options{})
	s := seed(t, e.ws)
	ctx := context.Background()
	_, err := e.ws.Artifacts().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(opsPolicy)})
	require.NoError(t, err)
	opal, wendy := e.token("opal", ""), e.token("wendy", "")
	opalAsWatcher := e.token("opal", "watcher") // the token's role is checked, not the actor's
	admin := e.token("anyone", policy.AdminRole)
	release := url.Values{"resource": {s.lease.Resource}}
	retry := url.Values{"id": {s.failed.ID}}

	// Those the policy refuses get a 403 naming the rule; nothing is written.
	for _, tok := range []string{wendy, opalAsWatcher} {
		code, body := e.post("/ui/action/lock/release", release, "Authorization", "Bearer "+tok)
		assert.Equal(t, http.StatusForbidden, code, body)
		assert.Contains(t, body, "may not lock")
		assert.Contains(t, body, "locks")
		code, body = e.post("/ui/action/task/retry", retry, "Authorization", "Bearer "+tok)
		assert.Equal(t, http.StatusForbidden, code, body)
		assert.Contains(t, body, "may not task.others")
	}
	_, err = e.ws.Locks().Get(ctx, s.lease.Resource)
	require.NoError(t, err, "the lock is still held")
	tk, err := e.ws.Tasks().Get(ctx, s.failed.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskFailed, tk.Status, "the task is still failed")
	denied, err := e.ws.Events().Read(ctx, workspace.EventQuery{Types: []string{workspace.EventDenied}})
	require.NoError(t, err)
	var who []string
	for _, ev := range denied.Events {
		who = append(who, ev.Actor)
	}
	assert.ElementsMatch(t, []string{"wendy", "wendy", "opal", "opal"}, who, "each refusal is a denied event by the token's actor")

	// No token is still refused before the policy is asked.
	code, body := e.post("/ui/action/lock/release", release)
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, body, "need a token")

	// The CSRF rule still holds for a governed token's cookie.
	cookie := dashboard.CookieName + "=" + opal
	_, page := e.get("/ui/locks", "Cookie", cookie)
	m := csrfRE.FindStringSubmatch(page)
	require.NotNil(t, m, "a token the policy governs sees the action forms")
	code, body = e.post("/ui/action/lock/release", release, "Cookie", cookie)
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, body, "CSRF")

	// opal's role grants both; they are recorded as opal's writes.
	code, body = e.post("/ui/action/lock/release", url.Values{"resource": {s.lease.Resource}, "csrf": {m[1]}}, "Cookie", cookie, "Sec-Fetch-Site", "same-origin")
	require.Equal(t, http.StatusOK, code, body)
	_, err = e.ws.Locks().Get(ctx, s.lease.Resource)
	assert.ErrorIs(t, err, workspace.ErrNotFound)
	forced, err := e.ws.Events().Read(ctx, workspace.EventQuery{Types: []string{workspace.EventLockForced}})
	require.NoError(t, err)
	require.Len(t, forced.Events, 1)
	assert.Equal(t, "opal", forced.Events[0].Actor)
	code, body = e.post("/ui/action/task/retry", retry, "Authorization", "Bearer "+opal)
	require.Equal(t, http.StatusOK, code, body)
	tk, err = e.ws.Tasks().Get(ctx, s.failed.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskPending, tk.Status)
	assert.Equal(t, "opal", tk.UpdatedBy)

	// An admin-role token still acts: the policy's built-in admin role.
	asAdmin := workspace.WithPrincipal(ctx, workspace.Principal{Actor: s.running.Assignee, Roles: []string{policy.AdminRole}})
	_, err = e.ws.Tasks().Fail(asAdmin, workspace.Write{Actor: s.running.Assignee}, s.running.ID, workspace.TaskResult{Summary: "stopped"})
	require.NoError(t, err)
	code, body = e.post("/ui/action/task/retry", url.Values{"id": {s.running.ID}}, "Authorization", "Bearer "+admin)
	require.Equal(t, http.StatusOK, code, body)
}

// TestReadsFollowThePolicy: the dashboard reads as its viewer, as the
// HTTP API does: a token's actor sees only what the policy lets it read,
// and no token reads as the policy's default_role (here: nothing).
func TestReadsFollowThePolicy(t *testing.T) {
	e := newEnv(t, server.Options{})
	ctx := context.Background()
	root := workspace.Write{Actor: "root"}
	_, err := e.ws.Artifacts().Create(ctx, root, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(`
[roles.planner]
artifacts_read = ["plans/**"]
[actors]
root  = ["admin"]
setup = ["admin"]
bob   = ["planner"]
`)})
	require.NoError(t, err)
	for _, name := range []string{"plans/a.md", "secret/k"} {
		_, err := e.ws.Artifacts().Create(ctx, root, workspace.NewArtifact{Name: name, Content: []byte("content of " + name)})
		require.NoError(t, err)
	}
	bob := []string{"Authorization", "Bearer " + e.token("bob", "")}
	admin := []string{"Authorization", "Bearer " + e.token("root", "")}

	_, list := e.get("/ui/artifacts", bob...)
	assert.Contains(t, list, "plans/")
	assert.NotContains(t, list, "secret/")
	_, list = e.get("/ui/artifacts?prefix=secret/", bob...)
	assert.NotContains(t, list, "secret/k")
	for _, path := range []string{"/ui/artifact?name=secret/k", "/ui/artifact/raw?name=secret/k", "/ui/diff?name=secret/k&a=1&b=1"} {
		code, body := e.get(path, bob...)
		assert.Equal(t, http.StatusForbidden, code, path)
		assert.NotContains(t, body, "content of secret/k", path)
		assert.Contains(t, body, "may not artifact.read", path)
	}
	_, feed := e.get("/ui/feed", bob...)
	assert.Contains(t, feed, "plans/a.md")
	assert.NotContains(t, feed, "secret/k", "the feed leaves out events about what bob may not read")
	_, page := e.get("/ui/artifact?name=plans/a.md", bob...)
	assert.Contains(t, page, "content of plans/a.md")

	_, list = e.get("/ui/artifacts")
	assert.NotContains(t, list, "plans/", "no token: the default role, none here")
	assert.NotContains(t, list, "secret/")

	_, list = e.get("/ui/artifacts?prefix=secret/", admin...)
	assert.Contains(t, list, "secret/k")
	_, raw := e.get("/ui/artifact/raw?name=secret/k", admin...)
	assert.Equal(t, "content of secret/k", raw)
}

package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/policy"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/server/dashboard"
	"github.com/agentspace/agentspace/workspace"
)

// csrfRE finds the CSRF token in a page's forms.
var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func TestOperatorActionsNeedAnAdminTokenAndTheCSRFToken(t *testing.T) {
	e := newEnv(t, server.Options{})
	s := seed(t, e.ws)
	admin := e.token("ops", policy.AdminRole)
	reader := e.token("watcher", "")
	cookie := dashboard.CookieName + "=" + admin
	form := url.Values{"resource": {s.lease.Resource}}

	// Nobody without the admin role sees the buttons or may act.
	_, page := e.get("/ui/locks")
	assert.NotContains(t, page, "/ui/action/lock/release")
	code, body := e.post("/ui/action/lock/release", form)
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, body, "need a token")
	code, body = e.post("/ui/action/lock/release", form, "Authorization", "Bearer "+reader)
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, body, "no policy, so operator actions need a token with the admin role")
	code, _ = e.post("/ui/action/lock/release", form, "Cookie", dashboard.CookieName+"="+reader)
	assert.Equal(t, http.StatusForbidden, code)
	code, _ = e.post("/ui/action/lock/release", form, "Authorization", "Bearer ast_nope")
	assert.Equal(t, http.StatusUnauthorized, code)

	// The admin's cookie alone is not enough: a form from another site has
	// no CSRF token, or is marked cross-site by the browser.
	code, body = e.post("/ui/action/lock/release", form, "Cookie", cookie)
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, body, "CSRF")
	_, page = e.get("/ui/locks", "Cookie", cookie)
	m := csrfRE.FindStringSubmatch(page)
	require.NotNil(t, m, "the admin's page has forms with a CSRF token")
	withCSRF := url.Values{"resource": {s.lease.Resource}, "csrf": {m[1]}}
	code, _ = e.post("/ui/action/lock/release", withCSRF, "Cookie", cookie, "Sec-Fetch-Site", "cross-site")
	assert.Equal(t, http.StatusForbidden, code)
	code, _ = e.post("/ui/action/lock/release", withCSRF, "Cookie", cookie, "Origin", "http://evil.example")
	assert.Equal(t, http.StatusForbidden, code)
	_, err := e.ws.Locks().Get(context.Background(), s.lease.Resource)
	require.NoError(t, err, "no refused action changed anything")

	code, body = e.post("/ui/action/lock/release", withCSRF, "Cookie", cookie, "HX-Request", "true", "Sec-Fetch-Site", "same-origin")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "released file:src/auth.go")
	_, err = e.ws.Locks().Get(context.Background(), s.lease.Resource)
	assert.ErrorIs(t, err, workspace.ErrNotFound)
	p, err := e.ws.Events().Read(context.Background(), workspace.EventQuery{Types: []string{workspace.EventLockForced}})
	require.NoError(t, err)
	require.Len(t, p.Events, 1)
	assert.Equal(t, "ops", p.Events[0].Actor, "the action is recorded as the token's actor")

	// Retry a failed task; requeue refuses a live claim (the workspace's
	// rule), and a bearer token needs no CSRF token.
	code, body = e.post("/ui/action/task/retry", url.Values{"id": {s.failed.ID}}, "Authorization", "Bearer "+admin)
	require.Equal(t, http.StatusOK, code, body)
	tk, err := e.ws.Tasks().Get(context.Background(), s.failed.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskPending, tk.Status)
	assert.Equal(t, "ops", tk.UpdatedBy)
	code, body = e.post("/ui/action/task/retry", url.Values{"id": {s.done.ID}}, "Authorization", "Bearer "+admin)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "only a failed task")
	code, body = e.post("/ui/action/task/requeue", url.Values{"id": {s.running.ID}}, "Authorization", "Bearer "+admin)
	assert.Equal(t, http.StatusConflict, code, body)
	tk, err = e.ws.Tasks().Get(context.Background(), s.running.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskInProgress, tk.Status, "a live claim stays its holder's")
}

func TestRequeueReturnsAStuckClaimToPending(t *testing.T) {
	e := newEnv(t, server.Options{})
	ctx := context.Background()
	tk, err := e.ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "stuck"})
	require.NoError(t, err)
	_, err = e.ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "crashed", Lease: 50 * time.Millisecond})
	require.NoError(t, err)
	admin := e.token("ops", policy.AdminRole)
	require.Eventually(t, func() bool {
		_, page := e.get("/", "Authorization", "Bearer "+admin)
		return strings.Contains(page, "/ui/action/task/requeue")
	}, 5*time.Second, 20*time.Millisecond, "a lapsed claim offers requeue")
	code, body := e.post("/ui/action/task/requeue", url.Values{"id": {tk.ID}}, "Authorization", "Bearer "+admin)
	require.Equal(t, http.StatusOK, code, body)
	got, err := e.ws.Tasks().Get(ctx, tk.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskPending, got.Status)
}

func TestRequireTokenSendsPagesToTheLoginForm(t *testing.T) {
	e := newEnv(t, server.Options{RequireToken: true})
	code, _ := e.get("/")
	assert.Equal(t, http.StatusSeeOther, code)
	code, _ = e.get("/ui/frag/board")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = e.get("/ui/stream")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, page := e.get("/ui/login")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, page, `name="token"`)

	tok := e.token("watcher", "")
	code, _ = e.post("/ui/login", url.Values{"token": {"ast_wrong"}})
	assert.Equal(t, http.StatusSeeOther, code)
	req, err := http.NewRequest(http.MethodPost, e.hs.URL+"/ui/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := noRedirect.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	var c *http.Cookie
	for _, k := range resp.Cookies() {
		if k.Name == dashboard.CookieName {
			c = k
		}
	}
	require.NotNil(t, c)
	assert.True(t, c.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, c.SameSite)
	code, page = e.get("/", "Cookie", c.Name+"="+c.Value)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, page, "watcher")

	_, err = e.srv.Tokens().Revoke(context.Background(), "setup", tok)
	require.NoError(t, err)
	code, _ = e.get("/", "Cookie", c.Name+"="+c.Value)
	assert.Equal(t, http.StatusSeeOther, code, "a revoked token's cookie goes back to the login form")
}

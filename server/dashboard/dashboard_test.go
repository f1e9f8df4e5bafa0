package dashboard_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/agents"
	_ "github.com/agentspace/agentspace/backend/postgres"
	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// env is a real server over a real SQLite file, with the dashboard at /.
type env struct {
	t   testing.TB
	dsn string
	ws  *workspace.Workspace
	srv *server.Server
	hs  *httptest.Server
}

func newEnv(t testing.TB, opts server.Options) *env {
	t.Helper()
	return newEnvOn(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"), opts)
}

// newEnvOn is newEnv on the store dsn names, opened with wsOpts if given
// (a controlled clock, say).
func newEnvOn(t testing.TB, dsn string, opts server.Options, wsOpts ...workspace.Options) *env {
	t.Helper()
	ws, err := workspace.Open(context.Background(), dsn, wsOpts...)
	require.NoError(t, err)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv, err := server.New(ws, opts)
	require.NoError(t, err)
	hs := httptest.NewUnstartedServer(srv)
	hs.Config.RegisterOnShutdown(srv.Drain)
	hs.Start()
	e := &env{t: t, dsn: dsn, ws: ws, srv: srv, hs: hs}
	t.Cleanup(func() {
		srv.Drain()
		hs.Close()
		_ = ws.Close()
	})
	return e
}

// other opens a second, private handle on the store: a writer that
// behaves as another process would.
func (e *env) other() *workspace.Workspace {
	e.t.Helper()
	ws, err := workspace.Open(context.Background(), e.dsn, workspace.Options{Private: true})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = ws.Close() })
	return ws
}

// get fetches path with optional header pairs.
func (e *env) get(path string, hdr ...string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.hs.URL+path, nil)
	require.NoError(e.t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := noRedirect.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp.StatusCode, string(b)
}

func (e *env) post(path string, form url.Values, hdr ...string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.hs.URL+path, strings.NewReader(form.Encode()))
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := noRedirect.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp.StatusCode, string(b)
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 30 * time.Second}

// token makes a token for actor with role.
func (e *env) token(actor, role string) string {
	e.t.Helper()
	tok, _, err := e.srv.Tokens().Create(context.Background(), agents.TokenRequest{Actor: actor, Role: role, By: "setup"})
	require.NoError(e.t, err)
	return tok
}

// seeded is what seed wrote.
type seeded struct {
	plan, blocked, ready, running, failed, done workspace.Task
	lease                                       workspace.Lease
}

// seed writes a small team's work: tasks in every column, a lock, an
// artifact with three versions, notes of two kinds.
func seed(t testing.TB, ws *workspace.Workspace) seeded {
	t.Helper()
	ctx := context.Background()
	w := func(actor string) workspace.Write { return workspace.Write{Actor: actor} }
	var s seeded
	var err error
	s.plan, err = ws.Tasks().Create(ctx, w("lead"), workspace.NewTask{Title: "Write the auth plan", Priority: 5, Labels: map[string]string{"area": "auth"}})
	require.NoError(t, err)
	s.blocked, err = ws.Tasks().Create(ctx, w("lead"), workspace.NewTask{Title: "Build the login endpoint", DependsOn: []string{s.plan.ID}, Labels: map[string]string{"area": "auth"}})
	require.NoError(t, err)
	s.ready, err = ws.Tasks().Create(ctx, w("lead"), workspace.NewTask{Title: "Update the changelog", Priority: 1})
	require.NoError(t, err)
	s.failed, err = ws.Tasks().Create(ctx, w("lead"), workspace.NewTask{Title: "Flaky integration test", Priority: 9})
	require.NoError(t, err)
	s.done, err = ws.Tasks().Create(ctx, w("lead"), workspace.NewTask{Title: "Set up CI", Priority: 8})
	require.NoError(t, err)
	// Claims take the highest priority first: failed (9), done (8), plan (5).
	c, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "tester", Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, s.failed.ID, c.ID)
	_, err = ws.Tasks().Fail(ctx, w("tester"), c.ID, workspace.TaskResult{Summary: "timed out twice"})
	require.NoError(t, err)
	c, err = ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "builder", Lease: time.Minute})
	require.NoError(t, err)
	require.Equal(t, s.done.ID, c.ID)
	_, err = ws.Tasks().Complete(ctx, w("builder"), c.ID, workspace.TaskResult{Summary: "green"})
	require.NoError(t, err)
	s.running, err = ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "planner", Lease: 10 * time.Minute})
	require.NoError(t, err)
	require.Equal(t, s.plan.ID, s.running.ID)
	s.lease, err = ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:src/auth.go", Owner: "planner", TTL: 10 * time.Minute})
	require.NoError(t, err)
	a, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "planner", Message: "first draft"}, workspace.NewArtifact{
		Name: "plans/auth.md", Kind: "plan", ContentType: "text/markdown", Content: []byte("# Auth plan\n\n- tokens\n- sessions\n")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Update(ctx, workspace.Write{Actor: "planner", Message: "add refresh"}, workspace.ByID(a.ID),
		workspace.ArtifactChange{Content: []byte("# Auth plan\n\n- tokens\n- refresh tokens\n- sessions\n")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Update(ctx, workspace.Write{Actor: "reviewer", Message: "drop sessions"}, workspace.ByID(a.ID),
		workspace.ArtifactChange{Content: []byte("# Auth plan\n\n- tokens\n- refresh tokens\n")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(ctx, w("builder"), workspace.NewArtifact{Name: "src/auth.go", Kind: "code", ContentType: "text/x-go", Content: []byte("package auth\n\nfunc Login() {}\n")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(ctx, w("builder"), workspace.NewArtifact{Name: "out/logo.png", Content: []byte{0x89, 'P', 'N', 'G', 0, 1, 2}})
	require.NoError(t, err)
	_, err = ws.Notes().Put(ctx, w("lead"), workspace.NotePut{Kind: "decision", Key: "jwt", Title: "Use JWT access tokens", Body: "Short-lived, 15 minutes."})
	require.NoError(t, err)
	_, err = ws.Notes().Put(ctx, w("tester"), workspace.NotePut{Kind: "friction", Key: "slow-ci", Title: "CI takes 20 minutes", Body: "Split the suite."})
	require.NoError(t, err)
	return s
}

func TestEveryViewAndFragmentRendersTheSeededWorkspace(t *testing.T) {
	e := newEnv(t, server.Options{})
	s := seed(t, e.ws)
	cases := []struct {
		path string
		want []string
	}{
		{"/", []string{"Write the auth plan", "planner", "Build the login endpoint", "Update the changelog", "Flaky integration test", "timed out twice", "Set up CI", `id="col-waiting"`, `id="col-ready"`}},
		{"/ui/locks", []string{"file:src/auth.go", "planner", ">" + itoa64(s.lease.Token) + "<", "left"}},
		{"/ui/feed", []string{"task.claimed", "Write the auth plan", "plans/auth.md", "drop sessions", "lock.acquired"}},
		{"/ui/artifacts", []string{"plans/", "src/", "out/"}},
		{"/ui/artifacts?prefix=plans/", []string{"plans/auth.md", "v3", "reviewer"}},
		{"/ui/artifact?name=plans/auth.md", []string{"<h1>Auth plan</h1>", "refresh tokens", "first draft", "add refresh", "drop sessions"}},
		{"/ui/artifact?name=plans/auth.md&v=1", []string{"<li>sessions</li>", "head is v3"}},
		{"/ui/artifact?name=src/auth.go", []string{`<pre class="code" data-lang="go">`, `<span class="tok-k">func</span> Login() {}`}},
		{"/ui/artifact?name=out/logo.png", []string{"Binary content", "download"}},
		{"/ui/diff?name=plans/auth.md&a=1&b=3", []string{`class="ins"`, "refresh tokens", `class="del"`, "sessions", "v1 (planner) → v3 (reviewer)"}},
		{"/ui/notes", []string{"Use JWT access tokens", "CI takes 20 minutes", "Short-lived, 15 minutes."}},
		{"/ui/notes?kind=friction", []string{"CI takes 20 minutes"}},
		{"/ui/agents", []string{"planner", "Write the auth plan", "file:src/auth.go", "tester", "builder"}},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			code, page := e.get(c.path)
			require.Equal(t, http.StatusOK, code, page)
			assert.Contains(t, page, "<!doctype html>")
			for _, w := range c.want {
				assert.Contains(t, page, w)
			}
			// The fragment is the page's main content alone.
			frag := "/ui/frag/board"
			if c.path != "/" {
				u, err := url.Parse(c.path)
				require.NoError(t, err)
				frag = "/ui/frag/" + strings.TrimPrefix(u.Path, "/ui/") + "?" + u.RawQuery
			}
			code, body := e.get(frag)
			require.Equal(t, http.StatusOK, code, body)
			assert.NotContains(t, body, "<!doctype html>")
			for _, w := range c.want {
				assert.Contains(t, body, w)
			}
		})
	}
	t.Run("notes of kind token are never shown", func(t *testing.T) {
		e.token("ops", "admin")
		_, page := e.get("/ui/notes")
		assert.NotContains(t, page, "token for ops")
		code, _ := e.get("/ui/notes?kind=token")
		assert.Equal(t, http.StatusForbidden, code)
	})
	t.Run("filters", func(t *testing.T) {
		_, page := e.get("/?label=area%3Dauth")
		assert.Contains(t, page, "Build the login endpoint")
		assert.NotContains(t, page, "Update the changelog")
		_, page = e.get("/?actor=tester")
		assert.Contains(t, page, "Flaky integration test")
		assert.NotContains(t, page, "Set up CI")
		_, page = e.get("/ui/feed?type=task.claimed&actor=builder")
		assert.Contains(t, page, "Set up CI")
		assert.NotContains(t, page, "Flaky integration test")
		_, page = e.get("/ui/feed?kind=artifact&subject=plans/auth.md")
		assert.Contains(t, page, "drop sessions")
		assert.NotContains(t, page, `class="ev ev-task"`)
	})
	t.Run("raw download is an attachment", func(t *testing.T) {
		resp, err := http.Get(e.hs.URL + "/ui/artifact/raw?name=out/logo.png")
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		assert.Equal(t, []byte{0x89, 'P', 'N', 'G', 0, 1, 2}, b)
		assert.Equal(t, "application/octet-stream", resp.Header.Get("Content-Type"))
		assert.Contains(t, resp.Header.Get("Content-Disposition"), "attachment")
	})
	t.Run("static files are embedded", func(t *testing.T) {
		for _, f := range []string{"htmx.min.js", "htmx-ext-sse.min.js", "dash.js", "dash.css", "LICENSE.htmx", "LICENSE.htmx-ext-sse"} {
			code, body := e.get("/ui/static/" + f)
			assert.Equal(t, http.StatusOK, code, f)
			assert.NotEmpty(t, body, f)
		}
	})
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }

func TestBadQueriesAreClearErrors(t *testing.T) {
	e := newEnv(t, server.Options{})
	seed(t, e.ws)
	cases := []struct {
		path string
		code int
		want string
	}{
		{"/?label=nolabel", 400, "want KEY=VALUE"},
		{"/?col=sideways", 400, "col"},
		{"/?page=0", 400, "page"},
		{"/ui/feed?kind=bogus", 400, "kind"},
		{"/ui/feed?type=%3Cscript%3E", 400, "type"},
		{"/ui/feed?before=x", 400, "before"},
		{"/ui/artifact", 400, "name: missing"},
		{"/ui/artifact?name=../etc/passwd", 400, "name"},
		{"/ui/artifact?name=nope.md", 404, "not found"},
		{"/ui/artifact?name=plans/auth.md&v=99", 404, "not found"},
		{"/ui/diff?name=plans/auth.md&a=x", 400, "a"},
		{"/ui/notes?kind=Bad%20Kind", 400, "kind"},
		{"/ui/nowhere", 404, "no such page"},
		{"/ui/stream?after=-1", 400, "after"},
	}
	for _, c := range cases {
		code, body := e.get(c.path)
		assert.Equal(t, c.code, code, c.path)
		assert.Contains(t, body, c.want, c.path)
		assert.Contains(t, body, `class="error"`, c.path)
	}
}

// hostile is text full of markup that must render inert.
const hostile = `<script>alert(1)</script>"><img src=x onerror=alert(2)>`

func TestHostileNamesTitlesAndContentRenderInert(t *testing.T) {
	e := newEnv(t, server.Options{})
	ctx := context.Background()
	w := workspace.Write{Actor: `ev"il<b>`, Message: hostile}
	_, err := e.ws.Tasks().Create(ctx, w, workspace.NewTask{Title: hostile, Description: hostile, Labels: map[string]string{"k": hostile}})
	require.NoError(t, err)
	name := `x/"><img src=x onerror=alert(3)>.md`
	_, err = e.ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: name, ContentType: "text/markdown",
		Content: []byte("# hi\n\n" + hostile + "\n\n[click](javascript:alert(4))\n\n<iframe src=\"https://example.com\"></iframe>\n")})
	require.NoError(t, err)
	_, err = e.ws.Artifacts().Update(ctx, w, workspace.ByName(name), workspace.ArtifactChange{Content: []byte(hostile + "\n")})
	require.NoError(t, err)
	_, err = e.ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "code/" + `<script>.js`, Content: []byte(hostile)})
	require.NoError(t, err)
	_, err = e.ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "decision", Key: "k", Title: hostile, Body: hostile})
	require.NoError(t, err)
	_, err = e.ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: hostile, Owner: hostile, TTL: time.Minute})
	require.NoError(t, err)

	q := url.QueryEscape
	for _, path := range []string{"/", "/ui/locks", "/ui/feed", "/ui/artifacts", "/ui/artifacts?prefix=x/", "/ui/artifact?name=" + q(name) + "&v=1",
		"/ui/artifact?name=" + q(name), "/ui/diff?name=" + q(name) + "&a=1&b=2", "/ui/artifact?name=" + q("code/<script>.js"),
		"/ui/notes", "/ui/agents", "/ui/feed?actor=" + q(hostile) + "&subject=" + q(hostile),
		"/?label=" + q("k="+hostile) + "&actor=" + q(hostile)} {
		code, page := e.get(path)
		require.Equal(t, http.StatusOK, code, path)
		assertInert(t, path, page)
	}
	_, page := e.get("/ui/artifact?name=" + q(name) + "&v=1")
	assert.Contains(t, page, "&lt;img src=x onerror=alert(3)&gt;", "the name is shown, escaped")
	assert.Contains(t, page, "raw HTML omitted", "markdown drops raw HTML")
	_, page = e.get("/")
	assert.Contains(t, page, "&lt;script&gt;alert(1)&lt;/script&gt;", "the title is shown, escaped")
}

var (
	tagRE     = regexp.MustCompile(`<([a-zA-Z][a-zA-Z0-9-]*)([^>]*)>`)
	quotedRE  = regexp.MustCompile(`"[^"]*"|'[^']*'`)
	handlerRE = regexp.MustCompile(`(?i)\son[a-z]+\s*=`)
	jsURLRE   = regexp.MustCompile(`(?i)\s(href|src|action|hx-get|hx-post|sse-connect)\s*=\s*"\s*javascript:`)
)

// assertInert checks every tag of page: the only scripts are our own
// files, there are no images, frames or embedded objects (the seeded
// workspace has none of its own), no event-handler attributes and no
// javascript: URLs. html/template quotes every attribute value and
// escapes '>' inside it, so a tag ends at the first '>'.
func assertInert(t *testing.T, where, page string) {
	t.Helper()
	for _, m := range tagRE.FindAllStringSubmatch(page, -1) {
		name, attrs := strings.ToLower(m[1]), m[2]
		switch name {
		case "script":
			assert.Regexp(t, `^ src="/ui/static/[a-z.-]+\.js"$`, attrs, "%s: a script that is not ours: %s", where, m[0])
		case "img", "iframe", "object", "embed", "svg", "math", "base", "b":
			t.Errorf("%s: an element from the content got through: %s", where, m[0])
		}
		assert.NotRegexp(t, handlerRE, quotedRE.ReplaceAllString(attrs, `""`), "%s: an event handler attribute: %s", where, m[0])
		assert.NotRegexp(t, jsURLRE, m[0], "%s: a javascript: URL: %s", where, m[0])
	}
}

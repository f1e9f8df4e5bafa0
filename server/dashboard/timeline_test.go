package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/json"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/shadow"
	"github.com/agentspace/agentspace/workspace"
)

// team writes a session of several agents: attempts that end done,
// failed and released, a claim still running, lock holds (one forced), a
// conflict on an artifact, and a task blocked then returned.
func team(t testing.TB, ws *workspace.Workspace) {
	t.Helper()
	ctx := context.Background()
	w := func(a string) workspace.Write { return workspace.Write{Actor: a} }
	mk := func(title string, prio int) workspace.Task {
		tk, err := ws.Tasks().Create(ctx, w("planner"), workspace.NewTask{Title: title, Priority: prio})
		require.NoError(t, err)
		return tk
	}
	claim := func(actor string) workspace.Task {
		tk, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: actor, Lease: 10 * time.Minute})
		require.NoError(t, err)
		return tk
	}
	mk("design the API", 9)
	mk("implement the handlers", 8)
	mk("write the tests", 7)
	mk("review the change", 6)
	parked := mk("migrate the schema", 1)
	_, err := ws.Tasks().Update(ctx, w("planner"), parked.ID, workspace.TaskChange{Status: ptr(workspace.TaskBlocked)})
	require.NoError(t, err)

	a := claim("worker-1")
	l, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "artifact:api/spec.md", Owner: "worker-1", TTL: time.Minute})
	require.NoError(t, err)
	spec, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "worker-1", Fence: l.Token}, workspace.NewArtifact{Name: "api/spec.md", Content: []byte("# API\n")})
	require.NoError(t, err)
	require.NoError(t, ws.Locks().Release(ctx, l))
	_, err = ws.Tasks().Complete(ctx, w("worker-1"), a.ID, workspace.TaskResult{Summary: "spec written", Artifacts: []string{"api/spec.md"}})
	require.NoError(t, err)

	b := claim("worker-2")
	c := claim("worker-1")
	// Both edit the spec from version 1: the second is a conflict.
	_, err = ws.Artifacts().Update(ctx, workspace.Write{Actor: "worker-2", IfVersion: spec.Version}, workspace.ByID(spec.ID), workspace.ArtifactChange{Content: []byte("# API\n\nhandlers\n")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Update(ctx, workspace.Write{Actor: "worker-1", IfVersion: spec.Version}, workspace.ByID(spec.ID), workspace.ArtifactChange{Content: []byte("# API\n\ntests\n")})
	require.ErrorIs(t, err, workspace.ErrConflict)
	_, err = ws.Tasks().Fail(ctx, w("worker-2"), b.ID, workspace.TaskResult{Summary: "the build broke"})
	require.NoError(t, err)
	_, err = ws.Tasks().Release(ctx, w("worker-1"), c.ID)
	require.NoError(t, err)
	_, err = ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:src/server.go", Owner: "worker-2", TTL: time.Minute})
	require.NoError(t, err)
	require.NoError(t, ws.Locks().ForceRelease(ctx, workspace.Write{Actor: "reviewer"}, "file:src/server.go"))
	claim("reviewer")
	// worker-2 waits for the schema's lock until worker-1 lets it go.
	held, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:schema.sql", Owner: "worker-1", TTL: time.Minute})
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() {
		l, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:schema.sql", Owner: "worker-2", TTL: time.Minute, Wait: true})
		if err == nil {
			err = ws.Locks().Release(ctx, l)
		}
		waited <- err
	}()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, ws.Locks().Release(ctx, held))
	require.NoError(t, <-waited)
}

func ptr[T any](v T) *T { return &v }

// onEveryBackend runs f on a fresh workspace of each backend: SQLite,
// JSON files and PostgreSQL (skipped where there is none).
func onEveryBackend(t *testing.T, f func(t *testing.T, e *env)) {
	for _, b := range []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "ws.db") }},
		{"json", func(t *testing.T) string { return "json:" + filepath.Join(t.TempDir(), "ws") }},
		{"postgres", func(t *testing.T) string { return pgtest.NewDSN(t) }},
	} {
		t.Run(b.name, func(t *testing.T) { f(t, newEnvOn(t, b.dsn(t), server.Options{})) })
	}
}

func TestTimelineDrawsEachAttemptHoldAndConflict(t *testing.T) {
	onEveryBackend(t, testTimelineDraws)
}

func testTimelineDraws(t *testing.T, e *env) {
	team(t, e.ws)
	code, page := e.get("/ui/timeline")
	require.Equal(t, http.StatusOK, code, page)
	assert.Contains(t, page, `<svg id="timeline"`)
	for _, lane := range []string{"worker-1", "worker-2", "reviewer"} {
		assert.Contains(t, page, `class="lane-name" x="4"`)
		assert.Contains(t, page, ">"+lane+"</text>", "a lane for %s", lane)
	}
	// The planner only made and blocked tasks: nothing to draw, no lane.
	assert.NotContains(t, page, ">planner</text>")
	for _, want := range []string{
		`class="attempt done"`, `class="attempt failed"`, `class="attempt released"`, `class="attempt open"`,
		`class="hold released"`, `class="hold forced"`, `class="mark conflict"`,
		"worker-1: design the API", "worker-2: implement the handlers", "reviewer: write the tests", "worker-1: write the tests",
		"worker-1 held artifact:api/spec.md",
		// Clicking a bar opens the task's events, or the locked artifact.
		`href="/ui/feed?kind=task&amp;subject=design&#43;the&#43;API"`, `href="/ui/artifact?name=api%2Fspec.md"`,
	} {
		assert.Contains(t, page, want)
	}
	assert.Regexp(t, `\d+ events, 3 agents, 8 bars, 1 marks`, page)
	// The page follows the log; a window that ends in the past does not.
	assert.Contains(t, page, `hx-trigger="sse:events"`)
	past := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	code, page = e.get("/ui/timeline?" + url.Values{"from": {past}, "to": {time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}}.Encode())
	require.Equal(t, http.StatusOK, code, page)
	assert.NotContains(t, page, "sse-connect")
	assert.Contains(t, page, "nothing happened in this window")
	assert.Contains(t, page, "later →")
}

func TestChartsCountTheFlow(t *testing.T) {
	onEveryBackend(t, testChartsCount)
}

func testChartsCount(t *testing.T, e *env) {
	team(t, e.ws)
	code, page := e.get("/ui/charts?span=15m")
	require.Equal(t, http.StatusOK, code, page)
	assert.Contains(t, page, "4 claims, 1 done, 1 failed, 1 conflicts, 0 denials")
	st, err := e.ws.Status(context.Background())
	require.NoError(t, err)
	// The queue depth ends at the counts of now.
	assert.Contains(t, page, "pending (now "+strconv.Itoa(st.Tasks[workspace.TaskPending])+")")
	assert.Contains(t, page, "in progress (now "+strconv.Itoa(st.Tasks[workspace.TaskInProgress])+")")
	assert.Contains(t, page, "blocked (now 1)")
	assert.Contains(t, page, `<polyline class="series ready"`)
	assert.Contains(t, page, `<rect class="done"`)
	assert.Contains(t, page, `<rect class="conflict"`)
	// The contention table names the artifact and who collided.
	assert.Regexp(t, `(?s)<table class="contention">.*artifact:api/spec.md.*worker-1 ×1`, page)
	assert.Regexp(t, `(?s)<table class="contention">.*file:src/server.go.*reviewer ×1`, page)
	assert.Regexp(t, `(?s)<table class="holds">.*under 1s</td><td>4</td>`, page)
	// worker-2's wait for the schema: in the histogram, the chart and the
	// contention table.
	assert.Regexp(t, `Lock wait time <span class="count">1 waits, \d+ms in all, longest \d+ms on file:schema.sql`, page)
	assert.Regexp(t, `(?s)id="waits".*100ms–1s</td><td>1</td>`, page)
	assert.Contains(t, page, `<rect class="waited"`)
	assert.Regexp(t, `(?s)<table class="contention">.*file:schema.sql</a></td><td>1</td><td>0</td><td>0</td><td>0</td><td>1</td><td><span class="tag">worker-2 ×1`, page)
}

func TestWindowQueriesAreCheckedAndLinked(t *testing.T) {
	e := newEnv(t, server.Options{})
	for _, c := range []struct{ path, want string }{
		{"/ui/timeline?span=50ms", "span"},
		{"/ui/timeline?span=lots", "span"},
		{"/ui/charts?from=yesterday", "from"},
		{"/ui/charts?to=2026-13-01T00:00:00Z", "to"},
		{"/ui/timeline?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z", "want from 100 milliseconds to 31 days"},
		{"/ui/timeline?from=2020-01-01T00:00:00Z&to=2026-01-01T00:00:00Z", "want from 100 milliseconds to 31 days"},
	} {
		code, body := e.get(c.path)
		assert.Equal(t, http.StatusBadRequest, code, c.path)
		assert.Contains(t, body, c.want, c.path)
		assert.Contains(t, body, `class="error"`, c.path)
	}
	// Zoom and pan keep the window's middle and span.
	code, page := e.get("/ui/timeline?from=2026-01-01T10:00:00Z&to=2026-01-01T12:00:00Z")
	require.Equal(t, http.StatusOK, code, page)
	for _, want := range []string{
		`href="/ui/timeline?from=2026-01-01T09%3A00%3A00Z&amp;to=2026-01-01T11%3A00%3A00Z"`, // earlier
		`href="/ui/timeline?from=2026-01-01T11%3A00%3A00Z&amp;to=2026-01-01T13%3A00%3A00Z"`, // later
		`href="/ui/timeline?from=2026-01-01T10%3A30%3A00Z&amp;to=2026-01-01T11%3A30%3A00Z"`, // in
		`href="/ui/timeline?from=2026-01-01T09%3A00%3A00Z&amp;to=2026-01-01T13%3A00%3A00Z"`, // out
	} {
		assert.Contains(t, page, want)
	}
}

// TestTheDefaultWindowFitsAShortLog: a log that began less than an hour
// ago (here well under a second) fills the default window instead of a
// sliver at the right of the last hour, and a window under a second is
// one a link may ask for.
func TestTheDefaultWindowFitsAShortLog(t *testing.T) {
	e := newEnv(t, server.Options{})
	team(t, e.ws)
	for _, path := range []string{"/ui/timeline", "/ui/charts"} {
		code, page := e.get(path)
		require.Equal(t, http.StatusOK, code, page)
		out := regexp.MustCompile(`class="zoom" href="/ui/[a-z]+\?span=([^"]+)"`).FindStringSubmatch(page)
		require.NotNil(t, out, "%s: a zoom out link", path)
		d, err := time.ParseDuration(out[1])
		require.NoError(t, err)
		assert.Less(t, d, time.Minute, "%s: the window is twice the log's age, not an hour", path)
		assert.NotContains(t, page, `class="on">1h<`, path)
	}
	_, page := e.get("/ui/timeline")
	xs := map[string]bool{}
	for _, m := range regexp.MustCompile(`<rect class="attempt [a-z-]+" x="([0-9.]+)"`).FindAllStringSubmatch(page, -1) {
		xs[m[1]] = true
	}
	assert.Greater(t, len(xs), 3, "the attempts spread over the drawing: %v", xs)
	// Asked for, the last hour is still the last hour.
	_, page = e.get("/ui/timeline?span=1h")
	assert.Contains(t, page, `class="on">1h<`)
	code, page := e.get("/ui/timeline?span=900ms")
	assert.Equal(t, http.StatusOK, code, page)
}

// bidi is a right-to-left override: text after it shows reversed.
const bidi = "\u202egnp.exe"

func TestTimelineAndChartsRenderHostileNamesInert(t *testing.T) {
	e := newEnv(t, server.Options{})
	ctx := context.Background()
	evil := `ev"il<script>`
	w := workspace.Write{Actor: evil, Message: hostile + bidi}
	tk, err := e.ws.Tasks().Create(ctx, w, workspace.NewTask{Title: hostile})
	require.NoError(t, err)
	_, err = e.ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: evil, Lease: time.Minute})
	require.NoError(t, err)
	_, err = e.ws.Tasks().Complete(ctx, workspace.Write{Actor: evil}, tk.ID, workspace.TaskResult{Summary: hostile})
	require.NoError(t, err)
	_, err = e.ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: hostile, Owner: evil, TTL: time.Minute})
	require.NoError(t, err)
	a, err := e.ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: `x/"'><svg onload=alert(5)>.md`, Content: []byte("a\n")})
	require.NoError(t, err)
	_, err = e.ws.Artifacts().Update(ctx, w, workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("b\n")})
	require.NoError(t, err)
	_, err = e.ws.Artifacts().Update(ctx, workspace.Write{Actor: evil, IfVersion: 1, Message: hostile + bidi}, workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("c\n")})
	require.ErrorIs(t, err, workspace.ErrConflict)
	for _, path := range []string{"/ui/timeline", "/ui/charts", "/ui/frag/timeline", "/ui/frag/charts", "/ui/changes"} {
		code, page := e.get(path)
		require.Equal(t, http.StatusOK, code, path)
		assertInertSVG(t, path, page)
		assert.NotContains(t, page, "\u202e", "%s: the bidi override is escaped", path)
	}
	_, page := e.get("/ui/timeline")
	assert.Contains(t, page, "ev&#34;il&lt;script&gt;", "the actor is shown, escaped")
	assert.Contains(t, page, "&lt;script&gt;alert(1)&lt;/script&gt;", "the title is shown, escaped")
}

// ourSVG are the SVG elements the timeline and charts draw.
var ourSVG = map[string]bool{"svg": true, "line": true, "text": true, "g": true, "rect": true, "circle": true, "polyline": true, "title": true}

// assertInertSVG is assertInert for pages that draw SVG: the only svg
// elements are the dashboard's own drawings, and nothing from the
// content becomes an element or an attribute.
func assertInertSVG(t *testing.T, where, page string) {
	t.Helper()
	for _, m := range tagRE.FindAllStringSubmatch(page, -1) {
		name, attrs := strings.ToLower(m[1]), m[2]
		if name == "svg" {
			assert.Regexp(t, `^ (id="timeline" )?class="(timeline|chart|hbar)"`, attrs, "%s: an svg that is not ours: %s", where, m[0])
			continue
		}
		if ourSVG[name] {
			continue
		}
		switch name {
		case "script":
			assert.Regexp(t, `^ src="/ui/static/[a-z.-]+\.js"$`, attrs, "%s: a script that is not ours: %s", where, m[0])
		case "img", "iframe", "object", "embed", "math", "base", "b", "foreignobject":
			t.Errorf("%s: an element from the content got through: %s", where, m[0])
		}
		assert.NotRegexp(t, handlerRE, quotedRE.ReplaceAllString(attrs, `""`), "%s: an event handler attribute: %s", where, m[0])
		assert.NotRegexp(t, jsURLRE, m[0], "%s: a javascript: URL: %s", where, m[0])
	}
	assert.NotRegexp(t, regexp.MustCompile(`<[a-z]+[^>]*\sonload=`), page, where)
}

// changeSetsAndShadows opens a shadow and a change set through package
// shadow, validates and promotes the set.
func changeSetsAndShadows(t testing.TB, ws *workspace.Workspace) (set string) {
	t.Helper()
	ctx := context.Background()
	_, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "planner"}, workspace.NewArtifact{Name: "docs/guide.md", Content: []byte("# Guide\n\nstep one\nstep two\n")})
	require.NoError(t, err)
	cs := shadow.NewChangeSets(ws, shadow.Options{})
	_, err = cs.Begin(ctx, "guide-edits", "worker-1", "")
	require.NoError(t, err)
	_, err = cs.Stage(ctx, "guide-edits", "worker-1", shadow.StageRequest{Op: shadow.OpUpdate, Name: "docs/guide.md", Content: []byte("# Guide\n\nstep one\nstep 1.5\nstep two\n")})
	require.NoError(t, err)
	_, err = cs.Stage(ctx, "guide-edits", "worker-1", shadow.StageRequest{Op: shadow.OpCreate, Name: "docs/faq.md", Content: []byte("# FAQ\n")})
	require.NoError(t, err)
	v, err := cs.Validate(ctx, "guide-edits", "worker-1")
	require.NoError(t, err)
	require.True(t, v.Passed)

	_, err = cs.Begin(ctx, "done-set", "worker-2", "")
	require.NoError(t, err)
	_, err = cs.Stage(ctx, "done-set", "worker-2", shadow.StageRequest{Op: shadow.OpCreate, Name: "docs/notes.md", Content: []byte("notes\n")})
	require.NoError(t, err)
	_, err = cs.Validate(ctx, "done-set", "worker-2")
	require.NoError(t, err)
	_, err = cs.Promote(ctx, "done-set", "worker-2")
	require.NoError(t, err)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n"), 0o600))
	m, err := shadow.New(ws, shadow.Options{Root: t.TempDir()})
	require.NoError(t, err)
	sh, err := m.Open(ctx, shadow.OpenRequest{Dir: dir, Actor: "worker-2"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(sh.Path, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o600))
	_, err = m.Validate(ctx, sh.ID, "worker-2")
	require.NoError(t, err)
	return "guide-edits"
}

func TestShadowsAndChangeSetsAreShown(t *testing.T) {
	e := newEnv(t, server.Options{})
	set := changeSetsAndShadows(t, e.ws)
	code, page := e.get("/ui/changes")
	require.Equal(t, http.StatusOK, code, page)
	assert.Contains(t, page, "guide-edits")
	assert.NotContains(t, page, "done-set", "a promoted set is not open")
	assert.Regexp(t, `(?s)<tr class="changeset">.*worker-1.*state-open.*passed.*area: ok.*role: ok.*lease: ok`, page)
	assert.Regexp(t, `(?s)<tr class="shadow">.*worker-2.*state-open.*passed`, page)
	_, page = e.get("/ui/changes?all=1")
	assert.Regexp(t, `(?s)done-set</a></td>\s*<td>worker-2</td>.*state-promoted.*1 versions`, page)

	code, page = e.get("/ui/changeset?" + url.Values{"name": {set}}.Encode())
	require.Equal(t, http.StatusOK, code, page)
	assert.Contains(t, page, "owner worker-1")
	assert.Regexp(t, `(?s)update docs/guide.md <span class="count">against v1</span>.*<tr class="ins">.*step 1.5`, page)
	assert.Regexp(t, `(?s)create docs/faq.md.*<tr class="ins">.*# FAQ`, page)
	assert.Contains(t, page, `href="/ui/feed?kind=note&amp;subject=guide-edits"`, "its history")
	_, page = e.get("/ui/changeset?name=done-set")
	assert.Contains(t, page, `docs/notes.md v1</a>`, "the promotion history")
	assert.Regexp(t, `(?s)create docs/notes.md.*<tr class="ins">.*notes`, page, "a promoted change shows the version it wrote")

	code, page = e.get("/ui/changeset?name=nope")
	assert.Equal(t, http.StatusNotFound, code, page)
	code, _ = e.get("/ui/changeset")
	assert.Equal(t, http.StatusBadRequest, code)
}

package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/postgres"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// env is one real server over a real store.
type env struct {
	t    *testing.T
	dsn  string
	ws   *workspace.Workspace
	srv  *server.Server
	hs   *httptest.Server
	logs *bytes.Buffer
}

func sqliteDSN(t *testing.T) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
}

func newEnv(t *testing.T, dsn string, opts server.Options) *env {
	t.Helper()
	ws, err := workspace.Open(context.Background(), dsn)
	require.NoError(t, err)
	e := &env{t: t, dsn: dsn, ws: ws, logs: &bytes.Buffer{}}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(&lockedWriter{w: e.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	e.srv, err = server.New(ws, opts)
	require.NoError(t, err)
	e.hs = httptest.NewUnstartedServer(e.srv)
	e.hs.Config.RegisterOnShutdown(e.srv.Drain)
	e.hs.Start()
	t.Cleanup(e.close)
	return e
}

func (e *env) close() {
	e.srv.Drain()
	e.hs.Close()
	_ = e.ws.Close()
}

// do sends one request; body is JSON-encoded unless it is a string or []byte.
func (e *env) do(method, path string, body any, hdr ...string) (int, []byte) {
	e.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		require.NoError(e.t, err)
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.hs.URL+path, r)
	require.NoError(e.t, err)
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1] // the client sends req.Host, not the header
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.hs.Client().Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp.StatusCode, out
}

// ok sends a request that must succeed with want and decodes its answer into v.
func (e *env) ok(want int, v any, method, path string, body any, hdr ...string) {
	e.t.Helper()
	st, out := e.do(method, path, body, hdr...)
	require.Equal(e.t, want, st, "%s %s: %s", method, path, out)
	if v != nil {
		require.NoError(e.t, json.Unmarshal(out, v), "%s", out)
	}
}

// fails sends a request that must fail with status and returns its decoded error.
func (e *env) fails(status int, method, path string, body any, hdr ...string) error {
	e.t.Helper()
	st, out := e.do(method, path, body, hdr...)
	require.Equal(e.t, status, st, "%s %s: %s", method, path, out)
	return wire.DecodeError(st, out)
}

func (e *env) head() int64 {
	e.t.Helper()
	h, err := e.ws.Events().Head(context.Background())
	require.NoError(e.t, err)
	return h
}

const as = wire.ActorHeader

func TestEveryRouteAnswersItsHappyPath(t *testing.T) {
	testHappyPath(t, newEnv(t, sqliteDSN(t), server.Options{}))
}

func TestEveryRouteAnswersItsHappyPathOnPostgres(t *testing.T) {
	testHappyPath(t, newEnv(t, pgtest.NewDSN(t), server.Options{}))
}

func testHappyPath(t *testing.T, e *env) {
	// Artifacts.
	var a workspace.Artifact
	e.ok(201, &a, "POST", "/v1/artifacts", map[string]any{"name": "docs/plan.md", "content": "v1\n", "content_type": "text/markdown", "labels": map[string]string{"team": "a"}}, as, "ann")
	assert.Equal(t, int64(1), a.Version)
	assert.Equal(t, "ann", a.CreatedBy)
	name := "/v1/artifacts/" + url.PathEscape("docs/plan.md")
	e.ok(200, &a, "GET", name, nil)
	assert.Equal(t, "v1\n", string(a.Content))
	e.ok(200, &a, "PATCH", name, map[string]any{"content": "AAEC", "content_encoding": "base64", "if_version": 1}, as, "ann")
	assert.Equal(t, int64(2), a.Version)
	e.ok(200, &a, "GET", "/v1/artifacts/"+a.ID+"?by=id", nil)
	assert.Equal(t, []byte{0, 1, 2}, a.Content)
	e.ok(200, &a, "GET", name+"?version=1", nil)
	assert.Equal(t, "v1\n", string(a.Content))
	e.ok(200, &a, "POST", name+"/rollback", map[string]any{"to": 1}, as, "ann")
	assert.Equal(t, int64(3), a.Version)
	var vs struct{ Versions []workspace.Artifact }
	e.ok(200, &vs, "GET", name+"/versions", nil)
	assert.Len(t, vs.Versions, 3)
	var ap workspace.ArtifactPage
	e.ok(200, &ap, "GET", "/v1/artifacts?name_prefix=docs/&label=team=a", nil)
	require.Len(t, ap.Artifacts, 1)
	e.ok(204, nil, "DELETE", name+"?if_version=3", nil, as, "ann")
	require.ErrorIs(t, e.fails(404, "GET", name, nil), workspace.ErrNotFound)

	// Tasks.
	var tk workspace.Task
	e.ok(201, &tk, "POST", "/v1/tasks", map[string]any{"title": "write the plan", "priority": 2}, as, "lead")
	e.ok(200, &tk, "GET", "/v1/tasks/"+tk.ID, nil)
	e.ok(200, &tk, "PATCH", "/v1/tasks/"+tk.ID, map[string]any{"description": "in detail"}, as, "lead")
	assert.Equal(t, "in detail", tk.Description)
	e.ok(200, &tk, "POST", "/v1/tasks/claim", map[string]any{"lease": "1m"}, as, "bob")
	assert.Equal(t, workspace.TaskInProgress, tk.Status)
	assert.Equal(t, "bob", tk.Assignee)
	e.ok(200, &tk, "POST", "/v1/tasks/"+tk.ID+"/heartbeat", map[string]any{"lease": "2m"}, as, "bob")
	e.ok(200, &tk, "POST", "/v1/tasks/"+tk.ID+"/release", map[string]any{}, as, "bob")
	assert.Equal(t, workspace.TaskPending, tk.Status)
	e.ok(200, &tk, "POST", "/v1/tasks/claim", map[string]any{}, as, "bob")
	e.ok(200, &tk, "POST", "/v1/tasks/"+tk.ID+"/fail", map[string]any{"summary": "no"}, as, "bob")
	assert.Equal(t, workspace.TaskFailed, tk.Status)
	e.ok(200, &tk, "PATCH", "/v1/tasks/"+tk.ID, map[string]any{"status": "pending"}, as, "lead")
	e.ok(200, &tk, "POST", "/v1/tasks/claim", map[string]any{}, as, "bob")
	e.ok(200, &tk, "POST", "/v1/tasks/"+tk.ID+"/complete", map[string]any{"summary": "done", "artifacts": []string{"docs/plan.md"}}, as, "bob")
	assert.Equal(t, workspace.TaskDone, tk.Status)
	var tp workspace.TaskPage
	e.ok(200, &tp, "GET", "/v1/tasks?status=done", nil)
	assert.Len(t, tp.Tasks, 1)

	// Notes.
	var n workspace.Note
	key := "/v1/notes/decision/" + url.PathEscape("db/engine")
	e.ok(200, &n, "PUT", key, map[string]any{"title": "sqlite", "body": "for now"}, as, "ann")
	assert.Equal(t, "db/engine", n.Key)
	e.ok(200, &n, "GET", key, nil)
	var np workspace.NotePage
	e.ok(200, &np, "GET", "/v1/notes?kind=decision", nil)
	assert.Len(t, np.Notes, 1)
	e.ok(204, nil, "DELETE", key, nil, as, "ann")

	// Locks.
	var l workspace.Lease
	res := "/v1/locks/" + url.PathEscape("repo/main")
	e.ok(200, &l, "POST", res+"/acquire", map[string]any{"ttl": "30s"}, as, "ann")
	e.ok(200, &l, "GET", res, nil)
	assert.Equal(t, "ann", l.Owner)
	var ls struct{ Locks []workspace.Lease }
	e.ok(200, &ls, "GET", "/v1/locks", nil)
	assert.Len(t, ls.Locks, 1)
	e.ok(200, &l, "POST", res+"/renew", map[string]any{"token": l.Token, "ttl": "1m"}, as, "ann")
	e.ok(204, nil, "POST", res+"/release", map[string]any{"token": l.Token}, as, "ann")
	e.ok(200, &l, "POST", res+"/acquire", map[string]any{"ttl": "30s"}, as, "ann")
	e.ok(204, nil, "POST", res+"/force-release", map[string]any{"message": "stuck"}, as, "ops")

	// Batch.
	var br workspace.BatchResult
	e.ok(200, &br, "POST", "/v1/batch", map[string]any{"ops": []map[string]any{
		{"op": "create_artifact", "name": "b/one", "content": "1"},
		{"op": "create_task", "title": "from a batch"},
		{"op": "put_note", "kind": "glossary", "key": "ws", "body": "workspace"},
	}}, as, "ann")
	require.Len(t, br.Results, 3)
	assert.Len(t, br.Events, 3)

	// Events, status, meta.
	var ep workspace.EventPage
	e.ok(200, &ep, "GET", "/v1/events/history?type=task.claimed&limit=10", nil)
	assert.Len(t, ep.Events, 3)
	var h struct{ Head int64 }
	e.ok(200, &h, "GET", "/v1/events/head", nil)
	assert.Equal(t, e.head(), h.Head)
	var st workspace.Status
	e.ok(200, &st, "GET", "/v1/status", nil)
	assert.Equal(t, h.Head, st.Head)
	e.ok(204, nil, "POST", "/v1/events/compact", map[string]any{"floor": 2})
	require.ErrorIs(t, e.fails(410, "GET", "/v1/events/history?after=0", nil), workspace.ErrCompacted)
	var who struct{ Actor string }
	e.ok(200, &who, "GET", "/v1/whoami", nil, as, "ann")
	assert.Equal(t, "ann", who.Actor)
	st2, body := e.do("GET", "/healthz", nil)
	assert.Equal(t, 200, st2, "%s", body)
	st2, body = e.do("GET", "/metrics", nil)
	assert.Equal(t, 200, st2)
	assert.Contains(t, string(body), `agentspace_http_requests_total{code="201",route="POST /v1/artifacts"} 1`)
	assert.Contains(t, string(body), "agentspace_http_open_streams")
	assert.Contains(t, string(body), `agentspace_http_commits_total{route="POST /v1/artifacts"} 1`)
	assert.NotContains(t, string(body), `agentspace_http_commits_total{route="GET`, "reads count no commits")
	// The store's group commit: the writes above ran in groups.
	store := metricValues(string(body), "agentspace_store_")
	assert.GreaterOrEqual(t, store["agentspace_store_groups_total"], 1.0)
	assert.GreaterOrEqual(t, store["agentspace_store_group_writes_total"], store["agentspace_store_groups_total"])
	assert.Greater(t, store["agentspace_store_group_running_seconds_total"], 0.0)
	assert.Contains(t, store, "agentspace_store_group_gathering_seconds_total")
}

// metricValues reads the unlabelled series named with prefix from a
// Prometheus text exposition.
func metricValues(text, prefix string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(name, prefix) || strings.Contains(name, "{") {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			out[name] = f
		}
	}
	return out
}

// TestStoreMetricsAreTheWorkspacesCommitStats: /metrics reports the group
// commit's counters of the store the server serves, as CommitStats reads
// them; a client of the server has none of its own.
func TestStoreMetricsAreTheWorkspacesCommitStats(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, sqliteDSN(t), server.Options{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			st, body := e.do("PUT", fmt.Sprintf("/v1/notes/k/n%d", i), map[string]any{"body": "b"}, as, "ann")
			assert.Equal(t, 200, st, "%s", body)
		})
	}
	wg.Wait()
	_, body := e.do("GET", "/metrics", nil)
	stats, ok := e.ws.CommitStats()
	require.True(t, ok)
	store := metricValues(string(body), "agentspace_store_")
	assert.Equal(t, float64(stats.Groups), store["agentspace_store_groups_total"])
	assert.Equal(t, float64(stats.Writes), store["agentspace_store_group_writes_total"])
	assert.GreaterOrEqual(t, stats.Writes, int64(8))
	assert.InDelta(t, stats.Running.Seconds(), store["agentspace_store_group_running_seconds_total"], 1e-9)
	assert.InDelta(t, stats.Gathering.Seconds(), store["agentspace_store_group_gathering_seconds_total"], 1e-9)

	remote, err := workspace.Open(ctx, e.hs.URL)
	require.NoError(t, err)
	defer remote.Close()
	_, ok = remote.CommitStats()
	assert.False(t, ok, "a client's writes are the server's to group")
}

// TestLongPollsReturnWhenTheLeaseIsFree checks that a waiting acquire and
// a waiting claim return as soon as the lease is released or a task is
// added, not at the end of their wait.
func TestLongPollsReturnWhenTheLeaseIsFree(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{})
	var l workspace.Lease
	e.ok(200, &l, "POST", "/v1/locks/r/acquire", map[string]any{"ttl": "1m"}, as, "ann")

	type result struct {
		status int
		body   []byte
		took   time.Duration
	}
	wait := func(path string, body any, actor string) chan result {
		ch := make(chan result, 1)
		go func() {
			start := time.Now()
			st, out := e.do("POST", path, body, as, actor)
			ch <- result{st, out, time.Since(start)}
		}()
		return ch
	}
	got := wait("/v1/locks/r/acquire", map[string]any{"ttl": "1m", "wait": "20s"}, "bob")
	time.Sleep(100 * time.Millisecond) // let bob's poll start waiting
	e.ok(204, nil, "POST", "/v1/locks/r/release", map[string]any{"token": l.Token}, as, "ann")
	r := <-got
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Less(t, r.took, 5*time.Second)
	var bl workspace.Lease
	require.NoError(t, json.Unmarshal(r.body, &bl))
	assert.Equal(t, "bob", bl.Owner)
	assert.Greater(t, bl.Token, l.Token)

	// A wait that runs out answers who holds the lease.
	err := e.fails(423, "POST", "/v1/locks/r/acquire", map[string]any{"ttl": "1m", "wait": "200ms"}, as, "cat")
	var le *workspace.LockedError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "bob", le.Holder)

	got = wait("/v1/tasks/claim", map[string]any{"wait": "20s"}, "cat")
	time.Sleep(100 * time.Millisecond)
	var tk workspace.Task
	e.ok(201, &tk, "POST", "/v1/tasks", map[string]any{"title": "late work"}, as, "lead")
	r = <-got
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Less(t, r.took, 5*time.Second)
	var claimed workspace.Task
	require.NoError(t, json.Unmarshal(r.body, &claimed))
	assert.Equal(t, tk.ID, claimed.ID)

	require.ErrorIs(t, e.fails(404, "POST", "/v1/tasks/claim", map[string]any{"wait": "100ms"}, as, "cat"), workspace.ErrNoTask)
}

type lockedWriter struct {
	mu lockedMu
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestDrainEndsLongPollsAndStreams checks that shutting down does not wait
// out a long poll or a stream: both end at once, and new streams are
// refused so that clients go elsewhere.
func TestDrainEndsLongPollsAndStreams(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{})
	ch, cancel := stream(t, e.hs.URL, "", 0)
	defer cancel()
	done := make(chan int, 1)
	go func() {
		st, _ := e.do("POST", "/v1/tasks/claim", map[string]any{"wait": "30s"}, as, "bob")
		done <- st
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	e.srv.Drain()
	select {
	case st := <-done:
		assert.Equal(t, 404, st)
	case <-time.After(5 * time.Second):
		t.Fatal("the long poll outlived the drain")
	}
	for range ch {
	}
	assert.Less(t, time.Since(start), 5*time.Second)
	require.ErrorIs(t, e.fails(503, "GET", "/v1/events", nil), wire.ErrUnavailable)
}

// TestAnUnescapedNameSaysHowToEscapeIt: a name with a slash put in the path
// as it is matches no route; the answer says to escape it.
func TestAnUnescapedNameSaysHowToEscapeIt(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{})
	status, body := e.do("GET", "/v1/artifacts/docs/plan.md", nil)
	assert.Equal(t, 404, status)
	assert.Contains(t, string(body), `"code":"no_route"`)
	assert.Contains(t, string(body), "docs%2Fplan.md")
	status, body = e.do("GET", "/v1/nothing/here", nil)
	assert.Equal(t, 404, status)
	assert.NotContains(t, string(body), "escape", "only names that look unescaped get the hint")
}

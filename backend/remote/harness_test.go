package remote_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/postgres"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	_ "github.com/agentspace/agentspace/backend/remote"
	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// serve starts a server on a real listener (TCP on loopback, or a unix
// socket) in front of the store storeDSN names, and returns the DSN that
// reaches it; t.Cleanup drains and stops the server and closes the store.
func serve(t testing.TB, storeDSN string, unix bool, opts server.Options) string {
	t.Helper()
	ctx := context.Background()
	ws, err := workspace.Open(ctx, storeDSN)
	require.NoError(t, err)
	srv, err := server.New(ws, opts)
	require.NoError(t, err)
	var (
		ln  net.Listener
		dsn string
	)
	if unix {
		// A socket's path must fit in 108 bytes: test names make
		// t.TempDir too long.
		dir, err := os.MkdirTemp("", "ws")
		require.NoError(t, err)
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		sock := filepath.Join(dir, "s.sock")
		ln, err = net.Listen("unix", sock)
		require.NoError(t, err)
		dsn = "http+unix://" + sock
	} else {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		dsn = "http://" + ln.Addr().String()
	}
	// Cleanups run last first: the store closes after the server's shutdown.
	t.Cleanup(func() { _ = ws.Close() })
	serveOn(t, ln, srv, srv.Drain)
	return dsn
}

// serveOn serves h on ln until t's cleanup, which shuts the server down
// (calling onShutdown, if any, as it starts) and checks it ended cleanly.
func serveOn(t testing.TB, ln net.Listener, h http.Handler, onShutdown func()) {
	t.Helper()
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if onShutdown != nil {
		hs.RegisterOnShutdown(onShutdown)
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
}

// sqliteParams are the SQLite backend's own conformance harness's: a
// short poll interval, and an index batch that puts filtered reads across
// the event log's indexed boundary.
const sqliteParams = "?ws_poll=10ms&ws_index_batch=3"

var (
	emptyOnce sync.Once
	emptyPath string
	emptyErr  error
)

// emptyStore makes, once per test process, a migrated SQLite store with
// nothing in it, closed (its WAL checkpointed away), for sqliteDSN to copy.
func emptyStore() (string, error) {
	emptyOnce.Do(func() {
		dir, err := os.MkdirTemp("", "remote-empty-")
		if err != nil {
			emptyErr = err
			return
		}
		emptyPath = filepath.Join(dir, "ws.db")
		ws, err := workspace.Open(context.Background(), "sqlite:"+emptyPath+sqliteParams)
		if err != nil {
			emptyErr = err
			return
		}
		if emptyErr = ws.Close(); emptyErr != nil {
			return
		}
		if fi, err := os.Stat(emptyPath + "-wal"); err == nil && fi.Size() > 0 {
			emptyErr = fmt.Errorf("%s-wal holds %d bytes after Close", emptyPath, fi.Size())
		}
	})
	return emptyPath, emptyErr
}

// TestMain removes the empty store sqliteDSN copies.
func TestMain(m *testing.M) {
	code := m.Run()
	if emptyPath != "" {
		_ = os.RemoveAll(filepath.Dir(emptyPath))
	}
	os.Exit(code)
}

// sqliteDSN is a fresh SQLite store: a copy of a migrated empty one. The
// remote suite needs an empty workspace per case, not SQLite's migrations
// run once more per case (the SQLite backend's own tests run those); the
// copy saves about a tenth of the SQLite run's CPU.
func sqliteDSN(t testing.TB) string {
	t.Helper()
	from, err := emptyStore()
	require.NoError(t, err)
	b, err := os.ReadFile(from) // #nosec G304 -- the store emptyStore made
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "ws.db")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return "sqlite:" + path + sqliteParams
}

// harness hands the suite a fresh store per DSN, each behind a server of
// its own (server.New) mounted at a path of one HTTP server that the whole
// run shares: a case's DSN is http://127.0.0.1:PORT/s/N, and its clients
// speak real HTTP over loopback TCP to it as to any server, the path
// prefix being part of the base URL as a reverse proxy would have it.
type harness struct {
	postgres bool
	shared   *sharedServer
}

// newHarness starts the shared server, stopped when t ends (after every
// case of the run).
func newHarness(t *testing.T, postgres bool) harness {
	return harness{postgres: postgres, shared: startShared(t)}
}

func (h harness) NewDSN(t testing.TB) string {
	store := ""
	if h.postgres {
		store = pgtest.NewDSN(t)
	} else {
		store = sqliteDSN(t)
	}
	// A short MaxWait makes every long poll of the suite go round the
	// client's loop at least once.
	return h.shared.mount(t, store, server.Options{MaxWait: 2 * time.Second})
}

// sharedServer is one HTTP server in front of many workspaces, each at
// /s/N/ with a server.Server of its own.
type sharedServer struct {
	url string

	mu     sync.Mutex
	next   int
	routes map[string]*route
	stores map[string]string // the DSN mount returned: the store's DSN
}

// route is one workspace's server and the requests it is answering.
type route struct {
	h        http.Handler
	inflight sync.WaitGroup
}

// startShared listens on loopback TCP and serves until t's cleanup.
func startShared(t *testing.T) *sharedServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &sharedServer{url: "http://" + ln.Addr().String(), routes: map[string]*route{}, stores: map[string]string{}}
	serveOn(t, ln, s, nil)
	return s
}

// ServeHTTP hands a request for /s/N/... to workspace N's server, with the
// prefix stripped; a request for a workspace whose case ended is a 404.
func (s *sharedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/s/"), "/")
	s.mu.Lock()
	rt := s.routes[id]
	if rt != nil {
		rt.inflight.Add(1)
	}
	s.mu.Unlock()
	if rt == nil {
		http.NotFound(w, r)
		return
	}
	defer rt.inflight.Done()
	rt.h.ServeHTTP(w, r)
}

// mount opens the store storeDSN names, mounts a server in front of it,
// and returns the DSN that reaches it. t.Cleanup unmounts it, drains it
// (event streams end), waits for the requests under way, and closes the
// store: what shutting down a server of its own did.
func (s *sharedServer) mount(t testing.TB, storeDSN string, opts server.Options) string {
	t.Helper()
	ws, err := workspace.Open(context.Background(), storeDSN)
	require.NoError(t, err)
	srv, err := server.New(ws, opts)
	require.NoError(t, err)
	s.mu.Lock()
	s.next++
	id := strconv.Itoa(s.next)
	rt := &route{h: http.StripPrefix("/s/"+id, srv)}
	s.routes[id] = rt
	s.stores[s.url+"/s/"+id] = storeDSN
	s.mu.Unlock()
	t.Cleanup(func() {
		s.mu.Lock()
		delete(s.routes, id)
		delete(s.stores, s.url+"/s/"+id)
		s.mu.Unlock()
		srv.Drain()
		done := make(chan struct{})
		go func() { rt.inflight.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("workspace %s: requests still under way 10s after its case ended", id)
		}
		_ = ws.Close()
	})
	return s.url + "/s/" + id
}

// StoreDSN returns the DSN of the store the server at dsn serves, for
// the cases that run gc where the store is.
func (h harness) StoreDSN(dsn string) string {
	base, _, _ := strings.Cut(dsn, "?") // without the suite's parameters
	h.shared.mu.Lock()
	defer h.shared.mu.Unlock()
	return h.shared.stores[base]
}

// Inapplicable lists the cases that cannot apply to a client of a
// server, with why.
func (harness) Inapplicable() map[string]string {
	const archive = "an archive is read and written where the store is (ErrRemoteArchive)"
	const store = "it opens the DSN's store itself (engine.OpenStore) to compare the store's optional read path with a plain View; a server's DSN has no store to open"
	return map[string]string{
		"ArtifactGetReadsWhatAViewReads":                              store,
		"NoteTaskAndLockGetsReadWhatAViewReads":                       store,
		"IdempotencyKeysExpire":                                       "ws_idempotency_ttl sets how long a store keeps keys; the server's store keeps them for its own TTL, which a client's DSN cannot change",
		"MustExistFindsNoWorkspaceAndCreatesNone":                     "a server serves a workspace that exists (wsctl serve opens it with MustExist); a client can neither find none nor create one",
		"ProbeAndOpenExistingAgree":                                   "it calls the store driver's Probe and OpenExisting below the engine; a client's DSN has no store driver, and its server's store exists",
		"PolicyExportNeedsTheAdminRight":                              archive,
		"EventChainSurvivesExportAndImport":                           archive,
		"ExportAfterCompactionKeepsDeletedArtifactsAndReleasedLeases": archive,
		"GCKeepsNewestPinnedAndResultVersions":                        archive + ": it checks what survives gc with an export and import, byte for byte",
		"MessageEscalatesOnceWithAControlledClock":                    "the server's clock decides deadlines, and a client cannot set the server's Options.Clock; TestServerEscalatesByItsOwnClock escalates through a server opened with a controlled clock",
	}
}

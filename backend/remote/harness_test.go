package remote_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
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
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	hs.RegisterOnShutdown(srv.Drain)
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
		_ = ws.Close()
	})
	return dsn
}

// sqliteDSN is a fresh SQLite store, as the SQLite backend's own
// conformance harness makes them.
func sqliteDSN(t testing.TB) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "ws.db") + "?ws_poll=10ms&ws_index_batch=3"
}

// harness hands the suite a fresh store behind a fresh server per DSN.
type harness struct {
	unix     bool
	postgres bool
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
	return serve(t, store, h.unix, server.Options{MaxWait: 2 * time.Second})
}

// Inapplicable lists the cases that cannot apply to a client of a
// server, with why.
func (harness) Inapplicable() map[string]string {
	const noChain = "verify and gc run where the store is (wsctl verify, wsctl gc against the server's DSN); the HTTP API serves neither yet"
	const store = "it opens the DSN's store itself (driver.OpenStore) to compare the store's optional read path with a plain View; a server's DSN has no store to open"
	return map[string]string{
		"ArtifactGetReadsWhatAViewReads":          store,
		"NoteTaskAndLockGetsReadWhatAViewReads":   store,
		"IdempotencyKeysExpire":                   "ws_idempotency_ttl sets how long a store keeps keys; the server's store keeps them for its own TTL, which a client's DSN cannot change",
		"MustExistFindsNoWorkspaceAndCreatesNone": "a server serves a workspace that exists (wsctl serve opens it with MustExist); a client can neither find none nor create one",
		"EventChainVerifiesFromTheFloor":          noChain,
		"EventChainSurvivesExportAndImport":       noChain,
		"GCRemovesWhatNoRuleKeepsInBatches":       noChain,
		"GCUnderConcurrentWritersAndSubscribers":  noChain,
		"GCRemovesOldFinishedTasksNoTaskNames":    noChain,
		"GCKeepsNewestPinnedAndResultVersions":    noChain,
	}
}

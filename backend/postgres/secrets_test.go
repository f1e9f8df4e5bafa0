package postgres_test

import (
	"bytes"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
)

// withPassword returns dsn logging in as user with password.
func withPassword(t *testing.T, dsn, user, password string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.User = url.UserPassword(user, password)
	return u.String()
}

// lockedBuffer is a log sink safe for the handle's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRefusedLoginsNeverShowThePassword: the server refuses the login (an
// unknown role, an unknown database, a bad schema, nobody listening), in the
// main DSN and in the listen DSN, and neither the error nor the log says the
// password, raw or URL-escaped. (The test server trusts 127.0.0.1, so a
// wrong password for a real role would be let in: an unknown role is the
// refused login it can produce.)
func TestRefusedLoginsNeverShowThePassword(t *testing.T) {
	const secret = "Sup3r-s3cret/pw?#%"
	server := pgtest.ServerDSN(t)
	cases := map[string]string{
		"unknown role":      withPassword(t, server, pgtest.RandomName("nobody_"), secret),
		"unknown database":  strings.Replace(withPassword(t, server, "postgres", secret), "/test?", "/"+pgtest.RandomName("nodb_")+"?", 1),
		"bad schema":        pgtest.WithParams(t, withPassword(t, server, "postgres", secret), "ws_schema", "bad schema;--"),
		"nobody listening":  withPassword(t, "postgres://x@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", "postgres", secret),
		"unknown parameter": pgtest.WithParams(t, withPassword(t, server, "postgres", secret), "ws_bogus", "1"),
		"listen DSN refused": pgtest.WithParams(t, pgtest.NewDSN(t), "ws_listen_dsn",
			withPassword(t, server, pgtest.RandomName("nobody_"), secret)),
	}
	for name, dsn := range cases {
		t.Run(name, func(t *testing.T) {
			var logs lockedBuffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			ws, err := workspace.Open(ctxFor(t), dsn, workspace.Options{Logger: logger})
			if ws != nil {
				_ = ws.Close()
			}
			require.Error(t, err, "the open is refused")
			assertNoSecret(t, secret, err.Error(), logs.String())
			m, err := workspace.OpenMigrator(ctxFor(t), dsn)
			if m != nil {
				_ = m.Close()
			}
			if err != nil {
				assertNoSecret(t, secret, err.Error())
			}
		})
	}
}

// TestAWorkingHandleNeverLogsThePassword: a handle whose DSN carries a
// password (the test server ignores it) works, loses its connections, logs
// its reconnects, and none of it shows the password.
func TestAWorkingHandleNeverLogsThePassword(t *testing.T) {
	const secret = "w0rking-s3cret"
	ctx := ctxFor(t)
	app := pgtest.RandomName("secret_")
	dsn := withPassword(t, pgtest.WithParams(t, pgtest.NewDSN(t), "application_name", app), "postgres", secret)
	// The listening connection carries the name too: the test ends its
	// own connections, never the listeners of tests running beside it.
	listen := pgtest.WithParams(t, pgtest.ServerDSN(t), "application_name", app)
	dsn = pgtest.WithParams(t, dsn, "ws_listen_dsn", withPassword(t, listen, "postgres", secret+"-listen"))
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ws, err := workspace.Open(ctx, dsn, workspace.Options{Logger: logger})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	require.NoError(t, putNotes(ctx, ws, "a", 2))

	admin := pgtest.Connect(t)
	// The listener connects on its own goroutine: under load it may not be
	// there yet when the writes return. Wait until both are, so the test
	// always ends both.
	require.Eventually(t, func() bool {
		var n int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
		return err == nil && n >= 2
	}, 30*time.Second, 20*time.Millisecond, "the pool's connection and the listener's both connect")
	var ended int
	err = admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()`, app).Scan(&ended)
	require.NoError(t, err)
	require.GreaterOrEqual(t, ended, 2, "the pool's connection and the listener's both ended")
	require.NoError(t, putNotes(ctx, ws, "b", 2), "writes carry on after the connections died")
	_, err = ws.Artifacts().Get(ctx, workspace.ByName("no/such"))
	require.ErrorIs(t, err, workspace.ErrNotFound)
	require.NoError(t, ws.Close())
	assertNoSecret(t, secret, logs.String(), err.Error(), workspace.RedactDSN(dsn))
}

// assertNoSecret checks that no text holds secret in any spelling a DSN
// may carry it.
func assertNoSecret(t *testing.T, secret string, texts ...string) {
	t.Helper()
	for _, text := range texts {
		for _, form := range []string{secret, url.QueryEscape(secret), url.PathEscape(secret), url.UserPassword("u", secret).String()[2:]} {
			assert.NotContains(t, text, form, "the password shows in %q", text)
		}
	}
}

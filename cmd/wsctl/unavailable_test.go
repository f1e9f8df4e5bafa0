package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
)

// TestAnUnreachableDatabaseSaysTryAgain: with its database unreachable,
// wsctl exits 75 (try again), and `wsctl serve` answers 503 unavailable
// with Retry-After, naming the operation that failed, never 500; once
// the database answers again, so does the server.
func TestAnUnreachableDatabaseSaysTryAgain(t *testing.T) {
	dsn := pgtest.NewDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ws, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	_, err = ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "t"})
	require.NoError(t, err)
	require.NoError(t, ws.Close())

	// Nothing listens on the port: the CLI cannot open the workspace.
	closed := fmt.Sprintf("127.0.0.1:%d", pgtest.FreePort(t))
	_, errOut, code := wsctl(t, pgtest.WithHost(t, dsn, closed), "note", "ls")
	assert.Equal(t, exitUnavailable, code, errOut)
	assert.Contains(t, errOut, "database unavailable")

	proxy := pgtest.NewProxy(t, pgtest.ServerAddr(t, dsn))
	_, base, logs := startServe(t, proxy.Via(t, dsn), "--listen", "127.0.0.1:0")
	proxy.Cut()
	claim := func() (*http.Response, map[string]any) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/tasks/claim", strings.NewReader(`{"actor":"ann"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var body map[string]any
		require.NoError(t, json.Unmarshal(b, &body), string(b))
		return resp, body
	}
	resp, body := claim()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	assert.Equal(t, "unavailable", body["code"])
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Equal(t, "tasks.claim: postgres: database unavailable", body["detail"])

	// A client of the server is told to try again too (a write without an
	// idempotency key is not retried for it).
	_, errOut, code = wsctl(t, base, "--as", "lead", "task", "add", "another")
	assert.Equal(t, exitUnavailable, code, errOut)

	// The Go client gives a write without a key the 503 as ErrUnavailable,
	// and retries a keyed write through the 503s: once the proxy has
	// refused more connections than one request tries (so at least one
	// 503 was answered), the database comes back.
	client, err := workspace.Open(ctx, base)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	before := proxy.Refused()
	_, err = client.Notes().Put(ctx, workspace.Write{Actor: "ann"}, workspace.NotePut{Kind: "decision", Key: "k"})
	require.ErrorIs(t, err, workspace.ErrUnavailable)
	perRequest := proxy.Refused() - before
	require.Positive(t, perRequest)
	done := make(chan error, 1)
	before = proxy.Refused()
	go func() {
		_, err := client.Notes().Put(ctx, workspace.Write{Actor: "ann", IdempotencyKey: "k1"}, workspace.NotePut{Kind: "decision", Key: "k", Body: "b"})
		done <- err
	}()
	for proxy.Refused() <= before+perRequest {
		select {
		case err := <-done:
			t.Fatalf("the keyed write ended while the database was unreachable: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	proxy.Restore()
	require.NoError(t, <-done)
	note, err := client.Notes().Get(ctx, "decision", "k")
	require.NoError(t, err)
	assert.Equal(t, int64(1), note.Version)

	resp, body = claim()
	assert.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "t", body["title"])
	assert.NotContains(t, logs.String(), "internal")
}

// TestAMissingDatabaseIsNoWorkspaceNotTryAgain: a PostgreSQL database
// that does not exist is not an outage: wsctl says so, with the createdb
// to run, and exits 8 (no workspace there), not 75.
func TestAMissingDatabaseIsNoWorkspaceNotTryAgain(t *testing.T) {
	u, err := url.Parse(pgtest.ServerDSN(t))
	require.NoError(t, err)
	db := pgtest.RandomName("nodb")
	u.Path = "/" + db
	for _, args := range [][]string{{"status"}, {"init"}, {"migrate", "up"}} {
		_, errOut, code := wsctl(t, u.String(), args...)
		assert.Equal(t, exitNoStore, code, "%v: %s", args, errOut)
		assert.Contains(t, errOut, `the database does not exist on the server; create it first with 'createdb `, args)
		assert.NotContains(t, errOut, "try again", args)
	}
}

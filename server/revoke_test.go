package server_test

import (
	"bufio"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/server/dashboard"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// drainStream reads ch until it closes and returns its event records.
func drainStream(t *testing.T, ch <-chan sseRecord) []sseRecord {
	t.Helper()
	var got []sseRecord
	for {
		r, ok := next(t, ch)
		if !ok {
			return got
		}
		if r.Data != "" {
			got = append(got, r)
		}
	}
}

// TestRevokedTokenEndsItsEventStream revokes a token from another handle
// on the same store (as `wsctl token revoke` does) while its stream is
// open and writes go on: the stream ends with a typed error, and no event
// at or after the revocation reaches it.
func TestRevokedTokenEndsItsEventStream(t *testing.T) {
	dsn := sqliteDSN(t)
	e := newEnv(t, dsn, server.Options{RequireToken: true, Heartbeat: 20 * time.Millisecond})
	ctx := context.Background()
	tok, info, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "ann"})
	require.NoError(t, err)
	other, _, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "bob"})
	require.NoError(t, err)
	ch, cancel := stream(t, e.hs.URL, "", -1, bearer(tok)...)
	defer cancel()
	kept, cancelKept := stream(t, e.hs.URL, "", -1, bearer(other)...)
	defer cancelKept()
	putNotes(t, e.ws, 0, 3)

	cli, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	defer cli.Close()
	_, err = agents.NewTokens(cli).Revoke(ctx, "admin", info.ID)
	require.NoError(t, err)
	revokedAt := e.head()
	putNotes(t, e.ws, 3, 5)

	got := drainStream(t, ch)
	require.NotEmpty(t, got)
	last := got[len(got)-1]
	assert.Zero(t, last.ID, "the stream ends with an error record")
	assert.Contains(t, last.Data, `"code":"unauthorized"`)
	for _, r := range got[:len(got)-1] {
		assert.Less(t, r.ID, revokedAt, "no event at or after the revocation")
	}
	// Another token's stream goes on past the revocation.
	for {
		r, ok := next(t, kept)
		require.True(t, ok)
		if r.Data != "" && r.ID > revokedAt {
			break
		}
	}
	require.ErrorIs(t, e.fails(401, "GET", "/v1/events/head", nil, bearer(tok)...), wire.ErrUnauthorized)
}

// TestExpiredTokenEndsItsEventStream opens a stream with a token that
// expires while it is open: the stream ends with a typed error.
func TestExpiredTokenEndsItsEventStream(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{RequireToken: true, Heartbeat: 20 * time.Millisecond})
	tok, _, err := e.srv.Tokens().Create(context.Background(), agents.TokenRequest{Actor: "ann", TTL: 500 * time.Millisecond})
	require.NoError(t, err)
	ch, cancel := stream(t, e.hs.URL, "", -1, bearer(tok)...)
	defer cancel()
	got := drainStream(t, ch)
	require.NotEmpty(t, got)
	assert.Contains(t, got[len(got)-1].Data, "expired")
}

// TestRevokedTokenEndsItsLongPoll revokes a token while its claim long
// poll waits: the poll answers 401 (not a task, not no_task) at once.
func TestRevokedTokenEndsItsLongPoll(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{RequireToken: true, MaxWait: time.Minute})
	ctx := context.Background()
	tok, info, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "ann"})
	require.NoError(t, err)
	type result struct {
		st  int
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, body := e.do("POST", "/v1/tasks/claim", map[string]any{"wait": "50s"}, bearer(tok)...)
		done <- result{st, wire.DecodeError(st, body)}
	}()
	// Let the poll start waiting. Were it not yet waiting, the token check
	// would refuse it with the same 401, so this is no race on the outcome;
	// on code that checks a token once, a waiting poll claims the task.
	time.Sleep(300 * time.Millisecond)
	_, err = e.srv.Tokens().Revoke(ctx, "admin", info.ID)
	require.NoError(t, err)
	_, err = e.ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "after the revocation"})
	require.NoError(t, err)
	select {
	case r := <-done:
		assert.Equal(t, http.StatusUnauthorized, r.st)
		assert.ErrorIs(t, r.err, wire.ErrUnauthorized)
	case <-time.After(20 * time.Second):
		t.Fatal("the long poll outlived its token")
	}
	tasks, err := e.ws.Tasks().List(ctx, workspace.TaskFilter{})
	require.NoError(t, err)
	require.Len(t, tasks.Tasks, 1)
	assert.Equal(t, workspace.TaskPending, tasks.Tasks[0].Status, "the revoked token claimed nothing")
}

// TestRevokedTokenEndsItsDashboardStream logs in to the dashboard with a
// cookie, opens its live stream, revokes the token: the stream closes.
func TestRevokedTokenEndsItsDashboardStream(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{RequireToken: true})
	ctx := context.Background()
	tok, info, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "ann", Role: "admin"})
	require.NoError(t, err)
	req, err := http.NewRequest("GET", e.hs.URL+"/ui/stream", nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: dashboard.CookieName, Value: tok})
	resp, err := e.hs.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
	}()
	_, err = e.srv.Tokens().Revoke(ctx, "admin", info.ID)
	require.NoError(t, err)
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("the dashboard stream outlived its token")
	}
}

package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/server"
)

// sessionStatus sends a tools/list on session id with the token tok and
// returns the HTTP status.
func sessionStatus(t *testing.T, base, id, tok string) int {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestSessionIsBoundToTheTokenThatOpenedIt opens a session with one of
// alice's tokens; her other token, with another role, presenting the same
// Mcp-Session-Id is refused with 403.
func TestSessionIsBoundToTheTokenThatOpenedIt(t *testing.T) {
	ws := openWS(t, sqliteBackend.dsn(t))
	srv, hs := httpServer(t, ws, server.Options{RequireToken: true})
	ctx := context.Background()
	plain, _, err := srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "alice"})
	require.NoError(t, err)
	dev, _, err := srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "alice", Role: "dev"})
	require.NoError(t, err)
	cs, err := httpConnect(t, hs.URL, "2025-11-25", map[string]string{"Authorization": "Bearer " + plain})
	require.NoError(t, err)
	assert.Equal(t, "alice", ok(t, cs, "status", nil)["actor"])
	assert.Equal(t, http.StatusForbidden, sessionStatus(t, hs.URL, cs.ID(), dev), "another token of the same actor")
	assert.Equal(t, http.StatusOK, sessionStatus(t, hs.URL, cs.ID(), plain))
}

// TestRevokedTokenEndsItsSessions revokes the token that opened a session:
// the server closes the session (another token now finds no session,
// 404, where before it was refused, 403) and the token itself is refused.
func TestRevokedTokenEndsItsSessions(t *testing.T) {
	ws := openWS(t, sqliteBackend.dsn(t))
	srv, hs := httpServer(t, ws, server.Options{RequireToken: true})
	ctx := context.Background()
	tok, info, err := srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "alice"})
	require.NoError(t, err)
	probe, _, err := srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "probe"})
	require.NoError(t, err)
	cs, err := httpConnect(t, hs.URL, "2025-11-25", map[string]string{"Authorization": "Bearer " + tok})
	require.NoError(t, err)
	ok(t, cs, "status", nil)
	require.Equal(t, http.StatusForbidden, sessionStatus(t, hs.URL, cs.ID(), probe), "the session is there, and not probe's")

	_, err = srv.Tokens().Revoke(ctx, "admin", info.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return sessionStatus(t, hs.URL, cs.ID(), probe) == http.StatusNotFound },
		20*time.Second, 20*time.Millisecond, "the revoked token's session is closed")
	assert.Equal(t, http.StatusUnauthorized, sessionStatus(t, hs.URL, cs.ID(), tok))
}

// TestIdleSessionsPerTokenAreCapped opens one session more than the cap
// with one token: the least recently used one is closed, the others and
// another token's sessions go on.
func TestIdleSessionsPerTokenAreCapped(t *testing.T) {
	ws := openWS(t, sqliteBackend.dsn(t))
	s := newServer(t, ws, "")
	h := s.HTTPHandler(func(r *http.Request) mcp.Caller {
		id := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		return mcp.Caller{Actor: "agent-" + id, Bound: true, TokenID: id}
	}, mcp.HTTPOptions{MaxSessionsPerCaller: 2})
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	t1 := map[string]string{"Authorization": "Bearer t1"}
	// A client has its answer a moment before the server's handler
	// returns and marks the session used: wait for that, so that first
	// is used before second and both are idle when third comes.
	settled := func() {
		require.Eventually(t, func() bool { return mcp.RequestsUnderWay(s) == 0 }, 10*time.Second, time.Millisecond)
	}
	first, err := httpConnect(t, hs.URL, "2025-11-25", t1)
	require.NoError(t, err)
	ok(t, first, "status", nil)
	settled()
	second, err := httpConnect(t, hs.URL, "2025-11-25", t1)
	require.NoError(t, err)
	ok(t, second, "status", nil)
	other, err := httpConnect(t, hs.URL, "2025-11-25", map[string]string{"Authorization": "Bearer t2"})
	require.NoError(t, err)
	settled()
	third, err := httpConnect(t, hs.URL, "2025-11-25", t1)
	require.NoError(t, err)

	assert.Equal(t, http.StatusNotFound, sessionStatus(t, hs.URL, first.ID(), "t1"), "the least recently used is closed")
	assert.Equal(t, "agent-t1", ok(t, second, "status", nil)["actor"])
	assert.Equal(t, "agent-t1", ok(t, third, "status", nil)["actor"])
	assert.Equal(t, "agent-t2", ok(t, other, "status", nil)["actor"])
}

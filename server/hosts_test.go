package server_test

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/wire"
)

// TestForeignHostIsRefusedOnEveryRoute sends rebinding-shaped requests
// (Host: evil.example) to a real loopback listener of a server that trusts
// loopback: every route, the dashboard and /mcp included, answers a typed
// 403 and the log does not move.
func TestForeignHostIsRefusedOnEveryRoute(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{})
	port := mustURL(t, e.hs.URL).Port()
	for _, r := range []struct{ method, path string }{
		{"GET", "/v1/status"}, {"GET", "/v1/events"}, {"GET", "/v1/openapi.json"}, {"GET", "/healthz"},
		{"GET", "/metrics"}, {"GET", "/"}, {"GET", "/ui/feed"}, {"GET", "/ui/stream"}, {"POST", "/mcp"},
		{"POST", "/v1/artifacts"}, {"PUT", "/v1/notes/decision/x"}, {"GET", "/no/such/route"},
	} {
		for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1:1", "localhost"} {
			err := e.fails(http.StatusForbidden, r.method, r.path, `{"name":"a","content":"","actor":"m"}`, "Host", host, wire.ActorHeader, "mallory")
			require.ErrorIs(t, err, wire.ErrForbidden, "%s %s Host %s", r.method, r.path, host)
		}
	}
	assert.Zero(t, e.head())
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port, "[::1]:" + port} {
		e.ok(200, nil, "GET", "/v1/status", nil, "Host", host)
	}
}

// TestForeignOriginCannotWrite checks the Origin rule: a write whose
// Origin is another site (or another port, or "null") is refused before
// it is decoded; reads with a foreign Origin, writes from the server's own
// origin and writes with no Origin (non-browser clients) are served.
func TestForeignOriginCannotWrite(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{AllowedHosts: []string{"agentspace.test", "proxy.test:8443"}})
	port := mustURL(t, e.hs.URL).Port()
	note := map[string]any{"body": "b", "actor": "ann"}
	for _, hdr := range [][]string{
		{"Origin", "http://evil.example"},
		{"Origin", "http://127.0.0.1:1"},
		{"Origin", "http://localhost:" + strconv.Itoa(mustAtoi(t, port)+1)},
		{"Origin", "null"},
		{"Origin", "file://"},
		{"Origin", "http://proxy.test:8444"},
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
	} {
		for _, method := range []string{"PUT", "DELETE"} {
			err := e.fails(http.StatusForbidden, method, "/v1/notes/decision/x", note, hdr...)
			require.ErrorIs(t, err, wire.ErrForbidden, "%s %v", method, hdr)
		}
	}
	assert.Zero(t, e.head())
	e.ok(200, nil, "GET", "/v1/status", nil, "Origin", "http://evil.example")
	for i, origin := range []string{"", "http://127.0.0.1:" + port, "http://localhost:" + port, "https://agentspace.test", "https://proxy.test:8443"} {
		e.ok(200, nil, "PUT", "/v1/notes/decision/k"+strconv.Itoa(i), note, "Origin", origin)
	}
	e.ok(200, nil, "GET", "/v1/status", nil, "Host", "agentspace.test:9999")
	e.ok(200, nil, "GET", "/v1/status", nil, "Host", "proxy.test:8443")
	e.fails(http.StatusForbidden, "GET", "/v1/status", nil, "Host", "proxy.test:8444")
}

// TestEveryAnswerSaysNoSniff checks X-Content-Type-Options on JSON,
// problems, the stream's refusal, the dashboard and the open routes.
func TestEveryAnswerSaysNoSniff(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{})
	for _, path := range []string{"/v1/status", "/v1/artifacts/nope", "/v1/openapi.json", "/healthz", "/metrics", "/", "/ui/feed", "/nope", "/v1/events?after=x"} {
		resp, err := e.hs.Client().Get(e.hs.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), path)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

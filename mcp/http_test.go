package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// headers adds fixed headers to every request of a client.
type headers struct {
	h    map[string]string
	next http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.h {
		r.Header.Set(k, v)
	}
	return h.next.RoundTrip(r)
}

// mountMCP is the endpoint wsctl hands the server: this package's tools,
// acting as the caller the server authenticated.
func mountMCP(p server.MCPParams) server.MCPEndpoint {
	m := mcp.NewServer(p.Workspace, mcp.Options{Version: p.Version, Logger: p.Logger, Redact: p.Redact, Agents: p.Agents})
	h := m.HTTPHandler(func(r *http.Request) mcp.Caller {
		c := p.Caller(r)
		return mcp.Caller{Actor: c.Actor, Bound: c.Bound, TokenID: c.TokenID, Expires: c.Expires}
	}, mcp.HTTPOptions{MaxBodyBytes: p.MaxBodyBytes})
	return endpoint{h, m}
}

// endpoint is the MCP server serving through its HTTP handler.
type endpoint struct {
	http.Handler
	*mcp.Server
}

func (e endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) { e.Handler.ServeHTTP(w, r) }

func httpServer(t *testing.T, ws *workspace.Workspace, opts server.Options) (*server.Server, *httptest.Server) {
	t.Helper()
	opts.MCP = mountMCP
	srv, err := server.New(ws, opts)
	require.NoError(t, err)
	hs := httptest.NewUnstartedServer(srv)
	hs.Config.RegisterOnShutdown(srv.Drain)
	hs.Start()
	t.Cleanup(func() {
		srv.Drain()
		hs.Close()
	})
	return srv, hs
}

func httpConnect(t *testing.T, url, version string, hdr map[string]string) (*sdk.ClientSession, error) {
	t.Helper()
	tr := &sdk.StreamableClientTransport{Endpoint: url + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: headers{hdr, http.DefaultTransport}}}
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := c.Connect(testCtx(t), tr, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func TestHTTPEndpointActsAsTheTokensActor(t *testing.T) {
	ws := openWS(t, sqliteBackend.dsn(t))
	srv, hs := httpServer(t, ws, server.Options{RequireToken: true})
	secret, _, err := srv.Tokens().Create(context.Background(), agents.TokenRequest{Actor: "carol", By: "admin"})
	require.NoError(t, err)

	for _, version := range []string{"", "2025-11-25", "2025-06-18"} {
		t.Run("protocol "+version, func(t *testing.T) {
			_, err := httpConnect(t, hs.URL, version, nil)
			require.Error(t, err, "no token: refused")
			_, err = httpConnect(t, hs.URL, version, map[string]string{"Authorization": "Bearer ast_bogus_secret"})
			require.Error(t, err, "a bad token: refused")

			cs, err := httpConnect(t, hs.URL, version, map[string]string{"Authorization": "Bearer " + secret})
			require.NoError(t, err)
			assert.Equal(t, "carol", ok(t, cs, "status", nil)["actor"])
			tk := ok(t, cs, "task_add", map[string]any{"title": "from HTTP " + version})
			assert.Equal(t, "carol", tk["created_by"])
			got, err := ws.Tasks().Get(context.Background(), tk["id"].(string))
			require.NoError(t, err)
			assert.Equal(t, "carol", got.CreatedBy, "the same store the library sees")
		})
	}
}

func TestHTTPEndpointWithoutTokensActsAsTheNamedActor(t *testing.T) {
	ws := openWS(t, sqliteBackend.dsn(t))
	_, hs := httpServer(t, ws, server.Options{})
	for _, version := range []string{"", "2025-11-25"} {
		cs, err := httpConnect(t, hs.URL, version, map[string]string{wire.ActorHeader: "dave"})
		require.NoError(t, err)
		assert.Equal(t, "dave", ok(t, cs, "status", nil)["actor"])
		ok(t, cs, "note", map[string]any{"op": "put", "kind": "decision", "key": "http-" + version})

		anon, err := httpConnect(t, hs.URL, version, nil)
		require.NoError(t, err)
		te := fails(t, anon, "task_add", map[string]any{"title": "who?"}, "invalid")
		assert.Equal(t, "actor", te.Field)
		assert.Contains(t, te.Hint, "--as")
	}
}

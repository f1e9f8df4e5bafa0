package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// BenchmarkMCPOverhead prints p50/p99 of a read and of a conditional
// write through wsctl mcp (stdio) and /mcp (HTTP on loopback) beside the
// same call in-process, on SQLite (docs/mcp.md has the figures). It is a
// fixed-size measurement: each surface makes n calls whatever b.N is.
func BenchmarkMCPOverhead(b *testing.B) {
	t := b
	const n = 500
	ctx := context.Background()
	dsn, ws := newMCPWorkspace(t)
	_, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "m"}, workspace.NewArtifact{Name: "m.md", Content: []byte("hello")})
	require.NoError(t, err)

	pct := func(d []time.Duration) (time.Duration, time.Duration) {
		slices.Sort(d)
		return d[len(d)/2], d[len(d)*99/100]
	}
	report := func(surface, op string, d []time.Duration) {
		p50, p99 := pct(d)
		fmt.Printf("| %-10s | %-17s | %8.0f µs | %8.0f µs |\n", surface, op, float64(p50.Microseconds()), float64(p99.Microseconds()))
	}
	measure := func(f func() error) []time.Duration {
		d := make([]time.Duration, n)
		for i := range n {
			start := time.Now()
			require.NoError(t, f())
			d[i] = time.Since(start)
		}
		return d
	}
	version := func() int64 {
		a, err := ws.Artifacts().Get(ctx, workspace.ByName("m.md"))
		require.NoError(t, err)
		return a.Version
	}

	fmt.Println("| surface    | operation         |      p50    |      p99    |")
	fmt.Println("|------------|-------------------|-------------|-------------|")
	report("in-process", "read", measure(func() error {
		_, err := ws.Artifacts().Get(ctx, workspace.ByName("m.md"))
		return err
	}))
	v := version()
	report("in-process", "conditional write", measure(func() error {
		a, err := ws.Artifacts().Update(ctx, workspace.Write{Actor: "m", IfVersion: v}, workspace.ByName("m.md"), workspace.ArtifactChange{Content: []byte("x")})
		v = a.Version
		return err
	}))

	viaMCP := func(surface string, cs *sdk.ClientSession) {
		callOK := func(name string, args map[string]any) (map[string]any, error) {
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
			if err != nil {
				return nil, err
			}
			if res.IsError {
				return nil, fmt.Errorf("%s: %v", name, res.Content)
			}
			var m map[string]any
			b, _ := json.Marshal(res.StructuredContent)
			return m, json.Unmarshal(b, &m)
		}
		report(surface, "read", measure(func() error {
			_, err := callOK("artifact_read", map[string]any{"name": "m.md"})
			return err
		}))
		v := version()
		report(surface, "conditional write", measure(func() error {
			m, err := callOK("artifact_write", map[string]any{"name": "m.md", "content": "x", "if_version": v})
			if err == nil {
				v = int64(m["version"].(float64))
			}
			return err
		}))
	}

	cmd := exec.Command(wsctlBinary(t), "--dsn", dsn, "mcp", "--as", "m")
	cmd.Env = mcpEnv()
	c := sdk.NewClient(&sdk.Implementation{Name: "measure", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	viaMCP("stdio", cs)
	require.NoError(t, cs.Close())

	srv, err := server.New(ws, server.Options{MCP: mcpEndpoint})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Drain()
	hcs := httpActorSession(t, hs.URL, "2025-11-25")
	viaMCP("HTTP 11-25", hcs)
	hcs = httpActorSession(t, hs.URL, "2026-07-28")
	viaMCP("HTTP 07-28", hcs)
}

func httpActorSession(t testing.TB, url, version string) *sdk.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: actorHeader{"m"}}
	c := sdk.NewClient(&sdk.Implementation{Name: "measure", Version: "0"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: hc,
		DisableStandaloneSSE: true}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// actorHeader names the acting agent on every request, as a server
// without tokens on loopback takes it.
type actorHeader struct{ actor string }

func (a actorHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(wire.ActorHeader, a.actor)
	return http.DefaultTransport.RoundTrip(r)
}

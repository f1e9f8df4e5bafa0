package mcp_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/json"
	_ "github.com/agentspace/agentspace/backend/postgres"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/workspace"
)

// backend names a store and makes a fresh DSN for it.
type backend struct {
	name string
	dsn  func(t *testing.T) string
}

var (
	sqliteBackend   = backend{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "ws.db") }}
	jsonBackend     = backend{"json", func(t *testing.T) string { return "json:" + filepath.Join(t.TempDir(), "ws") }}
	postgresBackend = backend{"postgres", func(t *testing.T) string { return pgtest.NewDSN(t) }}
	allBackends     = []backend{sqliteBackend, jsonBackend, postgresBackend}
)

func openWS(t *testing.T, dsn string) *workspace.Workspace {
	t.Helper()
	ws, err := workspace.Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	return ws
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newServer is an MCP server over ws acting as actor, closed at the end.
func newServer(t *testing.T, ws *workspace.Workspace, actor string) *mcp.Server {
	t.Helper()
	s := mcp.NewServer(ws, mcp.Options{Actor: actor})
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// connect runs s over an in-memory transport and returns a client
// session speaking version (the SDK's newest when empty).
func connect(t *testing.T, s *mcp.Server, version string, copts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	st, ct := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(ctx, st)
	}()
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, copts)
	cs, err := c.Connect(testCtx(t), ct, &sdk.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.Close()
		cancel()
		<-done
	})
	return cs
}

// result is one tool call's outcome, decoded.
type result struct {
	isError bool
	text    string
	data    map[string]any
	err     mcp.ToolError
}

func call(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) result {
	t.Helper()
	res, err := cs.CallTool(testCtx(t), &sdk.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, "%s: a protocol error, not a tool result", name)
	return decode(t, res)
}

func decode(t *testing.T, res *sdk.CallToolResult) result {
	t.Helper()
	r := result{isError: res.IsError}
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*sdk.TextContent); ok {
			r.text = tc.Text
		}
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		if r.isError {
			require.NoError(t, json.Unmarshal(b, &r.err))
		} else {
			require.NoError(t, json.Unmarshal(b, &r.data))
		}
	}
	return r
}

// ok calls a tool that must succeed and returns its structured content.
func ok(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	r := call(t, cs, name, args)
	require.False(t, r.isError, "%s %v: %s", name, args, r.text)
	require.NotNil(t, r.data, "%s returns structured content", name)
	return r.data
}

// fails calls a tool that must fail with class and returns the error.
func fails(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any, class string) mcp.ToolError {
	t.Helper()
	r := call(t, cs, name, args)
	require.True(t, r.isError, "%s %v must fail, got %s", name, args, r.text)
	assert.Equal(t, class, r.err.Error, "%s: %s", name, r.text)
	assert.Contains(t, r.text, class)
	return r.err
}

func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

func head(t *testing.T, ws *workspace.Workspace) int64 {
	t.Helper()
	h, err := ws.Events().Head(context.Background())
	require.NoError(t, err)
	return h
}

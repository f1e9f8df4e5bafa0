package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/mediatype"
	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// TestContentTypeIsTheSameOnEveryFace writes a .md without a content type
// through wsctl, the HTTP API and the MCP tools: each gets
// mediatype.For's answer, text/markdown.
func TestContentTypeIsTheSameOnEveryFace(t *testing.T) {
	ctx := context.Background()
	dsn, ws := newMCPWorkspace(t)
	want := mediatype.For("x.md", []byte("# x\n"))
	require.True(t, strings.HasPrefix(want, "text/markdown"), want)

	var out, errb bytes.Buffer
	code := run(ctx, []string{"--dsn", dsn, "--as", "cli", "artifact", "put", "cli.md"}, strings.NewReader("# x\n"), &out, &errb, func(string) string { return "" })
	require.Equal(t, 0, code, errb.String())

	srv, err := server.New(ws, server.Options{})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/v1/artifacts", strings.NewReader(`{"name":"http.md","content":"# x\n"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(wire.ActorHeader, "http")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var created workspace.Artifact
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&created))
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	ms := mcp.NewServer(ws, mcp.Options{Actor: "mcp"})
	t.Cleanup(func() { _ = ms.Close() })
	ct, st := sdk.NewInMemoryTransports()
	go func() { _ = ms.Run(ctx, st) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "artifact_write", Arguments: map[string]any{"name": "mcp.md", "content": "# x\n"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)

	for _, name := range []string{"cli.md", "http.md", "mcp.md"} {
		a, err := ws.Artifacts().Get(ctx, workspace.ByName(name))
		require.NoError(t, err)
		assert.Equal(t, want, a.ContentType, name)
	}
	// A name the table does not know: text by its content, else bytes.
	assert.Equal(t, "text/plain; charset=utf-8", mediatype.For("notes", []byte("hello")))
	assert.Equal(t, "application/octet-stream", mediatype.For("blob", []byte{0, 1, 2}))
	assert.Equal(t, want, mediatype.For("README.MD", nil))
}

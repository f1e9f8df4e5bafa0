package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// TestServeAnswersMCPAtItsEndpoint: wsctl serve hands the server the MCP
// endpoint, so /mcp serves the tools, acting as the request's actor.
func TestServeAnswersMCPAtItsEndpoint(t *testing.T) {
	dsn, ws := newMCPWorkspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, url, _ := startServe(t, dsn, "--listen", "127.0.0.1:0")

	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: actorHeader{"http-agent"}}}, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "artifact_write", Arguments: map[string]any{"name": "via-mcp.md", "content": "hi"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)

	a, err := ws.Artifacts().Get(ctx, workspace.ByName("via-mcp.md"))
	require.NoError(t, err)
	assert.Equal(t, "http-agent", a.CreatedBy)
	assert.Equal(t, "hi", string(a.Content))
}

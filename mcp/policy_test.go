package mcp_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/workspace"
)

// TestPolicyRefusalIsClassForbidden: a write or read the workspace's
// policy refuses comes back as class forbidden, with the action and the rule.
func TestPolicyRefusalIsClassForbidden(t *testing.T) {
	ws := openWS(t, sqliteBackend.dsn(t))
	_, err := ws.Artifacts().Create(context.Background(), workspace.Write{Actor: "root"}, workspace.NewArtifact{
		Name: workspace.PolicyArtifact,
		Content: []byte(`[roles.planner]
artifacts_read  = ["plans/**"]
artifacts_write = ["plans/**"]
[actors]
root = ["admin"]
bob = ["planner"]
`)})
	require.NoError(t, err)
	bob := connect(t, newServer(t, ws, "bob"), "", nil)
	ok(t, bob, "artifact_write", map[string]any{"name": "plans/a.md", "content": "x"})
	te := fails(t, bob, "artifact_write", map[string]any{"name": "src/a.go", "content": "x"}, mcp.ClassForbidden)
	assert.Equal(t, "artifact.write", te.Action)
	assert.Equal(t, "artifacts_write", te.Rule)
	assert.NotEmpty(t, te.Reason)
	// Reads act as the server's actor too.
	_, err = ws.Artifacts().Create(context.Background(), workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: "secret/k", Content: []byte("k")})
	require.NoError(t, err)
	te = fails(t, bob, "artifact_read", map[string]any{"name": "secret/k"}, mcp.ClassForbidden)
	assert.Equal(t, "artifact.read", te.Action)
}

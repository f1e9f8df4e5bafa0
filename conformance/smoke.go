package conformance

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

func childRole() string { return os.Getenv(childEnv) }

// testSmoke is the first thing a new backend should pass: create, read
// back, update with a version, and see the events.
func testSmoke(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	a, err := ws.Artifacts().Create(ctx, as("planner"), workspace.NewArtifact{Name: "plans/a.md", Kind: "plan", Content: []byte("hello")})
	require.NoError(t, err, "create")
	assert.Equal(t, int64(1), a.Version)
	got, err := ws.Artifacts().Get(ctx, workspace.ByName("plans/a.md"))
	require.NoError(t, err, "get")
	assert.Equal(t, "hello", string(got.Content))
	_, err = ws.Artifacts().Update(ctx, asAt("planner", 1), workspace.ByName("plans/a.md"), workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err, "update")
	page, err := ws.Events().Read(ctx, workspace.EventQuery{})
	require.NoError(t, err, "read")
	assert.Equal(t, []int64{1, 2}, seqs(page.Events))
	assert.Equal(t, []string{workspace.EventArtifactCreated, workspace.EventArtifactUpdated}, types(page.Events))
}

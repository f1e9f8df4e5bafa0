package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

// countedViews counts the store's plain Views.
type countedViews struct {
	*store
	views int
}

func (c *countedViews) View(ctx context.Context, fn func(tx driver.ReadTx) error) error {
	c.views++
	return c.store.View(ctx, fn)
}

// A Get of an artifact's head or of a note runs no View (one statement
// outside a transaction), one of an older version does. What it returns is checked
// against a plain View by the conformance suite.
func TestGetsOfOneRecordRunNoView(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	counted := &countedViews{store: openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))}
	// Writes confirm the workspace's policy with a View of their own (at most
	// once per PolicyRecheck): the count below is of the Gets'.
	ws := engine.New(counted, workspace.Options{PolicyRecheck: time.Hour})
	w := workspace.Write{Actor: "ann"}
	_, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "plans/a.md", Content: []byte("v1")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Update(ctx, w, workspace.ArtifactRef{Name: "plans/a.md"}, workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err)
	counted.views = 0

	got, err := ws.Artifacts().Get(ctx, workspace.ArtifactRef{Name: "plans/a.md"})
	require.NoError(t, err)
	assert.Equal(t, "v2", string(got.Content))
	assert.Zero(t, counted.views, "a Get of the head runs no View")
	got, err = ws.Artifacts().Get(ctx, workspace.ArtifactRef{Name: "plans/a.md", Version: 1})
	require.NoError(t, err)
	assert.Equal(t, "v1", string(got.Content))
	assert.Equal(t, 1, counted.views, "a Get of a version does")

	_, err = ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "decision", Key: "db", Body: "sqlite"})
	require.NoError(t, err)
	n, err := ws.Notes().Get(ctx, "decision", "db")
	require.NoError(t, err)
	assert.Equal(t, "sqlite", n.Body)
	assert.Equal(t, 1, counted.views, "a Get of a note runs no View")
}

package conformance

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// testGCDeletedVersions: a deleted artifact's versions are cut as a live
// one's, its last version standing for the head: the newest N stay (the
// last one among them, so it is still read by ID at the version it was
// deleted at), and so do pinned ones; the rest go. gc runs where the
// store is.
func testGCDeletedVersions(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	arts := ws.Artifacts()
	write := func(name string, n int) workspace.Artifact {
		t.Helper()
		a, err := arts.Create(ctx, as("w"), workspace.NewArtifact{Name: name, Content: []byte(name + " v1")})
		require.NoError(t, err)
		for v := 2; v <= n; v++ {
			a, err = arts.Update(ctx, as("w"), workspace.ByID(a.ID), workspace.ArtifactChange{Content: fmt.Appendf(nil, "%s v%d", name, v)})
			require.NoError(t, err)
		}
		return a
	}
	old := write("old.md", 5)
	// Pins are reserved records, put where the store is.
	store := open(t, storeDSN(h, dsn))
	_, err := store.Pin(ctx, as("lead"), "old.md", 2)
	require.NoError(t, err)
	require.NoError(t, arts.Delete(ctx, as("w"), workspace.ByID(old.ID)))
	write("live.md", 3)

	p := workspace.GCPolicy{Actor: "gc", KeepVersions: 2}
	p.DryRun = true
	dry, err := store.GC(ctx, p)
	require.NoError(t, err)
	assert.Equal(t, int64(3), dry.Versions.Count, "old.md v1 and v3, live.md v1")
	p.DryRun = false
	r, err := store.GC(ctx, p)
	require.NoError(t, err)
	assert.Equal(t, dry.Versions, r.Versions)

	for v, want := range map[int64]bool{1: false, 2: true, 3: false, 4: true, 5: true} {
		a, err := arts.Get(ctx, workspace.ArtifactRef{ID: old.ID, Version: v})
		if !want {
			// Typed on every backend, through a server too.
			var gone *workspace.VersionRemovedError
			if assert.ErrorAs(t, err, &gone, "old.md version %d goes", v) {
				assert.Equal(t, v, gone.Version)
				assert.Positive(t, gone.Oldest)
			}
			assert.ErrorIs(t, err, workspace.ErrNotFound)
			continue
		}
		if assert.NoError(t, err, "old.md version %d stays", v) {
			assert.Equal(t, fmt.Sprintf("old.md v%d", v), string(a.Content))
		}
	}
	vs, err := arts.Versions(ctx, workspace.ByID(old.ID))
	require.NoError(t, err)
	var kept []int64
	for _, v := range vs {
		kept = append(kept, v.Version)
	}
	assert.Equal(t, []int64{2, 4, 5}, kept)
	_, err = arts.Get(ctx, workspace.ByName("old.md"))
	assert.ErrorIs(t, err, workspace.ErrNotFound, "still deleted")

	again, err := store.GC(ctx, p)
	require.NoError(t, err)
	assert.Zero(t, again.Versions.Count, "gc is idempotent")
	v := verify(t, store)
	assert.True(t, v.OK(), "verify: %v", v.Problems)

	// An archive keeps the deleted artifact's gaps, and imports as it was.
	var archive, again2 bytes.Buffer
	_, err = store.Export(ctx, &archive, workspace.ArchiveOptions{})
	require.NoError(t, err)
	dsn2, _ := fresh(t, h)
	store2 := open(t, storeDSN(h, dsn2))
	_, err = store2.Import(ctx, bytes.NewReader(archive.Bytes()), workspace.ArchiveOptions{})
	require.NoError(t, err)
	_, err = store2.Export(ctx, &again2, workspace.ArchiveOptions{})
	require.NoError(t, err)
	assert.Equal(t, archive.String(), again2.String())
	_, err = store2.Artifacts().Get(ctx, workspace.ArtifactRef{ID: old.ID, Version: 3})
	assert.ErrorIs(t, err, workspace.ErrNotFound)
}

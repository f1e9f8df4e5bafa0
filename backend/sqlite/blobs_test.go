package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// Migration 4 gives every version the row of its content: versions that
// shared a blob (a metadata-only update, a rollback) share the row, reads
// by version find it, and a later metadata-only write finds it too. Down
// again, the blobs are keyed by hash as before.
func TestMigrationGivesVersionsTheirBlobs(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ws.db")
	m, err := workspace.OpenMigrator(ctx, "sqlite:"+path)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Goto(ctx, 3))

	// Schema 3: artifact a1 has versions 1 (x), 2 (x again: metadata
	// only), 3 (y), 4 (x: a rollback); a2 has version 1 (x, its own blob).
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := db.Exec(q, args...)
		require.NoError(t, err)
	}
	exec(`INSERT INTO artifacts (id, name, version, kind, owner) VALUES ('a1', 'one', 4, 'k', 'o'), ('a2', 'two', 1, 'k', 'o')`)
	version := func(id string, v int, content string) {
		exec(`INSERT INTO artifact_versions (artifact_id, version, name, kind, owner, content_type, sha256, size,
			task_id, created_at, created_by, updated_at, updated_by) VALUES (?, ?, 'n', 'k', 'o', 'text/plain', ?, ?, '', 0, 'o', 0, 'o')`,
			id, v, hashOf(content), len(content))
	}
	version("a1", 1, "x")
	version("a1", 2, "x")
	version("a1", 3, "y")
	version("a1", 4, "x")
	version("a2", 1, "x")
	exec(`INSERT INTO blobs (artifact_id, sha256, content) VALUES ('a1', ?, 'x'), ('a1', ?, 'y'), ('a2', ?, 'x')`,
		hashOf("x"), hashOf("y"), hashOf("x"))
	require.NoError(t, db.Close())

	require.NoError(t, m.Up(ctx))
	st := openStore(t, "sqlite:"+path)
	var shared, distinct int
	require.NoError(t, st.w.QueryRow(`SELECT count(DISTINCT blob_id) FROM artifact_versions WHERE artifact_id = 'a1' AND sha256 = ?`, hashOf("x")).Scan(&shared))
	require.NoError(t, st.w.QueryRow(`SELECT count(DISTINCT blob_id) FROM artifact_versions`).Scan(&distinct))
	assert.Equal(t, 1, shared, "a1's versions with x share one row")
	assert.Equal(t, 3, distinct)

	read := func(id string, v int64, content string) {
		t.Helper()
		require.NoError(t, st.View(ctx, func(tx driver.ReadTx) error {
			b, err := tx.Content(ctx, id, v, hashOf(content))
			require.NoError(t, err)
			assert.Equal(t, content, string(b), "%s version %d", id, v)
			_, err = tx.Content(ctx, id, v, hashOf(content+"?"))
			assert.ErrorIs(t, err, workspace.ErrNotFound, "a hash that is not the version's")
			return nil
		}))
	}
	read("a1", 1, "x")
	read("a1", 3, "y")
	read("a1", 4, "x")
	read("a2", 1, "x")

	// A metadata-only write (nil content) points at the stored row; nil
	// content that was never stored is refused, and nothing is written.
	a := workspace.Artifact{ID: "a1", Version: 5, Name: "one", Kind: "k", Owner: "o", ContentType: "text/plain",
		SHA256: hashOf("y"), Size: 1, CreatedAt: now(), CreatedBy: "o", UpdatedAt: now(), UpdatedBy: "o"}
	require.NoError(t, st.Update(ctx, func(tx driver.Tx) error { return tx.PutArtifact(ctx, a, nil) }))
	read("a1", 5, "y")
	a.Version, a.SHA256 = 6, hashOf("never stored")
	err = st.Update(ctx, func(tx driver.Tx) error { return tx.PutArtifact(ctx, a, nil) })
	require.ErrorIs(t, err, workspace.ErrNotFound)
	var versions int
	require.NoError(t, st.w.QueryRow(`SELECT count(*) FROM artifact_versions WHERE artifact_id = 'a1'`).Scan(&versions))
	assert.Equal(t, 5, versions)
	require.NoError(t, st.Close())

	require.NoError(t, m.Goto(ctx, 3))
	v, _, err := m.Version(ctx)
	require.NoError(t, err)
	require.Equal(t, uint(3), v)
	db, err = sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	var blobs int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM blobs`).Scan(&blobs))
	assert.Equal(t, 3, blobs, "one blob per (artifact, hash) again")
	var y string
	require.NoError(t, db.QueryRow(`SELECT content FROM blobs WHERE artifact_id = 'a1' AND sha256 = ?`, hashOf("y")).Scan(&y))
	assert.Equal(t, "y", y)
}

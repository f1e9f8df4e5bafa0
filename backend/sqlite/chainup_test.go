package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/agentspace/agentspace/backend/internal/sqlmigrate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/internal/sqlchain"
	"github.com/agentspace/agentspace/workspace"
)

// previousRelease is the schema of the release before the event chain.
const previousRelease = 4

// oldStore makes a store at the previous release's schema holding n
// events, written as that release wrote them (no hash column), and
// returns its path.
func oldStore(t *testing.T, n int) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ws.db")
	m, err := workspace.OpenMigrator(ctx, "sqlite:"+path)
	require.NoError(t, err)
	require.NoError(t, m.Goto(ctx, previousRelease))
	require.NoError(t, m.Close())
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ?)
		INSERT INTO events (seq, time, actor, type, subject_kind, subject_id, subject_name, version, message, indexed)
		SELECT n, 1764000000000000 + n * 1000, 'agent' || (n % 3), 'note.put', 'note', 'decision', 'k' || n, 1, 'put ' || n, 1 FROM s`, n)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE meta SET indexed_to = ? WHERE id = 1`, n)
	require.NoError(t, err)
	return path
}

// editEvent changes event seq's message on the file, its hash kept.
func editEvent(t *testing.T, path string, seq int64) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	res, err := db.Exec(`UPDATE events SET message = 'nothing to see here' WHERE seq = ?`, seq)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
}

func verifyFile(t *testing.T, dsn string) workspace.VerifyReport {
	t.Helper()
	ws, err := workspace.Open(context.Background(), dsn)
	require.NoError(t, err)
	defer ws.Close()
	r, err := ws.Verify(context.Background())
	require.NoError(t, err)
	return r
}

func chainNext(t *testing.T, path string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	var next int64
	require.NoError(t, db.QueryRow(`SELECT chain_next FROM meta WHERE id = 1`).Scan(&next))
	return next
}

// `wsctl migrate up` from the previous release chains the events already
// there: verify then checks every one, and catches an edit to one of them.
func TestUpgradeChainsTheEventsAlreadyThere(t *testing.T) {
	ctx := context.Background()
	path := oldStore(t, 5)
	m, err := workspace.OpenMigrator(ctx, "sqlite:"+path)
	require.NoError(t, err)
	require.NoError(t, m.Up(ctx))
	require.NoError(t, m.Close())
	assert.Zero(t, chainNext(t, path))

	ws, err := workspace.Open(ctx, "sqlite:"+path)
	require.NoError(t, err)
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "decision", Key: "after", Body: "x"})
	require.NoError(t, err)
	r, err := ws.Verify(ctx)
	require.NoError(t, err)
	require.NoError(t, ws.Close())
	assert.True(t, r.OK(), "problems: %v", r.Problems)
	assert.Zero(t, r.Unchained, "no event is left without a hash")
	assert.Equal(t, int64(6), r.Events, "the five old events and the new one")

	editEvent(t, path, 3)
	r = verifyFile(t, "sqlite:"+path)
	assert.False(t, r.OK())
	assert.Equal(t, int64(3), r.BrokenSeq, "problems: %v", r.Problems)
}

// An automatic migration chains a log longer than one batch, linking the
// batches: an edit to the first event of the second batch is caught.
func TestUpgradeChainsALogLargerThanOneBatch(t *testing.T) {
	n := 2*chainBatch + 100
	path := oldStore(t, n)
	r := verifyFile(t, "sqlite:"+path+"?ws_automigrate=true")
	assert.True(t, r.OK(), "problems: %v", r.Problems)
	assert.Zero(t, r.Unchained)
	assert.Equal(t, int64(n), r.Events)
	assert.Zero(t, chainNext(t, path))

	editEvent(t, path, chainBatch+1)
	r = verifyFile(t, "sqlite:"+path)
	assert.False(t, r.OK())
	assert.Equal(t, int64(chainBatch+1), r.BrokenSeq, "problems: %v", r.Problems)
}

// An upgrade cut short after its first batch (a crash: the process stops
// between two transactions) leaves chain_next at the next event; the next
// open, even without ws_automigrate, chains the rest before anything is
// appended, and the whole log verifies.
func TestUpgradeCutShortResumesOnTheNextOpen(t *testing.T) {
	ctx := context.Background()
	n := chainBatch + 10
	path := oldStore(t, n)
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	require.NoError(t, runMigration(ctx, db, func(r *sqlmigrate.Runner) error { return r.Up(ctx) }))
	assert.Equal(t, int64(1), chainNext(t, path), "the migration asks for the log to be chained")
	done, err := sqlchain.Step(ctx, db, chainUp, chainBatch)
	require.NoError(t, err)
	require.False(t, done)
	require.NoError(t, db.Close())
	assert.Equal(t, int64(chainBatch+1), chainNext(t, path))

	ws, err := workspace.Open(ctx, "sqlite:"+path)
	require.NoError(t, err)
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "decision", Key: "after", Body: "x"})
	require.NoError(t, err)
	r, err := ws.Verify(ctx)
	require.NoError(t, err)
	require.NoError(t, ws.Close())
	assert.True(t, r.OK(), "problems: %v", r.Problems)
	assert.Zero(t, r.Unchained)
	assert.Equal(t, int64(n+1), r.Events)
	assert.Zero(t, chainNext(t, path))
}

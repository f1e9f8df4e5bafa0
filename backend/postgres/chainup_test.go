package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/internal/sqlchain"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
)

// previousRelease is the schema of the release before the event chain.
const previousRelease = 2

func chainCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// inSchema runs query in the schema dsn names, through a connection of
// its own, as another client of the database could, and returns the rows
// it changed.
func inSchema(t *testing.T, dsn, query string, args ...any) int64 {
	t.Helper()
	conn := pgtest.Connect(t)
	_, err := conn.Exec(t.Context(), `SELECT set_config('search_path', $1, false)`, pgx.Identifier{pgtest.SchemaOf(t, dsn)}.Sanitize())
	require.NoError(t, err)
	tag, err := conn.Exec(t.Context(), query, args...)
	require.NoError(t, err)
	return tag.RowsAffected()
}

// oldSchema makes a schema at the previous release's version holding n
// events, written as that release wrote them (the seq taken from the
// counter row, no hash column), and returns its DSN.
func oldSchema(t *testing.T, n int) string {
	t.Helper()
	ctx := chainCtx(t)
	dsn := pgtest.NewDSN(t)
	m, err := workspace.OpenMigrator(ctx, dsn)
	require.NoError(t, err)
	require.NoError(t, m.Goto(ctx, previousRelease))
	require.NoError(t, m.Close())
	inSchema(t, dsn, `INSERT INTO events (seq, time, actor, type, subject_kind, subject_id, subject_name, version, message)
		SELECT n, now() - interval '1 day' + n * interval '1 millisecond', 'agent' || (n % 3), 'note.put', 'note', 'decision', 'k' || n, 1, 'put ' || n
		FROM generate_series(1, $1::bigint) AS n`, n)
	inSchema(t, dsn, `UPDATE counters SET seq = $1`, n)
	return dsn
}

func verifyDSN(t *testing.T, dsn string) workspace.VerifyReport {
	t.Helper()
	ctx := chainCtx(t)
	ws, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	defer ws.Close()
	r, err := ws.Verify(ctx)
	require.NoError(t, err)
	return r
}

func chainNextOf(t *testing.T, dsn string) int64 {
	t.Helper()
	var next int64
	conn := pgtest.Connect(t)
	q := `SELECT chain_next FROM ` + pgx.Identifier{pgtest.SchemaOf(t, dsn), "counters"}.Sanitize()
	require.NoError(t, conn.QueryRow(t.Context(), q).Scan(&next))
	return next
}

func editEvent(t *testing.T, dsn string, seq int64) {
	t.Helper()
	require.Equal(t, int64(1), inSchema(t, dsn, `UPDATE events SET message = 'nothing to see here' WHERE seq = $1`, seq))
}

// `wsctl migrate up` from the previous release chains the events already
// there: verify then checks every one, and catches an edit to one of them.
func TestUpgradeChainsTheEventsAlreadyThere(t *testing.T) {
	ctx := chainCtx(t)
	dsn := oldSchema(t, 5)
	m, err := workspace.OpenMigrator(ctx, dsn)
	require.NoError(t, err)
	require.NoError(t, m.Up(ctx))
	require.NoError(t, m.Close())
	assert.Zero(t, chainNextOf(t, dsn))

	ws, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "decision", Key: "after", Body: "x"})
	require.NoError(t, err)
	r, err := ws.Verify(ctx)
	require.NoError(t, err)
	require.NoError(t, ws.Close())
	assert.True(t, r.OK(), "problems: %v", r.Problems)
	assert.Zero(t, r.Unchained, "no event is left without a hash")
	assert.Equal(t, int64(6), r.Events, "the five old events and the new one")

	editEvent(t, dsn, 3)
	r = verifyDSN(t, dsn)
	assert.False(t, r.OK())
	assert.Equal(t, int64(3), r.BrokenSeq, "problems: %v", r.Problems)
}

// An automatic migration chains a log longer than one batch, linking the
// batches: an edit to the first event of the second batch is caught.
func TestUpgradeChainsALogLargerThanOneBatch(t *testing.T) {
	n := 2*chainBatch + 100
	dsn := oldSchema(t, n)
	r := verifyDSN(t, pgtest.WithParams(t, dsn, "ws_automigrate", "true"))
	assert.True(t, r.OK(), "problems: %v", r.Problems)
	assert.Zero(t, r.Unchained)
	assert.Equal(t, int64(n), r.Events)
	assert.Zero(t, chainNextOf(t, dsn))

	editEvent(t, dsn, chainBatch+1)
	r = verifyDSN(t, dsn)
	assert.False(t, r.OK())
	assert.Equal(t, int64(chainBatch+1), r.BrokenSeq, "problems: %v", r.Problems)
}

// An upgrade cut short after its first batch (the process stops between
// two transactions) leaves chain_next at the next event; the next open,
// even without ws_automigrate, chains the rest before anything is
// appended, and the whole log verifies.
func TestUpgradeCutShortResumesOnTheNextOpen(t *testing.T) {
	ctx := chainCtx(t)
	n := chainBatch + 10
	dsn := oldSchema(t, n)
	cfg, err := pgx.ParseConfig(pgtest.ServerDSN(t))
	require.NoError(t, err)
	m, err := newMigrator(ctx, cfg, pgtest.SchemaOf(t, dsn))
	require.NoError(t, err)
	require.NoError(t, m.r.Up(ctx), "the schema steps alone")
	assert.Equal(t, int64(1), chainNextOf(t, dsn), "the migration asks for the log to be chained")
	done, err := sqlchain.Step(ctx, m.db, chainUp, chainBatch)
	require.NoError(t, err)
	require.False(t, done)
	require.NoError(t, m.Close())
	assert.Equal(t, int64(chainBatch+1), chainNextOf(t, dsn))

	ws, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "decision", Key: "after", Body: "x"})
	require.NoError(t, err)
	r, err := ws.Verify(ctx)
	require.NoError(t, err)
	require.NoError(t, ws.Close())
	assert.True(t, r.OK(), "problems: %v", r.Problems)
	assert.Zero(t, r.Unchained)
	assert.Equal(t, int64(n+1), r.Events)
	assert.Zero(t, chainNextOf(t, dsn))
}

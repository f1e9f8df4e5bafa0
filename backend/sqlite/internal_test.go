package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

func openStore(t *testing.T, dsn string) *store {
	t.Helper()
	p, err := driver.ParseDSN(dsn)
	require.NoError(t, err)
	p.Config.Logger = slog.Default()
	st, err := engine.OpenStore(context.Background(), p)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st.(*store)
}

func TestSynchronousParamSetsThePragmaOnTheWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ws.db")
	for _, tc := range []struct {
		param string
		want  int // PRAGMA synchronous: 0 OFF, 1 NORMAL, 2 FULL
	}{
		{"", 2},
		{"?ws_synchronous=NORMAL", 1},
		{"?ws_synchronous=off", 0},
		{"?ws_synchronous=full", 2},
	} {
		st := openStore(t, "sqlite:"+path+tc.param)
		var got int
		require.NoError(t, st.w.QueryRow(`PRAGMA synchronous`).Scan(&got))
		assert.Equal(t, tc.want, got, "synchronous for %q", tc.param)
		require.NoError(t, st.Close())
	}
}

// TestTheWritersStatementJournalStaysInMemory: a statement that writes
// many rows (the event index batch) keeps its statement journal in memory
// (temp_store MEMORY) rather than spilling it, past 64 KiB, to a temporary
// file the committer creates, writes and deletes inside the transaction.
func TestTheWritersStatementJournalStaysInMemory(t *testing.T) {
	st := openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	var got int
	require.NoError(t, st.w.QueryRow(`PRAGMA temp_store`).Scan(&got))
	assert.Equal(t, 2, got, "temp_store: 2 is MEMORY")
}

// TestEveryConnectionHasTheLargerPageCache: the writer and each reader get
// cacheKiB (see its comment: at SQLite's 2,000 KiB a handle that had
// written a large store read its hot pages again on every read).
func TestEveryConnectionHasTheLargerPageCache(t *testing.T) {
	st := openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	ctx := context.Background()
	conns := []*sql.Conn{}
	for range readConns { // hold them all, so each is a connection of its own
		c, err := st.r.Conn(ctx)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	w, err := st.w.Conn(ctx)
	require.NoError(t, err)
	conns = append(conns, w)
	for i, c := range conns {
		var got int
		require.NoError(t, c.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&got))
		assert.Equal(t, -cacheKiB, got, "connection %d", i)
		require.NoError(t, c.Close())
	}
}

func TestDriverParamsPassThroughAndBusyTimeoutApplies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ws.db")
	st := openStore(t, "sqlite:"+path+"?_pragma=cache_size(-4000)&ws_busy_timeout=1500ms")
	for _, db := range []*sql.DB{st.w, st.r} {
		var cache, busy int
		require.NoError(t, db.QueryRow(`PRAGMA cache_size`).Scan(&cache))
		require.NoError(t, db.QueryRow(`PRAGMA busy_timeout`).Scan(&busy))
		assert.Equal(t, -4000, cache)
		assert.Equal(t, 1500, busy)
	}
}

func TestReadPoolCannotWrite(t *testing.T) {
	st := openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	_, err := st.r.Exec(`UPDATE meta SET floor = 5`)
	assert.Error(t, err)
}

// queryPlan returns EXPLAIN QUERY PLAN's lines for q.
func queryPlan(t *testing.T, st *store, q string, args ...any) string {
	t.Helper()
	rows, err := st.w.Query(`EXPLAIN QUERY PLAN `+q, args...)
	require.NoError(t, err)
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var (
			id, parent, notused int
			detail              string
		)
		require.NoError(t, rows.Scan(&id, &parent, &notused, &detail))
		lines = append(lines, detail)
	}
	require.NoError(t, rows.Err())
	return strings.Join(lines, "\n")
}

type planCase struct {
	name, query, index string
	args               []any
}

func eventsCase(name string, q workspace.EventQuery, index string) planCase {
	query, args := eventsQuery(q)
	return planCase{name, query, index, args}
}

// The hot queries walk an index in the order they return rows, so they
// stop after LIMIT rows instead of sorting every candidate.
func TestHotQueriesUseIndexesWithoutSorting(t *testing.T) {
	st := openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	for _, tc := range []planCase{
		{"ready task", qReadyTask + ` ORDER BY t.priority DESC, t.id LIMIT 1`, "tasks_ready", nil},
		{"expired claims", qExpiredClaims, "tasks_claim_expiry", []any{1, 10}},
		{"tasks by status", `SELECT ` + taskCols + ` FROM tasks t WHERE t.id > ? AND t.status = ? ORDER BY t.id LIMIT 10`, "tasks_status", []any{"", "pending"}},
		{"artifacts by kind", qArtifactHead + `h.name > ? AND h.kind = ? ORDER BY h.name LIMIT 10`, "artifacts_live_kind", []any{"", "plan"}},
		{"artifact by name", qArtifactByName, "artifacts_live_name", []any{"x"}},
		{"artifact and its lease by name", qArtifactLeaseByName, "artifacts_live_name", []any{"x"}},
		{"artifacts and their leases by names", qArtifactLeaseByNames, "artifacts_live_name", []any{`["x","y"]`}},
		{"artifacts and their leases by IDs", qArtifactLeaseByIDs, "sqlite_autoindex_artifacts_1", []any{`["x","y"]`}},
		{"content stored under an earlier version", qStoredBlob, "PRIMARY KEY", []any{"a", "h"}},
		{"a version's content", qContent, "PRIMARY KEY", []any{"a", 1, "h"}},
		eventsCase("events by actor", workspace.EventQuery{Actor: "a", Limit: 10}, "events_actor"),
		eventsCase("events of one type", workspace.EventQuery{Types: []string{"a"}, Limit: 10}, "events_type"),
		eventsCase("events of several types", workspace.EventQuery{Types: []string{"a", "b"}, Limit: 10}, "PRIMARY KEY"),
		eventsCase("events by subject", workspace.EventQuery{SubjectID: "a", Limit: 10}, "events_subject"),
		eventsCase("events by subject name", workspace.EventQuery{SubjectName: "a", Limit: 10}, "events_subject_name"),
	} {
		plan := queryPlan(t, st, tc.query, tc.args...)
		assert.Contains(t, plan, tc.index, "%s:\n%s", tc.name, plan)
		assert.NotContains(t, plan, "TEMP B-TREE", "%s:\n%s", tc.name, plan)
	}
}

// An import writes events with their original seqs above the head (a
// compacted log starts above 1); later appends continue from there.
func TestAppendEventsKeepsExplicitSeqs(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	ev := func(seq int64) workspace.Event {
		return workspace.Event{Seq: seq, Actor: "import", Type: workspace.EventNotePut, Time: now()}
	}
	var first, next int64
	require.NoError(t, st.Update(ctx, func(tx driver.Tx) error {
		if err := tx.CompactEvents(ctx, 5); err != nil {
			return err
		}
		head, err := tx.Head(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(4), head, "an empty log compacted to floor 5 has head 4")
		first, err = tx.AppendEvents(ctx, []workspace.Event{ev(5), ev(6)})
		return err
	}))
	assert.Equal(t, int64(5), first)
	require.NoError(t, st.Update(ctx, func(tx driver.Tx) error {
		var err error
		next, err = tx.AppendEvents(ctx, []workspace.Event{ev(0)})
		return err
	}))
	assert.Equal(t, int64(7), next)
	err := st.Update(ctx, func(tx driver.Tx) error {
		_, err := tx.AppendEvents(ctx, []workspace.Event{ev(7)})
		return err
	})
	assert.ErrorIs(t, err, workspace.ErrInvalid, "a seq at or below the head")

	require.NoError(t, st.View(ctx, func(tx driver.ReadTx) error {
		floor, err := tx.Floor(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(5), floor)
		evs, err := tx.Events(ctx, workspace.EventQuery{})
		require.NoError(t, err)
		var seqs []int64
		for _, e := range evs {
			seqs = append(seqs, e.Seq)
		}
		assert.Equal(t, []int64{5, 6, 7}, seqs)
		return nil
	}))
}

// In a write transaction Artifact reads the artifact's lease with it, and
// Lease answers from that read until a lease write or a savepoint's
// rollback makes it stale: every answer equals a read of the row.
func TestWriteTxReadsTheArtifactsLeaseWithIt(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	at := now()
	a := workspace.Artifact{ID: "a1", Version: 1, Name: "doc", Kind: "plan", Owner: "ann", ContentType: "text/plain",
		SHA256: hashOf("x"), Size: 1, CreatedAt: at, CreatedBy: "ann", UpdatedAt: at, UpdatedBy: "ann"}
	require.NoError(t, st.Update(ctx, func(tx driver.Tx) error { return tx.PutArtifact(ctx, a, []byte("x")) }))

	require.NoError(t, st.Update(ctx, func(tx driver.Tx) error {
		wt := tx.(*writeTx)
		same := func(resource, owner string) {
			t.Helper()
			got, err := tx.Lease(ctx, resource)
			want, werr := wt.readTx.Lease(ctx, resource)
			require.Equal(t, werr, err)
			require.Equal(t, want, got)
			assert.Equal(t, owner, got.Owner)
		}
		lease := func(owner string, token int64) workspace.Lease {
			return workspace.Lease{Resource: "artifact:doc", Owner: owner, Token: token, AcquiredAt: at, ExpiresAt: at.Add(time.Minute)}
		}
		_, err := tx.Artifact(ctx, workspace.ArtifactRef{Name: "doc"})
		require.NoError(t, err)
		_, err = tx.Lease(ctx, "artifact:doc")
		require.ErrorIs(t, err, workspace.ErrNotFound)
		same("artifact:doc", "")

		require.NoError(t, tx.PutLease(ctx, lease("ann", 1)))
		same("artifact:doc", "ann")
		_, err = tx.Artifact(ctx, workspace.ArtifactRef{ID: "a1"})
		require.NoError(t, err)
		same("artifact:doc", "ann")

		sp := tx.(driver.Savepointer)
		require.NoError(t, sp.Savepoint(ctx))
		require.NoError(t, tx.PutLease(ctx, lease("bob", 2)))
		_, err = tx.Artifact(ctx, workspace.ArtifactRef{Name: "doc"})
		require.NoError(t, err)
		same("artifact:doc", "bob")
		require.NoError(t, sp.RollbackSavepoint(ctx))
		same("artifact:doc", "ann")
		same("artifact:other", "")
		return nil
	}))
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// A write transaction's statements run with a ctx that cannot end (see
// txq.whole), so each checks its ctx before it starts: once it has ended
// the next statement fails with its error, and nothing commits. (The
// transaction's own ctx, which database/sql watches, stays live here.)
func TestWriteTxStopsAtItsNextStatementOnceItsContextEnds(t *testing.T) {
	st := openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	note := func(key string) workspace.Note {
		return workspace.Note{Kind: "decision", Key: key, Author: "a", Version: 1,
			CreatedAt: now(), UpdatedAt: now(), UpdatedBy: "a"}
	}
	ctx, cancel := context.WithCancel(context.Background())
	err := st.Update(context.Background(), func(tx driver.Tx) error {
		if err := tx.PutNote(ctx, note("first")); err != nil {
			return err
		}
		cancel()
		return tx.PutNote(ctx, note("second"))
	})
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, st.View(context.Background(), func(tx driver.ReadTx) error {
		_, err := tx.Note(context.Background(), "decision", "first")
		assert.ErrorIs(t, err, workspace.ErrNotFound, "the first write rolled back")
		return nil
	}))
}

// TestTheWriterSetsAutoVacuumOnABlankFileOnly: on a file that has tables,
// SQLite answers `PRAGMA auto_vacuum = INCREMENTAL` with a write
// transaction that rewrites the header page (a commit, three fsyncs and a
// checkpoint at the last close), so the writer's DSN asks for it only
// while the file has no pages; a store made that way is INCREMENTAL.
func TestTheWriterSetsAutoVacuumOnABlankFileOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ws.db")
	require.NoError(t, prepareFile(path))
	require.True(t, isBlank(path))
	assert.Contains(t, settings{path: path, blank: true}.dsn(true), "auto_vacuum(2)")

	openStore(t, "sqlite:"+path)
	raw, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer raw.Close()
	var mode int
	require.NoError(t, raw.QueryRow(`PRAGMA auto_vacuum`).Scan(&mode))
	assert.Equal(t, 2, mode)
	assert.False(t, isBlank(path))
	assert.False(t, isBlank(path+".missing"))
	assert.NotContains(t, settings{path: path}.dsn(true), "auto_vacuum")
	assert.NotContains(t, settings{path: path, blank: true}.dsn(false), "auto_vacuum", "a reader sets nothing")
}

// TestATransactionWhoseContextEndedFailsWithTheContextsError checks
// retry's rule: once the context has ended, whatever database/sql's
// rollback made a statement fail with (sql.ErrTxDone, or its unexported
// "Rows are closed" when the rollback lands between a row's Next and
// Scan) is reported as the context's own error; before that, the
// failure is the op's.
func TestATransactionWhoseContextEndedFailsWithTheContextsError(t *testing.T) {
	s := &store{log: slog.New(slog.DiscardHandler)}
	rowsClosed := errors.New("sqlite: event head: sql: Rows are closed")
	ctx, cancel := context.WithCancel(context.Background())
	err := s.retry(ctx, "write", func() error { return rowsClosed })
	require.ErrorIs(t, err, rowsClosed, "a live context: the op's own error")
	cancel()
	for _, opErr := range []error{rowsClosed, sql.ErrTxDone, fmt.Errorf("sqlite: commit: %w", sql.ErrTxDone)} {
		err := s.retry(ctx, "write", func() error { return opErr })
		require.ErrorIs(t, err, context.Canceled, "%v", opErr)
	}
	require.NoError(t, s.retry(ctx, "write", func() error { return nil }), "a commit that succeeded stands")
}

package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// matches is the reference filter: what Events must return for q.
func matches(all []workspace.Event, q workspace.EventQuery) []workspace.Event {
	var out []workspace.Event
	for _, e := range all {
		switch {
		case e.Seq <= q.AfterSeq,
			len(q.Types) > 0 && !slices.Contains(q.Types, e.Type),
			q.Actor != "" && e.Actor != q.Actor,
			q.SubjectKind != "" && e.Subject.Kind != q.SubjectKind,
			q.SubjectID != "" && e.Subject.ID != q.SubjectID,
			q.SubjectName != "" && e.Subject.Name != q.SubjectName,
			!q.Since.IsZero() && e.Time.Before(q.Since),
			!q.Until.IsZero() && !e.Time.Before(q.Until):
			continue
		}
		out = append(out, e)
		if q.Limit > 0 && len(out) == q.Limit {
			break
		}
	}
	return out
}

// checkIndexed asserts the invariant of the batched filter indexes: an
// event is indexed exactly when its seq is at most meta.indexed_to, and
// the tail is shorter than the batch.
func checkIndexed(t *testing.T, st *store, batch int64) {
	t.Helper()
	var indexedTo, head, wrong int64
	require.NoError(t, st.w.QueryRow(`SELECT indexed_to FROM meta WHERE id = 1`).Scan(&indexedTo))
	require.NoError(t, st.w.QueryRow(qHead).Scan(&head))
	require.NoError(t, st.w.QueryRow(`SELECT count(*) FROM events WHERE indexed <> (seq <= ?)`, indexedTo).Scan(&wrong))
	assert.Zero(t, wrong, "events whose indexed flag disagrees with indexed_to %d", indexedTo)
	assert.LessOrEqual(t, indexedTo, head)
	assert.Less(t, head-indexedTo, batch, "the tail is shorter than the batch")
}

// Filtered reads return the same events whichever side of meta.indexed_to
// they are on, for batches that split the log into many parts, a few, and
// none; with appends of one event and of several, a rolled-back append,
// and compaction.
func TestEventFiltersAcrossTheIndexedBoundary(t *testing.T) {
	ctx := context.Background()
	for _, batch := range []int64{1, 3, 64, DefaultIndexBatch} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			st := openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db")+fmt.Sprintf("?ws_index_batch=%d", batch))
			rng := rand.New(rand.NewPCG(uint64(batch), 7)) // #nosec G404 -- test data
			base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			pick := func(opts ...string) string { return opts[rng.IntN(len(opts))] }
			var all []workspace.Event
			newEvent := func() workspace.Event {
				return workspace.Event{
					Time:    base.Add(time.Duration(len(all)) * time.Second),
					Actor:   pick("ann", "bob", "cy"),
					Type:    pick(workspace.EventArtifactUpdated, workspace.EventNotePut, workspace.EventTaskCreated),
					Subject: workspace.Subject{Kind: pick("artifact", "note"), ID: pick("a1", "a2", "a3", "a4"), Name: pick("plan", "spec", "log")},
				}
			}
			for len(all) < 600 {
				n := 1 + rng.IntN(5)
				if rng.IntN(4) > 0 {
					n = 1
				}
				evs := make([]workspace.Event, n)
				for i := range evs {
					evs[i] = newEvent()
				}
				rollback := rng.IntN(10) == 0
				err := st.Update(ctx, func(tx driver.Tx) error {
					first, err := tx.AppendEvents(ctx, evs)
					if err != nil {
						return err
					}
					if rollback {
						return errRolledBack
					}
					for i := range evs {
						evs[i].Seq = first + int64(i)
					}
					return nil
				})
				if rollback {
					require.ErrorIs(t, err, errRolledBack)
					checkIndexed(t, st, batch)
					continue
				}
				require.NoError(t, err)
				all = append(all, evs...)
				checkIndexed(t, st, batch)
			}

			read := func(q workspace.EventQuery) []workspace.Event {
				t.Helper()
				var got []workspace.Event
				require.NoError(t, st.View(ctx, func(tx driver.ReadTx) error {
					var err error
					got, err = tx.Events(ctx, q)
					return err
				}))
				return got
			}
			check := func() {
				t.Helper()
				for range 300 {
					q := workspace.EventQuery{AfterSeq: int64(rng.IntN(len(all) + 20)), Limit: rng.IntN(40)}
					switch rng.IntN(6) {
					case 0:
						q.Actor = pick("ann", "bob", "nobody")
					case 1:
						q.SubjectID = pick("a1", "a4")
						q.Types = []string{pick(workspace.EventArtifactUpdated, workspace.EventNotePut)}
					case 2:
						q.SubjectName = pick("plan", "log")
						q.SubjectKind = pick("artifact", "note")
					case 3:
						q.Types = []string{workspace.EventNotePut, workspace.EventTaskCreated}
						q.Actor = "cy"
					case 4:
						q.SubjectID = "a2"
						q.Since = base.Add(time.Duration(rng.IntN(len(all))) * time.Second)
						q.Until = q.Since.Add(200 * time.Second)
					default:
						q.Types = []string{pick(workspace.EventArtifactUpdated, workspace.EventTaskCreated)}
					}
					want := matches(all, q)
					got := read(q)
					require.Equal(t, len(want), len(got), "%+v", q)
					for i := range want {
						require.Equal(t, want[i].Seq, got[i].Seq, "%+v", q)
						require.Equal(t, want[i].Subject, got[i].Subject, "%+v", q)
					}
				}
			}
			check()

			// Compaction takes events from both sides of the boundary.
			floor := int64(len(all)) - batch/2
			if floor < 2 {
				floor = 2
			}
			require.NoError(t, st.Update(ctx, func(tx driver.Tx) error { return tx.CompactEvents(ctx, floor) }))
			all = slices.DeleteFunc(all, func(e workspace.Event) bool { return e.Seq < floor })
			checkIndexed(t, st, batch)
			check()
		})
	}
}

var errRolledBack = fmt.Errorf("rolled back on purpose")

// Migrating a log written before the batches (schema 2) indexes all of it:
// filtered reads find its events, and appends continue past them.
func TestMigrationIndexesAnExistingLog(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ws.db")
	m, err := workspace.OpenMigrator(ctx, "sqlite:"+path)
	require.NoError(t, err)
	require.NoError(t, m.Goto(ctx, 2))
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	for seq := 1; seq <= 10; seq++ {
		_, err := db.Exec(`INSERT INTO events (seq, time, actor, type, subject_id) VALUES (?, 0, ?, 'note.put', ?)`,
			seq, fmt.Sprint("actor", seq%2), fmt.Sprint("n", seq%3))
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
	require.NoError(t, m.Up(ctx))
	require.NoError(t, m.Close())

	st := openStore(t, "sqlite:"+path+"?ws_index_batch=4")
	checkIndexed(t, st, 4)
	var indexedTo int64
	require.NoError(t, st.w.QueryRow(`SELECT indexed_to FROM meta WHERE id = 1`).Scan(&indexedTo))
	assert.Equal(t, int64(10), indexedTo)
	require.NoError(t, st.Update(ctx, func(tx driver.Tx) error {
		_, err := tx.AppendEvents(ctx, []workspace.Event{{Actor: "actor1", Type: workspace.EventNotePut, Subject: workspace.Subject{ID: "n1"}, Time: now()}})
		return err
	}))
	checkIndexed(t, st, 4)
	require.NoError(t, st.View(ctx, func(tx driver.ReadTx) error {
		got, err := tx.Events(ctx, workspace.EventQuery{SubjectID: "n1", Actor: "actor1"})
		require.NoError(t, err)
		var seqs []int64
		for _, e := range got {
			seqs = append(seqs, e.Seq)
		}
		assert.Equal(t, []int64{1, 7, 11}, seqs)
		return nil
	}))
}

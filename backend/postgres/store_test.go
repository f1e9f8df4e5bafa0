package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

// openTestStore opens the backend's Store on a fresh schema, without the engine.
func openTestStore(t *testing.T) *store {
	t.Helper()
	p, err := driver.ParseDSN(pgtest.NewDSN(t))
	require.NoError(t, err)
	p.Config.Logger = testLogger(t)
	st, err := engine.OpenStore(context.Background(), p)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st.(*store)
}

func note(key, body string, now time.Time) workspace.Note {
	return workspace.Note{Kind: "decision", Key: key, Body: body, Author: "a", Version: 1, CreatedAt: now, UpdatedAt: now, UpdatedBy: "a"}
}

func TestAQueuedWriteThatFailsFailsTheWholeTransaction(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t)
	err := st.Update(ctx, func(tx driver.Tx) error {
		require.NoError(t, tx.PutNote(ctx, note("ok", "fine", tx.Now())))
		// PostgreSQL text cannot hold NUL: the server refuses this write.
		require.NoError(t, tx.PutNote(ctx, note("bad", "nul\x00byte", tx.Now())))
		_, err := tx.AppendEvents(ctx, []workspace.Event{{Time: tx.Now(), Actor: "a", Type: workspace.EventNotePut}})
		return err
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "notes")
	err = st.View(ctx, func(tx driver.ReadTx) error {
		_, err := tx.Note(ctx, "decision", "ok")
		assert.ErrorIs(t, err, workspace.ErrNotFound, "the write before the failing one was rolled back")
		head, err := tx.Head(ctx)
		assert.Zero(t, head)
		return err
	})
	require.NoError(t, err)
}

func TestAnUpdateWhoseFnFailsKeepsNothing(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t)
	boom := errors.New("boom")
	err := st.Update(ctx, func(tx driver.Tx) error {
		require.NoError(t, tx.PutNote(ctx, note("k", "b", tx.Now())))
		_, err := tx.Note(ctx, "decision", "k")
		require.NoError(t, err, "a read sees the transaction's own queued writes")
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.NoError(t, st.View(ctx, func(tx driver.ReadTx) error {
		_, err := tx.Note(ctx, "decision", "k")
		assert.ErrorIs(t, err, workspace.ErrNotFound)
		return nil
	}))
}

func TestAppendEventsHandsOutConsecutiveSeqsAndKeepsImportedOnes(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t)
	var first, imported int64
	require.NoError(t, st.Update(ctx, func(tx driver.Tx) error {
		var err error
		first, err = tx.AppendEvents(ctx, []workspace.Event{{Time: tx.Now(), Actor: "a", Type: "x"}, {Time: tx.Now(), Actor: "a", Type: "y"}})
		return err
	}))
	assert.Equal(t, int64(1), first)
	require.NoError(t, st.Update(ctx, func(tx driver.Tx) error {
		var err error
		imported, err = tx.AppendEvents(ctx, []workspace.Event{{Seq: 10, Time: tx.Now(), Actor: "a", Type: "x"}, {Seq: 11, Time: tx.Now(), Actor: "a", Type: "y"}})
		return err
	}))
	assert.Equal(t, int64(10), imported)
	require.NoError(t, st.View(ctx, func(tx driver.ReadTx) error {
		head, err := tx.Head(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(11), head)
		evs, err := tx.Events(ctx, workspace.EventQuery{Limit: 10})
		require.NoError(t, err)
		var seqs []int64
		for _, e := range evs {
			seqs = append(seqs, e.Seq)
		}
		assert.Equal(t, []int64{1, 2, 10, 11}, seqs)
		return nil
	}))
}

func TestNowComesFromTheDatabaseInMicroseconds(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t)
	var now, db time.Time
	require.NoError(t, st.Update(ctx, func(tx driver.Tx) error {
		now = tx.Now()
		return nil
	}))
	require.NoError(t, st.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&db))
	assert.Equal(t, time.UTC, now.Location())
	assert.Equal(t, now, now.Truncate(time.Microsecond))
	assert.False(t, now.After(db.UTC()), "Now was read from the server's clock before this query")
}

// TestTheClaimWalksTheReadyIndexWithoutStatistics checks the claim query's
// plan on a table never analyzed, where the planner would otherwise sort
// every pending task on each claim, and that the setting it needs is put
// back for the rest of the transaction.
func TestTheClaimWalksTheReadyIndexWithoutStatistics(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t)
	labels := map[string]string{"pool": "p"}
	putTasks(t, st, 2000, func(i int, task *workspace.Task) {
		task.Labels = labels
		if i >= 1000 {
			task.DependsOn = []string{fmt.Sprintf("t%05d", i-1000)}
		}
	})
	require.NoError(t, st.Update(ctx, func(tx driver.Tx) error {
		wt := tx.(*writeTx)
		_, _ = wt.pl.Exec(ctx, sortsOff)
		rows, err := wt.q.Query(ctx, "EXPLAIN "+readyTask, "", labelsJSON(labels))
		text := planText(t, rows, err)
		_, _ = wt.pl.Exec(ctx, sortsBack)
		assert.Contains(t, text, "Index Scan using tasks_ready", text)
		assert.NotContains(t, text, "Sort", text)

		task, err := tx.ReadyTask(ctx, workspace.ClaimRequest{Labels: labels})
		require.NoError(t, err)
		assert.Equal(t, "t00000", task.ID)
		var sort string
		require.NoError(t, wt.q.QueryRow(ctx, "SELECT current_setting('enable_sort')").Scan(&sort))
		assert.Equal(t, "on", sort, "the claim put enable_sort back")
		return nil
	}))
}

// putTasks stores n pending tasks, t00000 and on, in one transaction,
// each as shape leaves it.
func putTasks(t *testing.T, st *store, n int, shape func(i int, task *workspace.Task)) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, st.Update(ctx, func(tx driver.Tx) error {
		now := tx.Now()
		for i := range n {
			task := workspace.Task{ID: fmt.Sprintf("t%05d", i), Title: "t", Status: workspace.TaskPending,
				Version: 1, CreatedAt: now, CreatedBy: "a", UpdatedAt: now, UpdatedBy: "a"}
			shape(i, &task)
			if err := tx.PutTask(ctx, task); err != nil {
				return err
			}
		}
		return nil
	}))
}

// planText is an EXPLAIN's rows as one text.
func planText(t *testing.T, rows pgx.Rows, err error) string {
	t.Helper()
	plan, err := collect(rows, err, func(row pgx.Row) (string, error) {
		var line string
		return line, row.Scan(&line)
	})
	require.NoError(t, err)
	return strings.Join(plan, "\n")
}

// TestAStatusListWalksTheStatusIndexOnAGenericPlan: a prepared statement
// runs on a generic plan after five runs. When every task is pending, a
// generic plan for "status = $n" walked the whole primary key for a
// status no task has; with the status in the text (listTasks) the generic
// plan walks tasks_status.
func TestAStatusListWalksTheStatusIndexOnAGenericPlan(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t)
	putTasks(t, st, 2000, func(i int, task *workspace.Task) { task.Assignee = fmt.Sprintf("a%d", i%2) })
	conn, err := st.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "SET search_path = "+st.path)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "ANALYZE tasks")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	defer func() { _, _ = conn.Exec(ctx, "RESET plan_cache_mode; RESET search_path; DEALLOCATE ALL") }()
	for _, status := range []workspace.TaskStatus{workspace.TaskBlocked, workspace.TaskFailed, workspace.TaskInProgress} {
		name := "list_" + string(status)
		_, err := conn.Exec(ctx, "PREPARE "+name+" AS "+listTasks[status][0])
		require.NoError(t, err)
		rows, err := conn.Query(ctx, "EXPLAIN EXECUTE "+name+"('', '{}', 1000)")
		text := planText(t, rows, err)
		assert.Contains(t, text, "tasks_status", text)
	}
	// Each combination of filters returns what it asks for.
	require.NoError(t, st.View(ctx, func(tx driver.ReadTx) error {
		for _, tc := range []struct {
			f    workspace.TaskFilter
			want int
		}{
			{workspace.TaskFilter{Limit: 5000}, 2000},
			{workspace.TaskFilter{Status: workspace.TaskPending, Limit: 1000}, 1000},
			{workspace.TaskFilter{Status: workspace.TaskBlocked, Limit: 1000}, 0},
			{workspace.TaskFilter{Status: workspace.TaskPending, Assignee: "a1", Limit: 5000}, 1000},
			{workspace.TaskFilter{Assignee: "a0", After: "t01000", Limit: 5000}, 499}, // t01002, t01004, ... t01998
			{workspace.TaskFilter{Status: workspace.TaskPending, ParentID: "nobody", Limit: 5000}, 0},
		} {
			got, err := tx.ListTasks(ctx, tc.f)
			require.NoError(t, err)
			assert.Equal(t, tc.want, len(got), "%+v", tc.f)
		}
		return nil
	}))
}

// TestAPrefixPageWalksTheNameIndexWithoutStatistics checks the list query's
// plan on a table never analyzed: a range of artifacts_live_name from the
// prefix (or cursor) to the prefix's end, no sort of every match.
func TestAPrefixPageWalksTheNameIndexWithoutStatistics(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t)
	require.NoError(t, st.Update(ctx, func(tx driver.Tx) error {
		now := tx.Now()
		for i := range 3000 {
			a := workspace.Artifact{ID: fmt.Sprintf("id%05d", i), Name: fmt.Sprintf("dir%d/a%05d", i%3, i), Kind: "doc",
				Owner: "a", Version: 1, ContentType: "text/plain", SHA256: "x", CreatedAt: now, CreatedBy: "a", UpdatedAt: now, UpdatedBy: "a"}
			if err := tx.PutArtifact(ctx, a, nil); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, st.View(ctx, func(tx driver.ReadTx) error {
		rt := tx.(*readTx)
		_, _ = rt.pl.Exec(ctx, sortsOff)
		rows, err := rt.q.Query(ctx, "EXPLAIN "+listArtifacts, "", "", "", likePrefix("dir1/"), "", labelsJSON(nil), 100, "dir1/", prefixEnd("dir1/"))
		text := planText(t, rows, err)
		_, _ = rt.pl.Exec(ctx, sortsBack)
		assert.Contains(t, text, "artifacts_live_name", text)
		assert.NotContains(t, text, "Sort", text)

		page, err := tx.ListArtifacts(ctx, workspace.ArtifactFilter{NamePrefix: "dir1/", After: "dir1/a00004", Limit: 3})
		require.NoError(t, err)
		var names []string
		for _, a := range page {
			names = append(names, a.Name)
		}
		assert.Equal(t, []string{"dir1/a00007", "dir1/a00010", "dir1/a00013"}, names)
		var sort string
		require.NoError(t, rt.q.QueryRow(ctx, "SELECT current_setting('enable_sort')").Scan(&sort))
		assert.Equal(t, "on", sort, "the list put enable_sort back")
		return nil
	}))
}

func TestPrefixEndIsTheLeastStringAboveThePrefix(t *testing.T) {
	for p, want := range map[string]string{
		"":                     "",
		"dir/":                 "dir0",
		"a":                    "b",
		"é":                    "ê",
		"x\U0010FFFF":          "y",
		"\U0010FFFF\U0010FFFF": "",
		"a\uD7FF":              "a\uE000",
	} {
		assert.Equal(t, want, prefixEnd(p), "prefixEnd(%q)", p)
	}
}

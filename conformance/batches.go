package conformance

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// testBatchAllOrNothing: when op 3 of a batch fails, ops 1 and 2 are not
// written; the error says which op and matches that op's error.
func testBatchAllOrNothing(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	x, err := ws1.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: "x", Content: []byte("x1")})
	require.NoError(t, err)
	_, err = ws1.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: "held"})
	require.NoError(t, err)
	acquire(t, ws1, "artifact:held", "alice", time.Hour)
	_, err = ws1.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: "fenced"})
	require.NoError(t, err)
	old := acquire(t, ws1, "artifact:fenced", "bob", time.Hour)
	require.NoError(t, ws1.Locks().Release(ctx, old))
	require.NoError(t, ws1.Locks().Release(ctx, acquire(t, ws1, "artifact:fenced", "carol", time.Hour))) // a newer token
	task, err := ws1.Tasks().Create(ctx, as("alice"), workspace.NewTask{Title: "t"})
	require.NoError(t, err)
	_, err = ws1.Tasks().Update(ctx, as("alice"), task.ID, workspace.TaskChange{Status: ptr(workspace.TaskCancelled)})
	require.NoError(t, err)
	missing := "01900000-0000-7000-8000-000000000000"

	cases := []struct {
		name    string
		op      workspace.Op
		wantErr error
	}{
		{"stale IfVersion", workspace.UpdateArtifactOp{Ref: workspace.ByName("x"), Change: workspace.ArtifactChange{Content: []byte("no")}, Cond: workspace.Cond{IfVersion: 7}}, workspace.ErrConflict},
		{"missing artifact", workspace.UpdateArtifactOp{Ref: workspace.ByName("nope"), Change: workspace.ArtifactChange{Content: []byte("no")}}, workspace.ErrNotFound},
		{"existing name", workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "x"}}, workspace.ErrAlreadyExists},
		{"locked artifact", workspace.DeleteArtifactOp{Ref: workspace.ByName("held")}, workspace.ErrLocked},
		{"stale fence", workspace.UpdateArtifactOp{Ref: workspace.ByName("fenced"), Change: workspace.ArtifactChange{Content: []byte("no")}, Cond: workspace.Cond{Fence: old.Token}}, workspace.ErrStaleFence},
		{"illegal transition", workspace.UpdateTaskOp{ID: task.ID, Change: workspace.TaskChange{Status: ptr(workspace.TaskPending)}}, workspace.ErrInvalid},
		{"missing task", workspace.UpdateTaskOp{ID: missing, Change: workspace.TaskChange{Title: ptr("t")}}, workspace.ErrNotFound},
		{"missing note", workspace.DeleteNoteOp{Kind: "decision", Key: "nope"}, workspace.ErrNotFound},
		{"note IfVersion", workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: "nope"}, Cond: workspace.Cond{IfVersion: 3}}, workspace.ErrConflict},
		{"release of a lease not held", workspace.ReleaseLockOp{Resource: "artifact:held", Token: 99}, workspace.ErrNotHolder},
		{"invalid op", workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "../escape"}}, workspace.ErrInvalid},
	}
	for i, c := range cases {
		before := snap(t, ws1)
		name, key := fmt.Sprintf("new-%d", i), fmt.Sprintf("k-%d", i)
		_, err := ws2.Commit(ctx, workspace.Batch{Actor: "bob", Ops: []workspace.Op{
			workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: name, Content: []byte("1")}},
			workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: key}},
			c.op,
		}})
		require.ErrorIs(t, err, c.wantErr, c.name)
		var be *workspace.BatchError
		if assert.ErrorAs(t, err, &be, c.name) {
			assert.Equal(t, 2, be.Index, c.name)
		}
		after := snap(t, ws1)
		if c.wantErr == workspace.ErrConflict {
			evs := eventsAfter(t, ws1, before.Head)
			assert.Equal(t, []string{workspace.EventConflict}, types(evs), "%s: only the conflict is logged", c.name)
			after.Head = before.Head
		}
		assert.Equal(t, before, after, "%s: nothing is written", c.name)
		_, err = ws1.Artifacts().Get(ctx, workspace.ByName(name))
		assert.ErrorIs(t, err, workspace.ErrNotFound, "%s: op 1 is not written", c.name)
		_, err = ws1.Notes().Get(ctx, "decision", key)
		assert.ErrorIs(t, err, workspace.ErrNotFound, "%s: op 2 is not written", c.name)
	}
	got, err := ws1.Artifacts().Get(ctx, workspace.ByID(x.ID))
	require.NoError(t, err)
	assert.Equal(t, int64(1), got.Version)
}

// testBatchConsecutiveSeqs: a batch's events get consecutive seqs even when
// batches from two handles commit at the same time.
func testBatchConsecutiveSeqs(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	commit := func(ws *workspace.Workspace, actor string) ([]workspace.BatchResult, error) {
		var out []workspace.BatchResult
		for i := range 10 {
			var ops []workspace.Op
			for j := range 3 {
				ops = append(ops, workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("%s-%d-%d", actor, i, j)}})
			}
			r, err := ws.Commit(ctx, workspace.Batch{Actor: actor, Ops: ops})
			if err != nil {
				return out, err
			}
			out = append(out, r)
		}
		return out, nil
	}
	a := goCall(t, func() ([]workspace.BatchResult, error) { return commit(ws1, "a") })
	b := goCall(t, func() ([]workspace.BatchResult, error) { return commit(ws2, "b") })
	ra, err := recv(t, a)
	require.NoError(t, err)
	rb, err := recv(t, b)
	require.NoError(t, err)

	log := map[int64]workspace.Event{}
	for _, e := range eventsAfter(t, ws1, 0) {
		log[e.Seq] = e
	}
	require.Len(t, log, 60)
	for _, r := range append(ra, rb...) {
		require.Len(t, r.Events, 3)
		require.Len(t, r.Results, 3)
		for i, e := range r.Events {
			assert.Equal(t, r.Events[0].Seq+int64(i), e.Seq, "a batch's seqs are consecutive")
			assert.Equal(t, e, log[e.Seq], "the result's events are the log's")
			assert.Equal(t, r.Results[i].Note.Key, e.Subject.Name)
		}
	}
}

// testBatchReadYourWrites: later ops of a batch see the earlier ones.
func testBatchReadYourWrites(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	before := headOf(t, ws1)
	res, err := ws1.Commit(ctx, workspace.Batch{Actor: "w", Ops: []workspace.Op{
		workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "a", Content: []byte("1")}},
		workspace.UpdateArtifactOp{Ref: workspace.ByName("a"), Change: workspace.ArtifactChange{Content: []byte("2")}, Cond: workspace.Cond{IfVersion: 1}},
		workspace.UpdateArtifactOp{Ref: workspace.ByName("a"), Change: workspace.ArtifactChange{Content: []byte("3")}, Cond: workspace.Cond{IfVersion: 2}},
		workspace.RollbackArtifactOp{Ref: workspace.ByName("a"), To: 2, Cond: workspace.Cond{IfVersion: 3}},
		workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: "k", Body: "1"}},
		workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: "k", Body: "2"}, Cond: workspace.Cond{IfVersion: 1}},
		workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "tmp"}},
		workspace.DeleteArtifactOp{Ref: workspace.ByName("tmp")},
		workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "tmp", Content: []byte("again")}},
	}})
	require.NoError(t, err)
	require.Len(t, res.Results, 9)
	for i, v := range []int64{1, 2, 3, 4} {
		require.NotNil(t, res.Results[i].Artifact)
		assert.Equal(t, v, res.Results[i].Artifact.Version)
	}
	assert.Equal(t, int64(2), res.Results[5].Note.Version)
	assert.NotEqual(t, res.Results[6].Artifact.ID, res.Results[8].Artifact.ID)
	assert.Equal(t, []string{
		workspace.EventArtifactCreated, workspace.EventArtifactUpdated, workspace.EventArtifactUpdated,
		workspace.EventArtifactRolledBack, workspace.EventNotePut, workspace.EventNotePut,
		workspace.EventArtifactCreated, workspace.EventArtifactDeleted, workspace.EventArtifactCreated,
	}, types(res.Events))
	assert.Equal(t, seqRange(before+1, before+9), seqs(res.Events))

	got, err := ws2.Artifacts().Get(ctx, workspace.ByName("a"))
	require.NoError(t, err)
	assert.Equal(t, int64(4), got.Version)
	assert.Equal(t, "2", string(got.Content))
	n, err := ws2.Notes().Get(ctx, "decision", "k")
	require.NoError(t, err)
	assert.Equal(t, "2", n.Body)
	tmp, err := ws2.Artifacts().Get(ctx, workspace.ByName("tmp"))
	require.NoError(t, err)
	assert.Equal(t, "again", string(tmp.Content))
}

// testBatchReleasesLock: "publish the output, mark the task done, release
// the lock" happens as one, and only for the lock's holder.
func testBatchReleasesLock(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	_, err := ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "report"})
	require.NoError(t, err)
	task, err := ws1.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "worker", Lease: time.Minute})
	require.NoError(t, err)
	l := acquire(t, ws1, "artifact:out/report.md", "worker", time.Minute)
	ops := func(token int64) []workspace.Op {
		return []workspace.Op{
			workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "out/report.md", Content: []byte("done"), TaskID: task.ID}},
			workspace.UpdateTaskOp{ID: task.ID, Change: workspace.TaskChange{Status: ptr(workspace.TaskDone), Result: &workspace.TaskResult{Summary: "ok", Artifacts: []string{"out/report.md"}}}},
			workspace.ReleaseLockOp{Resource: "artifact:out/report.md", Token: token},
		}
	}
	before := snap(t, ws1)
	_, err = ws2.Commit(ctx, workspace.Batch{Actor: "worker", Ops: ops(l.Token + 1)})
	require.ErrorIs(t, err, workspace.ErrNotHolder, "a wrong token fails the whole batch")
	assert.Equal(t, before, snap(t, ws1))

	res, err := ws2.Commit(ctx, workspace.Batch{Actor: "worker", Ops: ops(l.Token)})
	require.NoError(t, err)
	assert.Equal(t, []string{workspace.EventArtifactCreated, workspace.EventTaskUpdated, workspace.EventLockReleased}, types(res.Events))
	_, err = ws1.Locks().Get(ctx, "artifact:out/report.md")
	assert.ErrorIs(t, err, workspace.ErrNotFound, "the lock is free")
	got, err := ws1.Tasks().Get(ctx, task.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskDone, got.Status)
	assert.Equal(t, []string{"out/report.md"}, got.Result.Artifacts)
	a, err := ws1.Artifacts().Get(ctx, workspace.ByName("out/report.md"))
	require.NoError(t, err)
	assert.Equal(t, task.ID, a.TaskID)
}

// testBatchesCommittedTogetherKeepTheirOwnOutcomes: batches from many
// writers at once (which a handle may commit in one transaction) each keep
// their own outcome. One refused on its first op, before it writes, and
// one refused on its last op, after its first op wrote, leave nothing but
// their conflict event; the others commit whole.
func testBatchesCommittedTogetherKeepTheirOwnOutcomes(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	handles := []*workspace.Workspace{ws, open(t, dsn), open(t, dsn), open(t, dsn)}
	x, err := ws.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: "x", Content: []byte("x1")})
	require.NoError(t, err)
	stale := workspace.UpdateArtifactOp{Ref: workspace.ByName("x"), Change: workspace.ArtifactChange{Content: []byte("no")},
		Cond: workspace.Cond{IfVersion: x.Version + 1}}
	before := snap(t, ws).Head

	const writers, rounds = 12, 4
	errs := make([][]error, writers)
	results := make([][]workspace.BatchResult, writers)
	var wg sync.WaitGroup
	for w := range writers {
		errs[w] = make([]error, rounds)
		results[w] = make([]workspace.BatchResult, rounds)
		wg.Go(func() {
			for r := range rounds {
				name := fmt.Sprintf("w%d-r%d", w, r)
				ops := []workspace.Op{
					workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: name, Content: []byte(name)}},
					workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: name}},
				}
				switch w % 3 {
				case 1:
					ops = []workspace.Op{stale} // refused before anything is written
				case 2:
					ops = append(ops, stale) // refused after two ops wrote
				}
				results[w][r], errs[w][r] = handles[w%len(handles)].Commit(ctx, workspace.Batch{Actor: "bob", Ops: ops})
			}
		})
	}
	wg.Wait()

	refused := 0
	for w := range writers {
		for r := range rounds {
			name := fmt.Sprintf("w%d-r%d", w, r)
			_, getErr := ws.Artifacts().Get(ctx, workspace.ByName(name))
			_, noteErr := ws.Notes().Get(ctx, "decision", name)
			if w%3 == 0 {
				assert.NoError(t, errs[w][r], name)
				assert.NoError(t, getErr, "%s: committed", name)
				assert.NoError(t, noteErr, "%s: committed", name)
				continue
			}
			refused++
			require.ErrorIs(t, errs[w][r], workspace.ErrConflict, name)
			if w%3 == 2 {
				var be *workspace.BatchError
				if assert.ErrorAs(t, errs[w][r], &be, name) {
					assert.Equal(t, 2, be.Index, "%s: the op that failed", name)
				}
				assert.ErrorIs(t, getErr, workspace.ErrNotFound, "%s: its first op is not written", name)
				assert.ErrorIs(t, noteErr, workspace.ErrNotFound, "%s: its second op is not written", name)
			}
		}
	}
	got, err := ws.Artifacts().Get(ctx, workspace.ByID(x.ID))
	require.NoError(t, err)
	assert.Equal(t, x.Version, got.Version, "x never changed")
	conflicts, created := 0, 0
	log := map[int64]workspace.Event{}
	for _, e := range eventsAfter(t, ws, before) {
		log[e.Seq] = e
		switch e.Type {
		case workspace.EventConflict:
			conflicts++
		case workspace.EventArtifactCreated:
			created++
		}
	}
	assert.Equal(t, refused, conflicts, "one conflict event per refused batch")
	assert.Equal(t, writers/3*rounds, created, "only the committed batches' artifacts")
	// However the batches were grouped (in the order gathered, or joining
	// a transaction under way), each committed one's events are its own,
	// consecutive, and the log's.
	for w := 0; w < writers; w += 3 {
		for r := range rounds {
			evs := results[w][r].Events
			if assert.Len(t, evs, 2, "w%d-r%d", w, r) {
				for i, e := range evs {
					assert.Equal(t, evs[0].Seq+int64(i), e.Seq, "w%d-r%d: a batch's seqs are consecutive", w, r)
					assert.Equal(t, e, log[e.Seq], "w%d-r%d: the result's events are the log's", w, r)
				}
			}
		}
	}
}

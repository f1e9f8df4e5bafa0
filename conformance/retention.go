package conformance

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// retentionCases are the cases of the tamper-evident log and of retention.
var retentionCases = []coreCase{
	{"EventChainVerifiesFromTheFloor", testChainVerifies},
	{"EventChainSurvivesExportAndImport", testChainArchive},
	{"GCRemovesWhatNoRuleKeepsInBatches", testGCEvents},
	{"GCUnderConcurrentWritersAndSubscribers", testGCConcurrent},
	{"GCRemovesOldFinishedTasksNoTaskNames", testGCTasks},
	{"GCKeepsNewestPinnedAndResultVersions", testGCVersions},
	{"GCKeepsVersionsAnOpPinned", testGCPinnedByOp},                       // retention_pinop.go
	{"GCCutsADeletedArtifactsVersionsAsALiveOnes", testGCDeletedVersions}, // retention_deleted.go
	{"ExportAfterCompactionKeepsDeletedArtifactsAndReleasedLeases", testArchiveAfterCompaction},
}

// verify runs workspace.Verify and requires it to read.
func verify(t testing.TB, ws *workspace.Workspace) workspace.VerifyReport {
	t.Helper()
	r, err := ws.Verify(testCtx(t))
	require.NoError(t, err)
	return r
}

// chainOf recomputes the hash of the log's head from the events Read
// returns, by the documented encoding, chained from base.
func chainOf(t testing.TB, ws *workspace.Workspace, base []byte, after int64) string {
	t.Helper()
	h := base
	for _, e := range eventsAfter(t, ws, after) {
		h = driver.ChainHash(h, e)
	}
	return hex.EncodeToString(h)
}

// testChainVerifies: every event a store writes (alone, in a group commit
// of concurrent writers, after compaction) links to the one before by the
// documented encoding, and Verify checks the whole chain and every
// artifact version's content; compaction keeps the chain verifiable from
// the floor, with the head's hash unchanged.
func testChainVerifies(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)

	r := verify(t, ws1)
	assert.True(t, r.OK(), "an empty log verifies: %v", r.Problems)
	assert.Equal(t, hex.EncodeToString(driver.ZeroChainHash), r.HeadHash)

	a, err := ws1.Artifacts().Create(ctx, workspace.Write{Actor: "planner", Message: "ünïcode ✓"}, workspace.NewArtifact{Name: "plans/p.md", Content: []byte("v1")})
	require.NoError(t, err)
	_, err = ws2.Artifacts().Update(ctx, as("coder"), workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err)
	_, err = ws1.Artifacts().Update(ctx, asAt("racer", 1), workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("v3")})
	require.ErrorIs(t, err, workspace.ErrConflict, "a conflict event is chained too")
	_, err = ws2.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "build"})
	require.NoError(t, err)
	// Concurrent writers on both handles: group commits append several
	// events in one transaction.
	var wg sync.WaitGroup
	for w := range 6 {
		ws := []*workspace.Workspace{ws1, ws2}[w%2]
		wg.Go(func() {
			for i := range 8 {
				_, err := ws.Notes().Put(ctx, as(fmt.Sprintf("w%d", w)), workspace.NotePut{Kind: "log", Key: fmt.Sprintf("%d-%d", w, i), Title: "t"})
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()

	head := headOf(t, ws1)
	r = verify(t, ws2)
	require.True(t, r.OK(), "verify: %v", r.Problems)
	assert.Equal(t, int64(1), r.Floor)
	assert.Equal(t, head, r.Head)
	assert.Equal(t, head, r.Events, "every event's link is checked")
	assert.Equal(t, int64(2), r.Versions, "every artifact version's content is checked")
	assert.Equal(t, chainOf(t, ws1, driver.ZeroChainHash, 0), r.HeadHash, "the store chains by the documented encoding")

	floor := head / 2
	require.NoError(t, ws1.Events().Compact(ctx, floor))
	after := verify(t, ws2)
	require.True(t, after.OK(), "verify after compaction: %v", after.Problems)
	assert.Equal(t, floor, after.Floor)
	assert.Equal(t, head-floor+1, after.Events, "from the floor on")
	assert.Equal(t, r.HeadHash, after.HeadHash, "compaction keeps the chain: the head's hash is unchanged")

	writeNotes(t, ws2, "after", 3)
	require.NoError(t, ws1.Events().Compact(ctx, head+1), "compact every event written before")
	r = verify(t, ws1)
	require.True(t, r.OK(), "verify: %v", r.Problems)
	assert.Equal(t, int64(3), r.Events)
	writeNotes(t, ws1, "more", 2)
	r = verify(t, ws2)
	require.True(t, r.OK(), "verify: %v", r.Problems)
	assert.Equal(t, int64(5), r.Events)
}

// testChainArchive: an archive carries each event's hash and the chain's
// base at its floor; importing it gives a store whose chain is the same
// (head hash and all) and verifies.
func testChainArchive(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	writeNotes(t, ws, "a", 9)
	require.NoError(t, ws.Events().Compact(ctx, 4))
	src := verify(t, ws)
	require.True(t, src.OK(), "verify: %v", src.Problems)

	var archive bytes.Buffer
	_, err := ws.Export(ctx, &archive, workspace.ArchiveOptions{})
	require.NoError(t, err)
	assert.Contains(t, archive.String(), `"hash":"`+src.HeadHash+`"`, "the archive carries the chain")

	_, copyWS := fresh(t, h)
	_, err = copyWS.Import(ctx, bytes.NewReader(archive.Bytes()), workspace.ArchiveOptions{})
	require.NoError(t, err)
	dst := verify(t, copyWS)
	require.True(t, dst.OK(), "verify the copy: %v", dst.Problems)
	assert.Equal(t, src.HeadHash, dst.HeadHash)
	assert.Equal(t, src.Floor, dst.Floor)
	writeNotes(t, copyWS, "b", 2)
	r := verify(t, copyWS)
	assert.True(t, r.OK(), "the copy chains on: %v", r.Problems)

	// An archive whose event was edited is refused, and nothing is written.
	var tampered []byte
	for line := range bytes.Lines(archive.Bytes()) {
		if bytes.HasPrefix(line, []byte(`{"type":"event"`)) && bytes.Contains(line, []byte(`a-5"`)) {
			line = bytes.ReplaceAll(line, []byte(`a-5"`), []byte(`a-X"`))
		}
		tampered = append(tampered, line...)
	}
	require.NotEqual(t, archive.Bytes(), tampered, "the archive has an event of note a-5")
	_, empty := fresh(t, h)
	_, err = empty.Import(ctx, bytes.NewReader(tampered), workspace.ArchiveOptions{})
	require.ErrorIs(t, err, workspace.ErrInvalid)
	assert.Contains(t, err.Error(), "hash")
	assert.Equal(t, int64(0), headOf(t, empty), "nothing is written")
}

// testArchiveAfterCompaction: once compaction removed every event about a
// deleted artifact and a released lease, an export still carries both:
// the restored store reads the deleted artifact's versions by ID, and its
// lease's next fencing token is above every token issued before.
func testArchiveAfterCompaction(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	w := workspace.Write{Actor: "a"}
	gone, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "old/gone.md", Content: []byte("one")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Update(ctx, w, workspace.ByName("old/gone.md"), workspace.ArtifactChange{Content: []byte("two")})
	require.NoError(t, err)
	require.NoError(t, ws.Artifacts().Delete(ctx, w, workspace.ByName("old/gone.md")))
	var token int64
	for range 3 {
		l, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:old/gone.md", Owner: "a", TTL: time.Minute})
		require.NoError(t, err)
		token = l.Token
		require.NoError(t, ws.Locks().Release(ctx, l))
	}
	writeNotes(t, ws, "after", 3)
	head := headOf(t, ws)
	require.NoError(t, ws.Events().Compact(ctx, head), "only the newest event stays")

	var archive bytes.Buffer
	stats, err := ws.Export(ctx, &archive, workspace.ArchiveOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), stats.DeletedArtifacts, "the deleted artifact is in the archive")
	assert.Equal(t, int64(1), stats.Leases, "the released lease is in the archive")

	_, copyWS := fresh(t, h)
	_, err = copyWS.Import(ctx, bytes.NewReader(archive.Bytes()), workspace.ArchiveOptions{})
	require.NoError(t, err)
	for v, want := range map[int64]string{1: "one", 2: "two"} {
		a, err := copyWS.Artifacts().Get(ctx, workspace.ArtifactRef{ID: gone.ID, Version: v})
		require.NoError(t, err, "version %d of the deleted artifact", v)
		assert.Equal(t, want, string(a.Content))
	}
	_, err = copyWS.Artifacts().Get(ctx, workspace.ByName("old/gone.md"))
	require.ErrorIs(t, err, workspace.ErrNotFound, "still deleted")
	l, err := copyWS.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:old/gone.md", Owner: "b", TTL: time.Minute})
	require.NoError(t, err)
	assert.Greater(t, l.Token, token, "fencing tokens keep increasing across a restore")
}

// Tamper edits a store behind the library's back, as anyone with access to
// its files or its database could. Each func gets the DSN of a store no
// handle has open.
type Tamper struct {
	// EditMessage changes the message of event seq in place, its hash kept.
	EditMessage func(t testing.TB, dsn string, seq int64)
	// DeleteEvent removes event seq.
	DeleteEvent func(t testing.TB, dsn string, seq int64)
	// EditContent changes the stored bytes of artifact id's content.
	EditContent func(t testing.TB, dsn string, id string)
}

// RunTamper checks that Verify finds each edit tm makes and names the
// first seq it broke (or the artifact), on stores from h.
func RunTamper(t *testing.T, h Harness, tm Tamper) {
	// setup writes an artifact and notes up to seq 10, and closes.
	setup := func(t *testing.T) (string, string) {
		dsn := h.NewDSN(t)
		ws, err := workspace.Open(testCtx(t), dsn, workspace.Options{})
		require.NoError(t, err)
		a, err := ws.Artifacts().Create(testCtx(t), as("planner"), workspace.NewArtifact{Name: "plan.md", Content: []byte("the plan")})
		require.NoError(t, err)
		writeNotes(t, ws, "w", 9)
		r := verify(t, ws)
		require.True(t, r.OK(), "verify before tampering: %v", r.Problems)
		require.NoError(t, ws.Close())
		return dsn, a.ID
	}
	reopen := func(t *testing.T, dsn string) workspace.VerifyReport {
		ws, err := workspace.Open(testCtx(t), dsn, workspace.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = ws.Close() })
		return verify(t, ws)
	}
	t.Run("EditedEventIsNamed", func(t *testing.T) {
		dsn, _ := setup(t)
		tm.EditMessage(t, dsn, 4)
		r := reopen(t, dsn)
		assert.False(t, r.OK())
		assert.Equal(t, int64(4), r.BrokenSeq, "problems: %v", r.Problems)
	})
	t.Run("DeletedEventIsNamed", func(t *testing.T) {
		dsn, _ := setup(t)
		tm.DeleteEvent(t, dsn, 6)
		r := reopen(t, dsn)
		assert.False(t, r.OK())
		assert.Equal(t, int64(6), r.BrokenSeq, "problems: %v", r.Problems)
	})
	t.Run("EditedContentIsNamed", func(t *testing.T) {
		dsn, id := setup(t)
		tm.EditContent(t, dsn, id)
		r := reopen(t, dsn)
		assert.False(t, r.OK())
		assert.Zero(t, r.BrokenSeq, "the log is intact")
		require.Len(t, r.Problems, 1)
		assert.Contains(t, r.Problems[0], id)
	})
}

// testGCEvents: a dry run reports what would go and removes nothing; gc
// removes the events no rule keeps, in batches, records an EventGC event,
// and leaves a chain that verifies; a read below the new floor gets a
// *CompactedError; bad policies are refused.
func testGCEvents(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	writeNotes(t, ws, "a", 30)

	for _, p := range []workspace.GCPolicy{
		{Actor: "gc", KeepEvents: -1},
		{Actor: "gc", KeepEventsFor: -time.Hour},
		{Actor: "", KeepEvents: 1},
		{Actor: "gc", KeepEvents: 1, Batch: -1},
	} {
		_, err := ws.GC(ctx, p)
		require.ErrorIs(t, err, workspace.ErrInvalid, "%+v", p)
	}

	young, err := ws.GC(ctx, workspace.GCPolicy{Actor: "gc", KeepEventsFor: time.Hour})
	require.NoError(t, err)
	assert.Zero(t, young.Events.Count, "every event is younger than an hour")
	assert.Equal(t, int64(30), headOf(t, ws), "nothing removed records nothing")

	dry, err := ws.GC(ctx, workspace.GCPolicy{Actor: "gc", KeepEvents: 10, DryRun: true})
	require.NoError(t, err)
	assert.Equal(t, int64(20), dry.Events.Count)
	assert.Positive(t, dry.Events.Bytes)
	assert.Equal(t, int64(1), dry.Floor)
	assert.Equal(t, int64(21), dry.FloorAfter)
	st, err := ws.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), st.Floor, "a dry run removes nothing")
	assert.Equal(t, int64(30), st.Head)

	r, err := ws.GC(ctx, workspace.GCPolicy{Actor: "gc", KeepEvents: 10, Batch: 7})
	require.NoError(t, err)
	assert.Equal(t, dry.Events, r.Events, "the dry run counted what went")
	assert.Equal(t, int64(21), r.FloorAfter)
	assert.Equal(t, 3, r.Batches, "20 events in batches of 7")
	assert.Equal(t, int64(31), r.Seq)
	evs := eventsAfter(t, ws, 20)
	require.Len(t, evs, 11)
	assert.Equal(t, workspace.EventGC, evs[10].Type)
	assert.Equal(t, "gc", evs[10].Actor)
	assert.Contains(t, evs[10].Message, "removed 20 events")

	_, err = ws.Events().Read(ctx, workspace.EventQuery{AfterSeq: 5})
	var ce *workspace.CompactedError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, int64(21), ce.Floor)
	v := verify(t, ws)
	assert.True(t, v.OK(), "verify after gc: %v", v.Problems)
	assert.Equal(t, int64(11), v.Events)

	again, err := ws.GC(ctx, workspace.GCPolicy{Actor: "gc", KeepEvents: 11})
	require.NoError(t, err)
	assert.Zero(t, again.Events.Count, "gc is idempotent")
	assert.Equal(t, int64(31), headOf(t, ws))
}

// testGCConcurrent: writers on two handles keep committing while gc
// removes old events in small batches; no write is lost, seqs stay
// gap-free from the floor, a subscriber that started above the floor
// sees every event, and the chain verifies.
func testGCConcurrent(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	writeNotes(t, ws1, "old", 40)
	sub, err := ws2.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: 35}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })

	var wg sync.WaitGroup
	for w, ws := range []*workspace.Workspace{ws1, ws2} {
		wg.Go(func() { assert.NoError(t, putNotes(ctx, ws, fmt.Sprintf("new%d", w), 15)) })
	}
	r, err := ws1.GC(ctx, workspace.GCPolicy{Actor: "gc", KeepEvents: 5, Batch: 3})
	require.NoError(t, err)
	wg.Wait()
	assert.GreaterOrEqual(t, r.FloorAfter, int64(36))
	head := headOf(t, ws2)
	assert.Equal(t, int64(40+30+1), head, "every write and the gc event")
	// The subscriber gets every event in order or, if gc removed events it
	// had not read yet, a *CompactedError: never a silent gap.
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	last := int64(35)
	for last < head {
		m, err := sub.Next(sctx)
		if err != nil {
			var ce *workspace.CompactedError
			require.ErrorAs(t, err, &ce, "the subscription ends only on compaction, after seq %d", last)
			assert.Greater(t, ce.Floor, last+1, "it needed an event below the floor")
			break
		}
		if m.Progress {
			continue
		}
		require.Equal(t, last+1, m.Event.Seq, "events arrive in order, with no gap")
		last = m.Event.Seq
	}
	n, err := ws2.Notes().List(ctx, workspace.NoteFilter{Kind: "decision", Limit: 1000})
	require.NoError(t, err)
	assert.Len(t, n.Notes, 70, "gc removes events, never records")
	v := verify(t, ws2)
	assert.True(t, v.OK(), "verify: %v", v.Problems)
}

// testGCTasks: gc removes finished tasks (done, cancelled) older than the
// policy's age, a chain of them at once, but not a failed task (it may be
// retried), an unfinished one, one that a task which stays depends on or
// has as parent, nor a young one; the dry run counts what goes, and the
// gc event says it.
func testGCTasks(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	tasks := ws.Tasks()
	mk := func(name string, nt workspace.NewTask) workspace.Task {
		nt.Title, nt.Labels = name, map[string]string{"t": name}
		tk, err := tasks.Create(ctx, as("planner"), nt)
		require.NoError(t, err)
		return tk
	}
	claim := func(name string) {
		_, err := tasks.Claim(ctx, workspace.ClaimRequest{Actor: "worker", Labels: map[string]string{"t": name}})
		require.NoError(t, err, "claim %s", name)
	}
	done := func(tk workspace.Task) {
		claim(tk.Title)
		_, err := tasks.Complete(ctx, as("worker"), tk.ID, workspace.TaskResult{Summary: "ok"})
		require.NoError(t, err)
	}
	cancelled := workspace.TaskCancelled
	alone := mk("alone", workspace.NewTask{})
	done(alone)
	dep := mk("dep", workspace.NewTask{})
	done(dep)
	waiting := mk("waiting", workspace.NewTask{DependsOn: []string{dep.ID}})
	chainOld := mk("chain-old", workspace.NewTask{})
	_, err := tasks.Update(ctx, as("planner"), chainOld.ID, workspace.TaskChange{Status: &cancelled})
	require.NoError(t, err)
	chainNew := mk("chain-new", workspace.NewTask{DependsOn: []string{chainOld.ID}})
	_, err = tasks.Update(ctx, as("planner"), chainNew.ID, workspace.TaskChange{Status: &cancelled})
	require.NoError(t, err)
	parent := mk("parent", workspace.NewTask{})
	done(parent)
	child := mk("child", workspace.NewTask{ParentID: parent.ID})
	failed := mk("failed", workspace.NewTask{})
	claim("failed")
	_, err = tasks.Fail(ctx, as("worker"), failed.ID, workspace.TaskResult{Summary: "no"})
	require.NoError(t, err)
	running := mk("running", workspace.NewTask{})
	claim("running")

	young, err := ws.GC(ctx, workspace.GCPolicy{Actor: "gc", KeepTasksFor: time.Hour})
	require.NoError(t, err)
	assert.Zero(t, young.Tasks.Count, "every task was updated within the hour")

	_, err = ws.GC(ctx, workspace.GCPolicy{Actor: "gc", KeepTasksFor: -time.Hour})
	require.ErrorIs(t, err, workspace.ErrInvalid)

	// Every finished task is older than a microsecond by now.
	time.Sleep(2 * time.Millisecond)
	dry, err := ws.GC(ctx, workspace.GCPolicy{Actor: "gc", KeepTasksFor: time.Microsecond, DryRun: true})
	require.NoError(t, err)
	assert.Equal(t, int64(3), dry.Tasks.Count, "alone, chain-old and chain-new")
	assert.Positive(t, dry.Tasks.Bytes)
	_, err = tasks.Get(ctx, alone.ID)
	require.NoError(t, err, "a dry run removes nothing")

	r, err := ws.GC(ctx, workspace.GCPolicy{Actor: "gc", KeepTasksFor: time.Microsecond, Batch: 2})
	require.NoError(t, err)
	assert.Equal(t, dry.Tasks, r.Tasks, "the dry run counted what went")
	assert.Zero(t, r.Events.Count, "no event rule: no event goes")
	for _, gone := range []workspace.Task{alone, chainOld, chainNew} {
		_, err := tasks.Get(ctx, gone.ID)
		require.ErrorIs(t, err, workspace.ErrNotFound, "%s", gone.Title)
	}
	for _, kept := range []workspace.Task{dep, waiting, parent, child, failed, running} {
		_, err := tasks.Get(ctx, kept.ID)
		require.NoError(t, err, "%s stays", kept.Title)
	}
	evs := eventsAfter(t, ws, r.Seq-1)
	require.NotEmpty(t, evs)
	assert.Equal(t, workspace.EventGC, evs[0].Type)
	assert.Contains(t, evs[0].Message, "3 tasks")

	// Once the task that waited on dep is done, dep may go with it; the
	// parent stays while its child is unfinished.
	done(waiting)
	time.Sleep(2 * time.Millisecond)
	r, err = ws.GC(ctx, workspace.GCPolicy{Actor: "gc", KeepTasksFor: time.Microsecond})
	require.NoError(t, err)
	assert.Equal(t, int64(2), r.Tasks.Count, "waiting, then dep")
	_, err = tasks.Get(ctx, parent.ID)
	require.NoError(t, err)
	page, err := tasks.List(ctx, workspace.TaskFilter{})
	require.NoError(t, err)
	assert.Len(t, page.Tasks, 4, "parent, child, failed, running")
	v := verify(t, ws)
	assert.True(t, v.OK(), "verify: %v", v.Problems)
}

// testGCVersions: gc keeps each artifact's newest versions, pinned ones
// and the one a task's result named, and removes the rest with the
// content no kept version shares; a read of a removed version, or a
// rollback to it, gets a *VersionRemovedError naming the oldest kept; a
// version unpinned goes at the next gc; the chain and contents verify.
func testGCVersions(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	arts := ws.Artifacts()
	ref := workspace.ByName("docs/plan.md")
	// v1 "one", v2 "two", v3 "three", v4 "six", v5 "five", v6 "six".
	_, err := arts.Create(ctx, as("w"), workspace.NewArtifact{Name: "docs/plan.md", Kind: "plan", Content: []byte("one")})
	require.NoError(t, err)
	update := func(content string) {
		_, err := arts.Update(ctx, as("w"), ref, workspace.ArtifactChange{Content: []byte(content)})
		require.NoError(t, err)
	}
	update("two")
	update("three")
	// A task finished now names the artifact: version 3 is its result.
	tk, err := ws.Tasks().Create(ctx, as("p"), workspace.NewTask{Title: "write", Labels: map[string]string{"t": "write"}})
	require.NoError(t, err)
	_, err = ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "w", Labels: map[string]string{"t": "write"}})
	require.NoError(t, err)
	_, err = ws.Tasks().Complete(ctx, as("w"), tk.ID, workspace.TaskResult{Summary: "done", Artifacts: []string{"docs/plan.md"}})
	require.NoError(t, err)
	time.Sleep(2 * time.Millisecond) // the next version is written after the result
	update("six")
	update("five")
	update("six")
	_, err = ws.Pin(ctx, as("lead"), "docs/plan.md", 2)
	require.NoError(t, err)
	_, err = ws.Pin(ctx, as("lead"), "docs/plan.md", 9)
	require.ErrorIs(t, err, workspace.ErrNotFound, "a version that does not exist cannot be pinned")
	_, err = ws.GC(ctx, workspace.GCPolicy{Actor: "gc", KeepVersions: -1})
	require.ErrorIs(t, err, workspace.ErrInvalid)

	dry, err := ws.GC(ctx, workspace.GCPolicy{Actor: "gc", KeepVersions: 2, DryRun: true})
	require.NoError(t, err)
	assert.Equal(t, workspace.GCKind{Count: 2, Bytes: 3}, dry.Versions, "v1 and v4 go; v4's content is v6's, so only v1's 3 bytes are freed")
	r, err := ws.GC(ctx, workspace.GCPolicy{Actor: "gc", KeepVersions: 2})
	require.NoError(t, err)
	assert.Equal(t, dry.Versions, r.Versions)
	versions := func() []int64 {
		vs, err := arts.Versions(ctx, ref)
		require.NoError(t, err)
		var out []int64
		for _, v := range vs {
			out = append(out, v.Version)
		}
		return out
	}
	assert.Equal(t, []int64{2, 3, 5, 6}, versions())
	for v, want := range map[int64]string{2: "two", 3: "three", 5: "five", 6: "six"} {
		a, err := arts.Get(ctx, workspace.ArtifactRef{Name: "docs/plan.md", Version: v})
		require.NoError(t, err, "version %d", v)
		assert.Equal(t, want, string(a.Content))
	}
	for _, v := range []int64{1, 4} {
		_, err := arts.Get(ctx, workspace.ArtifactRef{Name: "docs/plan.md", Version: v})
		var gone *workspace.VersionRemovedError
		require.ErrorAs(t, err, &gone, "version %d", v)
		assert.Equal(t, int64(2), gone.Oldest)
		assert.ErrorIs(t, err, workspace.ErrNotFound)
	}
	_, err = arts.Rollback(ctx, as("w"), ref, 1)
	var gone *workspace.VersionRemovedError
	require.ErrorAs(t, err, &gone, "a rollback to a removed version")
	rb, err := arts.Rollback(ctx, as("w"), ref, 2)
	require.NoError(t, err)
	assert.Equal(t, int64(7), rb.Version)

	// Unpinned, version 2 goes; version 3 stays while the result names it.
	require.NoError(t, ws.Unpin(ctx, as("lead"), "docs/plan.md", 2))
	r, err = ws.GC(ctx, workspace.GCPolicy{Actor: "gc", KeepVersions: 2})
	require.NoError(t, err)
	assert.Equal(t, int64(2), r.Versions.Count, "v2 and v5")
	assert.Equal(t, int64(4), r.Versions.Bytes, "v2's content is v7's too; only v5's \"five\" is freed")
	assert.Equal(t, []int64{3, 6, 7}, versions())
	evs := eventsAfter(t, ws, r.Seq-1)
	require.NotEmpty(t, evs)
	assert.Contains(t, evs[0].Message, "2 artifact versions")
	v := verify(t, ws)
	assert.True(t, v.OK(), "verify: %v", v.Problems)

	// An archive skips the removed versions, and imports as it was.
	var archive bytes.Buffer
	_, err = ws.Export(ctx, &archive, workspace.ArchiveOptions{})
	require.NoError(t, err)
	_, ws2 := fresh(t, h)
	_, err = ws2.Import(ctx, bytes.NewReader(archive.Bytes()), workspace.ArchiveOptions{})
	require.NoError(t, err)
	vs, err := ws2.Artifacts().Versions(ctx, ref)
	require.NoError(t, err)
	require.Len(t, vs, 3)
	assert.Equal(t, []int64{3, 6, 7}, []int64{vs[0].Version, vs[1].Version, vs[2].Version})
	_, err = ws2.Artifacts().Get(ctx, workspace.ArtifactRef{Name: "docs/plan.md", Version: 5})
	require.ErrorAs(t, err, &gone)
	assert.Equal(t, int64(3), gone.Oldest)
	var again bytes.Buffer
	_, err = ws2.Export(ctx, &again, workspace.ArchiveOptions{})
	require.NoError(t, err)
	assert.Equal(t, archive.String(), again.String(), "the import exports the same archive")
}

package conformance

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// testEventOnePerChange: every kind of change appends exactly one event (a
// lock take-over two) with its type, actor, subject and version, and seqs
// run 1, 2, 3, ... with no gap.
func testEventOnePerChange(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	require.Equal(t, int64(0), headOf(t, ws1), "a fresh store's log is empty")

	var (
		art  workspace.Artifact
		task workspace.Task
		l    workspace.Lease
	)
	type want struct {
		typ, actor, kind, id, name string
		version                    int64
		message                    string
	}
	steps := []struct {
		name string
		ws   *workspace.Workspace
		do   func() error
		want func() want
	}{
		{"artifact create", ws1, func() (err error) {
			art, err = ws1.Artifacts().Create(ctx, workspace.Write{Actor: "planner", Message: "first draft"}, workspace.NewArtifact{Name: "plans/p.md"})
			return err
		}, func() want {
			return want{workspace.EventArtifactCreated, "planner", "artifact", art.ID, "plans/p.md", 1, "first draft"}
		}},
		{"artifact update", ws2, func() error {
			_, err := ws2.Artifacts().Update(ctx, workspace.Write{Actor: "coder", Message: "why"}, workspace.ByID(art.ID), workspace.ArtifactChange{Content: []byte("x")})
			return err
		}, func() want {
			return want{workspace.EventArtifactUpdated, "coder", "artifact", art.ID, "plans/p.md", 2, "why"}
		}},
		{"artifact rollback", ws1, func() error {
			_, err := ws1.Artifacts().Rollback(ctx, workspace.Write{Actor: "lead", Message: "undo"}, workspace.ByID(art.ID), 1)
			return err
		}, func() want {
			return want{workspace.EventArtifactRolledBack, "lead", "artifact", art.ID, "plans/p.md", 3, "undo"}
		}},
		{"artifact conflict", ws2, func() error {
			_, err := ws2.Artifacts().Update(ctx, asAt("racer", 1), workspace.ByID(art.ID), workspace.ArtifactChange{Content: []byte("y")})
			if assert.ErrorIs(t, err, workspace.ErrConflict) {
				return nil
			}
			return err
		}, func() want { return want{workspace.EventConflict, "racer", "artifact", art.ID, "plans/p.md", 3, ""} }},
		{"artifact delete", ws2, func() error { return ws2.Artifacts().Delete(ctx, as("lead"), workspace.ByID(art.ID)) },
			func() want {
				return want{workspace.EventArtifactDeleted, "lead", "artifact", art.ID, "plans/p.md", 3, ""}
			}},
		{"task create", ws1, func() (err error) {
			task, err = ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "build"})
			return err
		}, func() want { return want{workspace.EventTaskCreated, "lead", "task", task.ID, "build", 1, ""} }},
		{"task claim", ws2, func() error {
			_, err := ws2.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "worker"})
			return err
		}, func() want { return want{workspace.EventTaskClaimed, "worker", "task", task.ID, "build", 2, ""} }},
		{"task heartbeat", ws1, func() error {
			_, err := ws1.Tasks().Heartbeat(ctx, as("worker"), task.ID, time.Minute)
			return err
		}, func() want { return want{workspace.EventTaskUpdated, "worker", "task", task.ID, "build", 3, ""} }},
		{"task release", ws1, func() error {
			_, err := ws1.Tasks().Release(ctx, as("worker"), task.ID)
			return err
		}, func() want { return want{workspace.EventTaskReleased, "worker", "task", task.ID, "build", 4, ""} }},
		{"task update", ws2, func() error {
			_, err := ws2.Tasks().Update(ctx, asAt("lead", 4), task.ID, workspace.TaskChange{Title: ptr("build it")})
			return err
		}, func() want { return want{workspace.EventTaskUpdated, "lead", "task", task.ID, "build it", 5, ""} }},
		{"note put", ws1, func() error {
			_, err := ws1.Notes().Put(ctx, as("planner"), workspace.NotePut{Kind: "decision", Key: "db", Title: "SQLite"})
			return err
		}, func() want { return want{workspace.EventNotePut, "planner", "note", "decision/db", "db", 1, ""} }},
		{"note put again", ws2, func() error {
			_, err := ws2.Notes().Put(ctx, as("coder"), workspace.NotePut{Kind: "decision", Key: "db", Title: "Postgres"})
			return err
		}, func() want { return want{workspace.EventNotePut, "coder", "note", "decision/db", "db", 2, ""} }},
		{"note delete", ws1, func() error { return ws1.Notes().Delete(ctx, as("lead"), "decision", "db") },
			func() want { return want{workspace.EventNoteDeleted, "lead", "note", "decision/db", "db", 2, ""} }},
		{"lock acquire", ws1, func() (err error) {
			l, err = ws1.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:a", Owner: "alice", TTL: time.Minute, Message: "editing"})
			return err
		}, func() want {
			return want{workspace.EventLockAcquired, "alice", "lock", "file:a", "file:a", l.Token, "editing"}
		}},
		{"lock renew", ws2, func() (err error) {
			_, err = ws2.Locks().Renew(ctx, l, time.Minute)
			return err
		}, func() want { return want{workspace.EventLockRenewed, "alice", "lock", "file:a", "file:a", l.Token, ""} }},
		{"lock release", ws2, func() error { return ws2.Locks().Release(ctx, l) },
			func() want {
				return want{workspace.EventLockReleased, "alice", "lock", "file:a", "file:a", l.Token, ""}
			}},
		{"lock acquire again", ws2, func() (err error) {
			l, err = ws2.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:a", Owner: "bob", TTL: time.Minute})
			return err
		}, func() want { return want{workspace.EventLockAcquired, "bob", "lock", "file:a", "file:a", l.Token, ""} }},
		{"lock forced", ws1, func() error {
			return ws1.Locks().ForceRelease(ctx, workspace.Write{Actor: "admin", Message: "stuck"}, "file:a")
		}, func() want {
			return want{workspace.EventLockForced, "admin", "lock", "file:a", "file:a", l.Token, "stuck"}
		}},
	}
	var prev time.Time
	for i, s := range steps {
		require.NoError(t, s.do(), s.name)
		seq := int64(i + 1)
		require.Equal(t, seq, headOf(t, s.ws), "%s: one event, seq +1", s.name)
		evs := eventsAfter(t, ws1, seq-1)
		require.Len(t, evs, 1, s.name)
		e, w := evs[0], s.want()
		assert.Equal(t, seq, e.Seq, s.name)
		assert.Equal(t, w.typ, e.Type, s.name)
		assert.Equal(t, w.actor, e.Actor, s.name)
		assert.Equal(t, w.kind, e.Subject.Kind, s.name)
		assert.Equal(t, w.id, e.Subject.ID, s.name)
		assert.Equal(t, w.name, e.Subject.Name, s.name)
		assert.Equal(t, w.version, e.Version, s.name)
		if w.message != "" {
			assert.Equal(t, w.message, e.Message, s.name)
		}
		assert.Equal(t, time.UTC, e.Time.Location(), s.name)
		assert.False(t, e.Time.Before(prev), "%s: event times do not go back", s.name)
		prev = e.Time
	}
	all := eventsAfter(t, ws2, 0)
	for i, e := range all {
		assert.Equal(t, int64(i+1), e.Seq, "seqs are contiguous from 1")
	}
	assert.Len(t, all, len(steps))
}

// seedEvents writes a varied history from two handles and returns it as read back.
func seedEvents(t testing.TB, ws1, ws2 *workspace.Workspace) []workspace.Event {
	t.Helper()
	ctx := testCtx(t)
	for i := range 6 {
		ws, actor := ws1, "alice"
		if i%2 == 1 {
			ws, actor = ws2, "bob"
		}
		name := fmt.Sprintf("doc/%d", i%3)
		if _, err := ws.Artifacts().Create(ctx, as(actor), workspace.NewArtifact{Name: name}); err != nil {
			require.ErrorIs(t, err, workspace.ErrAlreadyExists)
			_, err = ws.Artifacts().Update(ctx, as(actor), workspace.ByName(name), workspace.ArtifactChange{Content: []byte{byte(i)}})
			require.NoError(t, err)
		}
		_, err := ws.Notes().Put(ctx, as(actor), workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("k%d", i%2)})
		require.NoError(t, err)
		if i%3 == 0 {
			_, err = ws.Tasks().Create(ctx, as(actor), workspace.NewTask{Title: fmt.Sprintf("t%d", i)})
			require.NoError(t, err)
		}
		time.Sleep(2 * time.Millisecond) // spread the times for the range filters
	}
	return eventsAfter(t, ws1, 0)
}

// testEventReadFilters: each filter of Read returns exactly the matching
// events, in seq order.
func testEventReadFilters(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	all := seedEvents(t, ws1, ws2)
	n := int64(len(all))
	require.Equal(t, int64(14), n)
	doc0 := all[0].Subject.ID
	mid, late := all[5].Time, all[12].Time

	cases := []struct {
		name  string
		q     workspace.EventQuery
		match func(e workspace.Event) bool
	}{
		{"everything", workspace.EventQuery{}, func(workspace.Event) bool { return true }},
		{"after seq", workspace.EventQuery{AfterSeq: 7}, func(e workspace.Event) bool { return e.Seq > 7 }},
		{"after head", workspace.EventQuery{AfterSeq: n}, func(e workspace.Event) bool { return false }},
		{"one type", workspace.EventQuery{Types: []string{workspace.EventNotePut}}, func(e workspace.Event) bool { return e.Type == workspace.EventNotePut }},
		{"two types", workspace.EventQuery{Types: []string{workspace.EventArtifactCreated, workspace.EventTaskCreated}}, func(e workspace.Event) bool {
			return e.Type == workspace.EventArtifactCreated || e.Type == workspace.EventTaskCreated
		}},
		{"actor", workspace.EventQuery{Actor: "bob"}, func(e workspace.Event) bool { return e.Actor == "bob" }},
		{"subject kind", workspace.EventQuery{SubjectKind: workspace.SubjectTask}, func(e workspace.Event) bool { return e.Subject.Kind == workspace.SubjectTask }},
		{"subject id", workspace.EventQuery{SubjectID: doc0}, func(e workspace.Event) bool { return e.Subject.ID == doc0 }},
		{"subject name", workspace.EventQuery{SubjectName: "k1"}, func(e workspace.Event) bool { return e.Subject.Name == "k1" }},
		{"since", workspace.EventQuery{Since: mid}, func(e workspace.Event) bool { return !e.Time.Before(mid) }},
		{"until", workspace.EventQuery{Until: mid}, func(e workspace.Event) bool { return e.Time.Before(mid) }},
		{"time range", workspace.EventQuery{Since: mid, Until: late}, func(e workspace.Event) bool { return !e.Time.Before(mid) && e.Time.Before(late) }},
		{"actor, type and after", workspace.EventQuery{Actor: "alice", Types: []string{workspace.EventNotePut}, AfterSeq: 3}, func(e workspace.Event) bool {
			return e.Actor == "alice" && e.Type == workspace.EventNotePut && e.Seq > 3
		}},
		{"no match", workspace.EventQuery{Actor: "nobody"}, func(workspace.Event) bool { return false }},
	}
	for _, c := range cases {
		var want []int64
		for _, e := range all {
			if c.match(e) {
				want = append(want, e.Seq)
			}
		}
		page, err := ws2.Events().Read(ctx, c.q)
		require.NoError(t, err, c.name)
		var got []int64
		for _, e := range page.Events {
			got = append(got, e.Seq)
		}
		assert.Equal(t, want, got, c.name)
		assert.Equal(t, n, page.Head, c.name)
	}
}

// testEventReadPaging: following Next visits every matching event once.
func testEventReadPaging(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	all := seedEvents(t, ws1, ws2)
	for _, c := range []struct {
		limit int
		types []string
	}{{1, nil}, {3, nil}, {16, nil}, {2, []string{workspace.EventNotePut}}, {5, []string{workspace.EventTaskCreated}}} {
		var want []int64
		for _, e := range all {
			if len(c.types) == 0 || slices.Contains(c.types, e.Type) {
				want = append(want, e.Seq)
			}
		}
		q := workspace.EventQuery{Limit: c.limit, Types: c.types}
		var got []int64
		for pages := 0; ; pages++ {
			require.Less(t, pages, 100, "Read does not end")
			page, err := ws2.Events().Read(ctx, q)
			require.NoError(t, err)
			require.LessOrEqual(t, len(page.Events), c.limit)
			for _, e := range page.Events {
				got = append(got, e.Seq)
			}
			if len(page.Events) < c.limit {
				assert.Equal(t, page.Head, page.Next, "the last page's Next is the head")
				break
			}
			require.Greater(t, page.Next, q.AfterSeq)
			q.AfterSeq = page.Next
		}
		assert.Equal(t, want, got, "limit %d types %v", c.limit, c.types)
	}
}

// receiveUpTo reads events from sub until it has seen seq upTo, checking that
// seqs arrive in order with no duplicate.
func receiveUpTo(t testing.TB, sub *workspace.Subscription, upTo int64) []workspace.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []workspace.Event
	var last int64
	for last < upTo {
		m, err := sub.Next(ctx)
		require.NoError(t, err, "subscription ended or stalled after seq %d, want %d", last, upTo)
		if m.Progress {
			require.GreaterOrEqual(t, m.Head, last, "progress goes forward")
			continue
		}
		require.Greater(t, m.Event.Seq, last, "events arrive in order, once")
		last = m.Event.Seq
		out = append(out, m.Event)
	}
	return out
}

func seqs(evs []workspace.Event) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func writeNotes(t testing.TB, ws *workspace.Workspace, actor string, n int) {
	t.Helper()
	require.NoError(t, putNotes(testCtx(t), ws, actor, n))
}

// putNotes writes n notes as actor; safe to call from any goroutine.
func putNotes(ctx context.Context, ws *workspace.Workspace, actor string, n int) error {
	for i := range n {
		if _, err := ws.Notes().Put(ctx, as(actor), workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("%s-%d", actor, i)}); err != nil {
			return err
		}
	}
	return nil
}

// testEventSubscribeBacklogThenLive: subscribers from seq 0 and from the
// middle, on different handles, get the backlog and then the live events
// written by other handles, each exactly once, in order.
func testEventSubscribeBacklogThenLive(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2, ws3 := open(t, dsn), open(t, dsn)
	writeNotes(t, ws1, "early", 10)

	fromStart, err := ws1.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = fromStart.Close() })
	fromMid, err := ws2.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: 5}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = fromMid.Close() })
	filtered, err := ws3.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{Actor: "late-b"}, Heartbeat: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = filtered.Close() })

	writers := []<-chan result[struct{}]{
		goCall(t, func() (struct{}, error) { return struct{}{}, putNotes(ctx, ws3, "late-a", 15) }),
		goCall(t, func() (struct{}, error) { return struct{}{}, putNotes(ctx, ws2, "late-b", 15) }),
	}
	got0 := receiveUpTo(t, fromStart, 40)
	got5 := receiveUpTo(t, fromMid, 40)
	for _, w := range writers {
		_, err := recv(t, w)
		require.NoError(t, err)
	}
	assert.Equal(t, seqRange(1, 40), seqs(got0))
	assert.Equal(t, seqRange(6, 40), seqs(got5))

	var wantB []int64
	for _, e := range got0 {
		if e.Actor == "late-b" {
			wantB = append(wantB, e.Seq)
		}
	}
	require.Len(t, wantB, 15)
	gotB := receiveUpTo(t, filtered, wantB[len(wantB)-1])
	assert.Equal(t, wantB, seqs(gotB), "a filtered subscription gets exactly the matching events")
	assert.Equal(t, eventsAfter(t, ws1, 0), got0, "the stream carries the same events as the log")
}

// testEventSubscribeResume: a subscriber that stops and resumes from its last
// seq misses nothing and repeats nothing.
func testEventSubscribeResume(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	writeNotes(t, ws1, "a", 8)
	sub, err := ws2.Events().Subscribe(ctx, workspace.SubscribeRequest{})
	require.NoError(t, err)
	first := receiveUpTo(t, sub, 5)
	require.NoError(t, sub.Close())
	for range sub.C() { // Close closes the channel; buffered messages may remain
	}
	saved := first[len(first)-1].Seq

	writeNotes(t, ws1, "b", 4) // written while nobody listens
	sub2, err := ws2.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: saved}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub2.Close() })
	writeNotes(t, ws1, "c", 3)
	rest := receiveUpTo(t, sub2, 15)
	assert.Equal(t, seqRange(1, 5), seqs(first))
	assert.Equal(t, seqRange(6, 15), seqs(rest))
}

// testEventSubscribeHeartbeat: an idle stream reports the head, so a
// consumer can checkpoint even when nothing matches its filter.
func testEventSubscribeHeartbeat(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	writeNotes(t, ws1, "a", 3)
	sub, err := ws2.Events().Subscribe(ctx, workspace.SubscribeRequest{
		Query:     workspace.EventQuery{Types: []string{workspace.EventTaskCreated}},
		Heartbeat: 20 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	next := func() workspace.Message {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		m, err := sub.Next(ctx)
		require.NoError(t, err)
		return m
	}
	m := next()
	require.True(t, m.Progress, "nothing matches: the first message is a heartbeat")
	assert.Equal(t, int64(3), m.Head)

	writeNotes(t, ws1, "b", 2)
	waitFor(t, "a heartbeat at the new head", func() bool {
		m := next()
		require.True(t, m.Progress, "only heartbeats, no events: %+v", m)
		return m.Head == 5
	})
	_, err = ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "t"})
	require.NoError(t, err)
	for {
		m := next()
		if m.Progress {
			require.LessOrEqual(t, m.Head, int64(5), "no heartbeat may skip past an undelivered match")
			continue
		}
		assert.Equal(t, int64(6), m.Event.Seq)
		assert.Equal(t, workspace.EventTaskCreated, m.Event.Type)
		break
	}
}

// testEventCompact: below the floor, Read and Subscribe give *CompactedError
// with the floor; from the floor on, the log is whole and keeps growing.
func testEventCompact(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	writeNotes(t, ws1, "a", 10)
	require.NoError(t, ws1.Events().Compact(ctx, 6))

	for _, after := range []int64{0, 4} {
		_, err := ws2.Events().Read(ctx, workspace.EventQuery{AfterSeq: after})
		require.ErrorIs(t, err, workspace.ErrCompacted, "read after %d", after)
		var ce *workspace.CompactedError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, int64(6), ce.Floor)
		_, err = ws2.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: after}})
		require.ErrorIs(t, err, workspace.ErrCompacted, "subscribe after %d", after)
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, int64(6), ce.Floor)
	}
	assert.Equal(t, seqRange(6, 10), seqs(eventsAfter(t, ws2, 5)), "from the floor the log is whole")
	st, err := ws2.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(6), st.Floor)
	assert.Equal(t, int64(10), st.Head)

	sub, err := ws2.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: 5}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	writeNotes(t, ws1, "b", 2)
	assert.Equal(t, seqRange(6, 12), seqs(receiveUpTo(t, sub, 12)), "seqs continue after compaction")

	require.NoError(t, ws1.Events().Compact(ctx, 3), "a floor below the current one is a no-op")
	_, err = ws2.Events().Read(ctx, workspace.EventQuery{AfterSeq: 3})
	assert.ErrorIs(t, err, workspace.ErrCompacted)
	assert.ErrorIs(t, ws1.Events().Compact(ctx, 14), workspace.ErrInvalid, "a floor past head+1")
	require.NoError(t, ws1.Events().Compact(ctx, 13), "compacting everything")
	_, err = ws2.Events().Read(ctx, workspace.EventQuery{AfterSeq: 11})
	assert.ErrorIs(t, err, workspace.ErrCompacted)
	page, err := ws2.Events().Read(ctx, workspace.EventQuery{AfterSeq: 12})
	require.NoError(t, err)
	assert.Empty(t, page.Events)
	assert.Equal(t, int64(12), page.Head)
	writeNotes(t, ws1, "c", 1)
	assert.Equal(t, []int64{13}, seqs(eventsAfter(t, ws2, 12)))
}

// testEventSlowSubscriber: a subscriber that reads nothing does not hold up
// writers, and when it reads it gets every event, in order: it fell back to
// the log, it did not drop anything. The same holds for one that asked for
// a buffer of one message (SubscribeRequest.Buffer).
func testEventSlowSubscriber(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	sub, err := ws2.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	// A buffer of one (what a server asks for each of its streams) delays
	// the feed, never drops or reorders.
	narrow, err := ws2.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1, Buffer: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = narrow.Close() })
	const batches, per = 4, 100 // more than a subscription buffers
	for i := range batches {
		var ops []workspace.Op
		for j := range per {
			ops = append(ops, workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("k%d-%d", i, j)}})
		}
		_, err := ws1.Commit(ctx, workspace.Batch{Actor: "writer", Ops: ops})
		require.NoError(t, err, "a writer is not held up by an idle subscriber")
	}
	// The subscriber's handle writes too, so its own fan-out is exercised.
	_, err = ws2.Notes().Put(ctx, as("reader"), workspace.NotePut{Kind: "decision", Key: "last"})
	require.NoError(t, err)
	got := receiveUpTo(t, sub, batches*per+1)
	assert.Equal(t, seqRange(1, batches*per+1), seqs(got))
	got = receiveUpTo(t, narrow, batches*per+1)
	assert.Equal(t, seqRange(1, batches*per+1), seqs(got), "a buffer of one")
}

// testEventSubscribeEnds: a stream ends with its context's error when the
// context ends, and with a *CompactedError when the log is compacted past
// a slow subscriber: events are never skipped silently.
func testEventSubscribeEnds(t *testing.T, h Harness) {
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	writeNotes(t, ws1, "a", 3)

	sctx, cancel := context.WithCancel(testCtx(t))
	sub, err := ws2.Events().Subscribe(sctx, workspace.SubscribeRequest{Heartbeat: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	assert.Equal(t, seqRange(1, 3), seqs(receiveUpTo(t, sub, 3)))
	cancel()
	for range sub.C() {
	}
	assert.ErrorIs(t, sub.Err(), context.Canceled)

	ctx := testCtx(t)
	slow, err := ws2.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = slow.Close() })
	var ops []workspace.Op
	for i := range 300 { // more than a subscription reads ahead
		ops = append(ops, workspace.PutNoteOp{Note: workspace.NotePut{Kind: "glossary", Key: fmt.Sprint(i)}})
	}
	_, err = ws1.Commit(ctx, workspace.Batch{Actor: "w", Ops: ops})
	require.NoError(t, err)
	require.NoError(t, ws1.Events().Compact(ctx, 290))
	writeNotes(t, ws1, "b", 1)

	var last int64
	for {
		m, err := slow.Next(ctx)
		if err != nil {
			require.ErrorIs(t, err, workspace.ErrCompacted, "the stream ends with the compaction, after seq %d", last)
			var ce *workspace.CompactedError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, int64(290), ce.Floor)
			assert.Less(t, last, int64(289), "it ended because it fell below the floor")
			return
		}
		require.Equal(t, last+1, m.Event.Seq, "no event is skipped")
		last = m.Event.Seq
		if last == 304 {
			return // it kept up after all: everything was delivered
		}
	}
}

// testEventVisibleOnlyAfterCommit: a reader on another handle never sees part
// of a batch: the log it reads always ends on a batch boundary, with the
// batch's records in place.
func testEventVisibleOnlyAfterCommit(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	const batches, per = 6, 25
	writer := goCall(t, func() (struct{}, error) {
		for i := range batches {
			var ops []workspace.Op
			for j := range per {
				ops = append(ops, workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("%d-%d", i, j)}})
			}
			if _, err := ws1.Commit(ctx, workspace.Batch{Actor: "w", Ops: ops}); err != nil {
				return struct{}{}, err
			}
		}
		return struct{}{}, nil
	})
	var seen int64
	for reads := 0; seen < batches*per; reads++ {
		page, err := ws2.Events().Read(ctx, workspace.EventQuery{AfterSeq: seen, Limit: 10000})
		require.NoError(t, err)
		require.Zero(t, page.Head%per, "read %d saw head %d: part of a batch", reads, page.Head)
		require.Equal(t, seqRange(seen+1, page.Head), seqs(page.Events), "read %d: the events up to the head", reads)
		if n := len(page.Events); n > 0 {
			_, err := ws2.Notes().Get(ctx, "decision", page.Events[n-1].Subject.Name)
			require.NoError(t, err, "an event is visible only with its change")
		}
		seen = page.Head
		time.Sleep(2 * time.Millisecond)
	}
	_, err := recv(t, writer)
	require.NoError(t, err)
}

// testEventSubscribePastTheHeadIsRewound: a subscription resumed after a
// seq the log never reached (a follower of a log that lost its tail, or
// of another log) ends with ErrRewound, on the handle that wrote and on
// another, rather than wait for a different event under a seq it saw.
func testEventSubscribePastTheHeadIsRewound(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	writeNotes(t, ws1, "a", 3)
	for _, ws := range []*workspace.Workspace{ws1, ws2} {
		sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: 10}, Heartbeat: -1})
		require.NoError(t, err)
		_, err = sub.Next(ctx)
		require.ErrorIs(t, err, workspace.ErrRewound)
		require.NoError(t, sub.Close())
	}
}

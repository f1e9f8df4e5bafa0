package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

// TestCommitterWaitsForTheWritersItJustAnswered: three writers queue behind
// a transaction held for a while (so that a wait of up to half of it is
// allowed); the fourth, answered by that transaction, comes back 50 ms
// later. With a group wait the next transaction waits for it and the four
// share one commit; without one, the three commit without it and it takes
// a commit of its own.
func TestCommitterWaitsForTheWritersItJustAnswered(t *testing.T) {
	for _, tc := range []struct {
		wait    time.Duration
		commits int64
	}{
		{wait: 500 * time.Millisecond, commits: 2},
		{wait: -1, commits: 3},
	} {
		t.Run(fmt.Sprint(tc.wait), func(t *testing.T) {
			ctx := context.Background()
			ss := openStackStore(t, filepath.Join(t.TempDir(), "ws.db"))
			ss.holdNext()
			ws := engine.New(ss, workspace.Options{GroupWait: tc.wait})
			defer ws.Close()

			note := func(who string) error { return putNote(ctx, ws, who) }
			var wg sync.WaitGroup
			wg.Go(func() {
				assert.NoError(t, note("first"))
				time.Sleep(50 * time.Millisecond)
				assert.NoError(t, note("first"))
			})
			<-ss.held
			for i := range 3 {
				wg.Go(func() { assert.NoError(t, note(fmt.Sprint("queued", i))) })
			}
			require.Eventually(t, func() bool { return engine.QueuedWriters(ws) == 3 }, 10*time.Second, time.Millisecond)
			// Held for a second: the wait may last up to 125 ms.
			time.Sleep(time.Second)
			ss.release()
			wg.Wait()
			assert.Equal(t, tc.commits, int64(len(ss.where())))
		})
	}
}

// putNote writes note k/key as actor key: a write of its own for each key.
func putNote(ctx context.Context, ws *workspace.Workspace, key string) error {
	_, err := ws.Notes().Put(ctx, workspace.Write{Actor: key}, workspace.NotePut{Kind: "k", Key: key, Body: "b"})
	return err
}

// stackStore is a real store that records, for each write transaction,
// whether it ran on the writer's own goroutine (runAlone) or on the
// committer's, and whether it was closed while one was running; after
// holdNext, the next transaction waits for release before it starts. A
// hold may be armed for the next transaction while another waits:
// release lets the waiting one go.
type stackStore struct {
	driver.Store
	mu      sync.Mutex
	ran     []string      // "alone" or "committer", one per transaction
	hold    chan struct{} // armed for the next transaction
	held    chan struct{} // closed once that transaction waits on hold
	waiting chan struct{} // the hold a transaction waits on
	inside  atomic.Int32
	// closedInside is set when Close came while a transaction ran.
	closedInside atomic.Bool
}

func (s *stackStore) Update(ctx context.Context, fn func(tx driver.Tx) error) error {
	s.inside.Add(1)
	defer s.inside.Add(-1)
	buf := make([]byte, 64<<10)
	stack := string(buf[:runtime.Stack(buf, false)])
	where := "committer"
	if strings.Contains(stack, "runAlone") {
		where = "alone"
	}
	s.mu.Lock()
	s.ran = append(s.ran, where)
	hold, held := s.hold, s.held
	if hold != nil {
		s.hold, s.waiting = nil, hold
	}
	s.mu.Unlock()
	if hold != nil {
		close(held)
		<-hold
	}
	return s.Store.Update(ctx, fn)
}

func (s *stackStore) Close() error {
	if s.inside.Load() != 0 {
		s.closedInside.Store(true)
	}
	return s.Store.Close()
}

func (s *stackStore) holdNext() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold, s.held = make(chan struct{}), make(chan struct{})
}

// release lets the transaction waiting on a hold go, or disarms the
// hold no transaction has taken yet.
func (s *stackStore) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.waiting
	if h == nil {
		h, s.hold = s.hold, nil
	}
	s.waiting = nil
	close(h)
}

func (s *stackStore) where() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ran)
}

func openStackStore(t *testing.T, path string) *stackStore {
	t.Helper()
	return &stackStore{Store: openStore(t, "sqlite:"+path, nil)}
}

// TestALoneWriterRunsItsOwnTransaction: a writer with no other writer
// about runs its transaction on its own goroutine; writers that come while
// it runs queue for the committer, which runs them in one group, and the
// next writer joins them rather than run alone until a transaction sees
// one writer again.
func TestALoneWriterRunsItsOwnTransaction(t *testing.T) {
	ctx := context.Background()
	ss := openStackStore(t, filepath.Join(t.TempDir(), "ws.db"))
	ws := engine.New(ss, workspace.Options{GroupWait: -1})
	defer ws.Close()
	note := func(who string) error { return putNote(ctx, ws, who) }

	require.NoError(t, note("a"))
	require.NoError(t, note("a"))
	assert.Equal(t, []string{"alone", "alone"}, ss.where())

	ss.holdNext()
	var wg sync.WaitGroup
	wg.Go(func() { assert.NoError(t, note("held")) })
	<-ss.held
	for i := range 3 {
		wg.Go(func() { assert.NoError(t, note(fmt.Sprint("queued", i))) })
	}
	require.Eventually(t, func() bool { return engine.QueuedWriters(ws) == 3 }, 10*time.Second, time.Millisecond)
	ss.release()
	wg.Wait()
	// The held writer ran alone; the three queued behind it shared one
	// transaction on the committer.
	assert.Equal(t, []string{"alone", "alone", "alone", "committer"}, ss.where())

	// That transaction saw three writers: the next goes to the committer,
	// and, alone there, makes the one after run alone again.
	require.NoError(t, note("b"))
	require.NoError(t, note("b"))
	assert.Equal(t, []string{"alone", "alone", "alone", "committer", "committer", "alone"}, ss.where())
}

// TestCloseWaitsForAWriteRunAlone: a handle closed while a writer runs its
// transaction alone closes the store only after that transaction ends,
// and the writer learns what happened to its write.
func TestCloseWaitsForAWriteRunAlone(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ws.db")
	ss := openStackStore(t, path)
	ws := engine.New(ss, workspace.Options{})
	ss.holdNext()
	wrote := make(chan error, 1)
	go func() {
		_, err := ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "k", Key: "x", Body: "b"})
		wrote <- err
	}()
	<-ss.held
	closed := make(chan error, 1)
	go func() { closed <- ws.Close() }()
	// Give a Close that did not wait the time to close the store.
	time.Sleep(100 * time.Millisecond)
	ss.release()
	writeErr := <-wrote
	require.NoError(t, <-closed)
	assert.False(t, ss.closedInside.Load(), "the store was closed under a running transaction")
	assert.Equal(t, []string{"alone"}, ss.where())

	// The writer's answer is the truth: the note is there if and only if
	// the write succeeded.
	ws2, err := workspace.Open(ctx, "sqlite:"+path)
	require.NoError(t, err)
	defer ws2.Close()
	_, err = ws2.Notes().Get(ctx, "k", "x")
	if writeErr == nil {
		assert.NoError(t, err)
	} else {
		assert.ErrorIs(t, err, workspace.ErrNotFound)
	}
}

// TestAGroupRunsWithoutSavepointsUntilAJobMustBeUndone: three writers queue
// behind a held transaction and share the next. A job refused on a
// condition before it writes (a stale IfVersion) needs no savepoint: the
// group commits in one transaction. A batch refused after its first op
// wrote makes the group run again with a savepoint per job: two
// transactions, and nothing of that batch is kept. Each job keeps its own
// outcome either way.
func TestAGroupRunsWithoutSavepointsUntilAJobMustBeUndone(t *testing.T) {
	for _, tc := range []struct {
		name         string
		writesFirst  bool
		transactions int // for the group
	}{
		{"refused before writing", false, 1},
		{"refused after writing", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ss := openStackStore(t, filepath.Join(t.TempDir(), "ws.db"))
			sps := &savepointCountingStore{Store: ss}
			ws := engine.New(sps, workspace.Options{GroupWait: -1})
			defer ws.Close()
			w := workspace.Write{Actor: "a"}
			doc, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "doc", Kind: "plan", Content: []byte("v1")})
			require.NoError(t, err)

			ss.holdNext()
			var wg sync.WaitGroup
			wg.Go(func() { // holds the store: a group of its own
				_, err := ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "k", Key: "held", Body: "b"})
				assert.NoError(t, err)
			})
			<-ss.held
			before := len(ss.where())
			stale := workspace.Cond{IfVersion: doc.Version + 5}
			var refused, fine, other error
			wg.Go(func() {
				ops := []workspace.Op{workspace.UpdateArtifactOp{Ref: workspace.ArtifactRef{Name: "doc"}, Change: workspace.ArtifactChange{Content: []byte("x")}, Cond: stale}}
				if tc.writesFirst {
					ops = append([]workspace.Op{workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "partial", Kind: "plan", Content: []byte("p")}}}, ops...)
				}
				_, refused = ws.Commit(ctx, workspace.Batch{Actor: "a", Ops: ops})
			})
			wg.Go(func() {
				_, fine = ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "k", Key: "fine", Body: "b"})
			})
			wg.Go(func() {
				_, other = ws.Artifacts().Update(ctx, workspace.Write{Actor: "a", IfVersion: doc.Version + 9},
					workspace.ArtifactRef{Name: "doc"}, workspace.ArtifactChange{Content: []byte("y")})
			})
			require.Eventually(t, func() bool { return engine.QueuedWriters(ws) == 3 }, 10*time.Second, time.Millisecond)
			ss.release()
			wg.Wait()

			assert.ErrorIs(t, refused, workspace.ErrConflict)
			assert.NoError(t, fine)
			assert.ErrorIs(t, other, workspace.ErrConflict)
			// After the held transaction (counted in before), the group's.
			assert.Equal(t, tc.transactions, len(ss.where())-before)
			// Savepoints only on the run again: one per job.
			wantSavepoints := int64(0)
			if tc.transactions == 2 {
				wantSavepoints = 3
			}
			assert.Equal(t, wantSavepoints, sps.savepoints.Load())
			_, err = ws.Notes().Get(ctx, "k", "fine")
			assert.NoError(t, err)
			_, err = ws.Artifacts().Get(ctx, workspace.ArtifactRef{Name: "partial"})
			assert.ErrorIs(t, err, workspace.ErrNotFound, "the refused batch left nothing")
			got, err := ws.Artifacts().Get(ctx, workspace.ArtifactRef{Name: "doc"})
			require.NoError(t, err)
			assert.Equal(t, doc.Version, got.Version)
			// Both refusals are in the log, once each.
			page, err := ws.Events().Read(ctx, workspace.EventQuery{Types: []string{workspace.EventConflict}, Limit: 10})
			require.NoError(t, err)
			assert.Len(t, page.Events, 2)
		})
	}
}

// savepointCountingStore counts the savepoints its transactions take.
type savepointCountingStore struct {
	driver.Store
	savepoints atomic.Int64
}

func (s *savepointCountingStore) Update(ctx context.Context, fn func(tx driver.Tx) error) error {
	return s.Store.Update(ctx, func(tx driver.Tx) error {
		sp, ok := tx.(driver.Savepointer)
		if !ok {
			return fn(tx)
		}
		return fn(countingTx{Tx: tx, sp: sp, n: &s.savepoints})
	})
}

type countingTx struct {
	driver.Tx
	sp driver.Savepointer
	n  *atomic.Int64
}

func (c countingTx) Savepoint(ctx context.Context) error {
	c.n.Add(1)
	return c.sp.Savepoint(ctx)
}

func (c countingTx) RollbackSavepoint(ctx context.Context) error { return c.sp.RollbackSavepoint(ctx) }
func (c countingTx) ReleaseSavepoint(ctx context.Context) error  { return c.sp.ReleaseSavepoint(ctx) }

// TestAGroupHoldsAtMost64Jobs: 70 writers queued behind a held
// transaction commit in two groups, 64 and 6, so that a group run again
// with a savepoint per job never opens more subtransactions than a
// Postgres backend caches.
func TestAGroupHoldsAtMost64Jobs(t *testing.T) {
	ctx := context.Background()
	ss := openStackStore(t, filepath.Join(t.TempDir(), "ws.db"))
	ws := engine.New(ss, workspace.Options{GroupWait: -1})
	defer ws.Close()
	put := func(key string) error { return putNote(ctx, ws, key) }
	require.NoError(t, put("warm"))
	ss.holdNext()
	var wg sync.WaitGroup
	wg.Go(func() { assert.NoError(t, put("held")) })
	<-ss.held
	before := len(ss.where())
	const writers = 70
	for i := range writers {
		wg.Go(func() { assert.NoError(t, put(fmt.Sprint("w", i))) })
	}
	require.Eventually(t, func() bool { return engine.QueuedWriters(ws) == writers }, 10*time.Second, time.Millisecond)
	ss.release()
	wg.Wait()
	assert.Equal(t, []string{"committer", "committer"}, ss.where()[before:])
}

// TestCommitStatsCountGroupsAndTheirTime: a transaction held for 100 ms
// with three writers queued behind it, then a writer the committer waits
// for, make groups whose counters add up: one per transaction run, one
// write per writer, the held time in Running and the wait in Gathering.
func TestCommitStatsCountGroupsAndTheirTime(t *testing.T) {
	ctx := context.Background()
	ss := openStackStore(t, filepath.Join(t.TempDir(), "ws.db"))
	ws := engine.New(ss, workspace.Options{GroupWait: 500 * time.Millisecond})
	defer ws.Close()
	s, ok := ws.CommitStats()
	require.True(t, ok)
	assert.Zero(t, s)

	ss.holdNext()
	var wg sync.WaitGroup
	wg.Go(func() {
		assert.NoError(t, putNote(ctx, ws, "first"))
		// Answered with the held transaction, it comes back 50 ms later;
		// the group of the three queued waits for it, up to half the held
		// transaction's time (at least 50 ms).
		time.Sleep(50 * time.Millisecond)
		assert.NoError(t, putNote(ctx, ws, "first"))
	})
	<-ss.held
	for i := range 3 {
		wg.Go(func() { assert.NoError(t, putNote(ctx, ws, fmt.Sprint("queued", i))) })
	}
	require.Eventually(t, func() bool { return engine.QueuedWriters(ws) == 3 }, 10*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	ss.release()
	wg.Wait()

	s, _ = ws.CommitStats()
	assert.Equal(t, int64(len(ss.where())), s.Groups, "one group per transaction")
	assert.Equal(t, int64(5), s.Writes)
	assert.GreaterOrEqual(t, s.Running, 100*time.Millisecond, "the held transaction's time")
	assert.GreaterOrEqual(t, s.Gathering, 12500*time.Microsecond, "the wait for the writer coming back")
}

// TestHandlesOfOneStoreShareItsCommitStats: handles Open gives out for one
// DSN in one process share one committer, and so its counters.
func TestHandlesOfOneStoreShareItsCommitStats(t *testing.T) {
	ctx := context.Background()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	a, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	defer a.Close()
	b, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, putNote(ctx, a, "a"))
	require.NoError(t, putNote(ctx, b, "b"))
	sa, ok := a.CommitStats()
	require.True(t, ok)
	sb, _ := b.CommitStats()
	assert.Equal(t, sa, sb)
	assert.Equal(t, int64(2), sa.Writes)
}

// lateStackStore is a stackStore that takes late jobs
// (driver.LateJoiner), as the SQLite backend does.
type lateStackStore struct{ *stackStore }

func (lateStackStore) JoinsLate() bool { return true }

// TestWritersQueuedWhileAGroupRunsJoinIt: writers that queue while a
// group's transaction runs join it before it commits, on a store that takes
// late jobs, and each keeps its own outcome (one of them conflicts); on a
// store that does not, they wait for a transaction of their own.
func TestWritersQueuedWhileAGroupRunsJoinIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		late bool
		txs  int // after the warm-up and the lone writer
	}{
		{"late", true, 1},
		{"not late", false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ss := openStackStore(t, filepath.Join(t.TempDir(), "ws.db"))
			var st driver.Store = ss
			if tc.late {
				st = lateStackStore{ss}
			}
			ws := engine.New(st, workspace.Options{GroupWait: -1})
			defer ws.Close()
			require.NoError(t, putNote(ctx, ws, "warm")) // shows the store takes savepoints
			// A lone writer's transaction, held, with two writers queued
			// behind it: they make the next group.
			ss.holdNext()
			var wg sync.WaitGroup
			wg.Go(func() { assert.NoError(t, putNote(ctx, ws, "alone")) })
			<-ss.held
			for _, k := range []string{"b", "c"} {
				wg.Go(func() { assert.NoError(t, putNote(ctx, ws, k)) })
			}
			require.Eventually(t, func() bool { return engine.QueuedWriters(ws) == 2 }, 10*time.Second, time.Millisecond)
			ss.holdNext() // the group's
			before := len(ss.where())
			ss.release() // the lone writer's
			<-ss.held
			// The committer holds the group of b and c, its transaction
			// about to begin; three more writers queue, one of them with
			// a condition that fails. They come after the group was
			// gathered, so only late joining puts them in it.
			for _, k := range []string{"d", "e"} {
				wg.Go(func() { assert.NoError(t, putNote(ctx, ws, k)) })
			}
			var conflict error
			wg.Go(func() {
				_, conflict = ws.Notes().Put(ctx, workspace.Write{Actor: "f", IfVersion: 7}, workspace.NotePut{Kind: "k", Key: "b", Body: "f"})
			})
			require.Eventually(t, func() bool { return engine.QueuedWriters(ws) == 3 }, 10*time.Second, time.Millisecond)
			ss.release()
			wg.Wait()
			assert.Equal(t, tc.txs, len(ss.where())-before, "write transactions after the lone writer's")
			var ce *workspace.ConflictError
			require.ErrorAs(t, conflict, &ce)
			for _, k := range []string{"b", "c", "d", "e"} {
				n, err := ws.Notes().Get(ctx, "k", k)
				require.NoError(t, err, k)
				assert.Equal(t, "b", n.Body, k)
			}
			b, err := ws.Notes().Get(ctx, "k", "b")
			require.NoError(t, err)
			assert.Equal(t, int64(1), b.Version, "f's conditional write changed nothing")
			page, err := ws.Events().Read(ctx, workspace.EventQuery{})
			require.NoError(t, err)
			var types []string
			for _, e := range page.Events {
				types = append(types, e.Type)
			}
			assert.Len(t, types, 7, "warm, alone, b, c, d, e and f's conflict: %v", types)
		})
	}
}

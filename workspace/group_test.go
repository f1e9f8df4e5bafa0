package workspace_test

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
)

// TestCommitterWaitsForTheWritersItJustAnswered: three writers queue behind
// a transaction held for a while (so that a wait of up to an eighth of it
// is allowed); the fourth, answered by that transaction, comes back 50 ms
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
			ws := workspace.New(ss, workspace.Options{GroupWait: tc.wait})
			defer ws.Close()

			note := func(who string) error {
				_, err := ws.Notes().Put(ctx, workspace.Write{Actor: who}, workspace.NotePut{Kind: "k", Key: who, Body: "b"})
				return err
			}
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
			require.Eventually(t, func() bool { return workspace.QueuedWriters(ws) == 3 }, 10*time.Second, time.Millisecond)
			// Held for a second: the wait may last up to 125 ms.
			time.Sleep(time.Second)
			ss.release()
			wg.Wait()
			assert.Equal(t, tc.commits, int64(len(ss.where())))
		})
	}
}

// stackStore is a real store that records, for each write transaction,
// whether it ran on the writer's own goroutine (runAlone) or on the
// committer's, and whether it was closed while one was running; after
// holdNext, the next transaction waits for release before it starts.
type stackStore struct {
	workspace.Store
	mu     sync.Mutex
	ran    []string // "alone" or "committer", one per transaction
	hold   chan struct{}
	held   chan struct{} // closed once a transaction waits on hold
	inside atomic.Int32
	// closedInside is set when Close came while a transaction ran.
	closedInside atomic.Bool
}

func (s *stackStore) Update(ctx context.Context, fn func(tx workspace.Tx) error) error {
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
	hold := s.hold
	s.mu.Unlock()
	if hold != nil {
		close(s.held)
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

func (s *stackStore) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.hold)
	s.hold = nil
}

func (s *stackStore) where() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ran)
}

func openStackStore(t *testing.T, path string) *stackStore {
	t.Helper()
	p, err := workspace.ParseDSN("sqlite:" + path)
	require.NoError(t, err)
	st, err := p.Driver.Open(context.Background(), p.Config)
	require.NoError(t, err)
	return &stackStore{Store: st}
}

// TestALoneWriterRunsItsOwnTransaction: a writer with no other writer
// about runs its transaction on its own goroutine; writers that come while
// it runs queue for the committer, which runs them in one group, and the
// next writer joins them rather than run alone until a transaction sees
// one writer again.
func TestALoneWriterRunsItsOwnTransaction(t *testing.T) {
	ctx := context.Background()
	ss := openStackStore(t, filepath.Join(t.TempDir(), "ws.db"))
	ws := workspace.New(ss, workspace.Options{GroupWait: -1})
	defer ws.Close()
	note := func(who string) error {
		_, err := ws.Notes().Put(ctx, workspace.Write{Actor: who}, workspace.NotePut{Kind: "k", Key: who, Body: "b"})
		return err
	}

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
	require.Eventually(t, func() bool { return workspace.QueuedWriters(ws) == 3 }, 10*time.Second, time.Millisecond)
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
	ws := workspace.New(ss, workspace.Options{})
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

package engine_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

// TestConcurrentWritersShareTheirPolicyRead: writers that find the cached
// policy expired together wait for one read of its head instead of each
// reading it, so a store reads the head about once per PolicyRecheck
// however many write at once. Before, sixteen writers on PostgreSQL made
// about sixteen reads per period, each a transaction of its own.
func TestConcurrentWritersShareTheirPolicyRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const recheck = 25 * time.Millisecond
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"), workspace.Options{Private: true, PolicyRecheck: recheck})
	require.NoError(t, err)
	defer ws.Close()
	const writers = 16
	for w := range writers {
		_, err := ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "load", Key: fmt.Sprint(w)})
		require.NoError(t, err)
	}
	before := engine.PolicyReads(ws)
	start := time.Now()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		writes int
	)
	for w := range writers {
		wg.Go(func() {
			for time.Since(start) < 20*recheck {
				_, err := ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "load", Key: fmt.Sprint(w), Body: "x"})
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				writes++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	reads := engine.PolicyReads(ws) - before
	// One read per period, and one more for a period a slow read spans.
	limit := 2*int64(elapsed/recheck) + 2
	t.Logf("%d writes and %d policy reads in %v (limit %d)", writes, reads, elapsed, limit)
	assert.LessOrEqual(t, reads, limit)
	assert.Greater(t, writes, writers, "every writer wrote more than once")
}

// heldViews is a real store whose next read snapshot, once armed, waits
// until its caller's context ends (and fails with the context's error)
// or release closes (and fails with fail).
type heldViews struct {
	driver.Store
	mu      sync.Mutex
	armed   bool
	fail    error
	entered chan struct{}
	release chan struct{}
}

func (s *heldViews) View(ctx context.Context, fn func(tx driver.ReadTx) error) error {
	s.mu.Lock()
	armed := s.armed
	s.armed = false
	s.mu.Unlock()
	if !armed {
		return s.Store.View(ctx, fn)
	}
	close(s.entered)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.release:
		if s.fail == errPanic {
			panic("heldViews: the read panics")
		}
		return s.fail
	}
}

// holdViews opens a SQLite store whose next read snapshot is held (see
// heldViews) and fails with fail when released.
func holdViews(t *testing.T, fail error) *heldViews {
	t.Helper()
	st := openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"), nil)
	return &heldViews{Store: st, armed: true, fail: fail, entered: make(chan struct{}), release: make(chan struct{})}
}

// errPanic makes heldViews panic instead of failing.
var errPanic = errors.New("panic")

// TestAPolicyReadsFailureIsSharedOnlyWhenItIsTheStores: an operation
// waiting for another's read of the policy gets that read's failure when
// the store failed it (its own read would have met the same outage), and
// reads for itself when the read failed only because its caller gave up.
func TestAPolicyReadsFailureIsSharedOnlyWhenItIsTheStores(t *testing.T) {
	outage := fmt.Errorf("store: %w", workspace.ErrUnavailable)
	for _, tc := range []struct {
		name      string
		fail      error
		waiterErr error // nil: the waiter's write succeeds
		reads     int64
	}{
		{name: "the reader gave up", fail: nil, waiterErr: nil, reads: 2},
		{name: "the store failed", fail: outage, waiterErr: workspace.ErrUnavailable, reads: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := holdViews(t, tc.fail)
			ws := engine.New(hs, workspace.Options{PolicyRecheck: time.Hour})
			defer ws.Close()
			put := func(ctx context.Context, who string) error {
				_, err := ws.Notes().Put(ctx, workspace.Write{Actor: who}, workspace.NotePut{Kind: "k", Key: who})
				return err
			}
			readerCtx, giveUp := context.WithCancel(context.Background())
			readerErr := make(chan error, 1)
			go func() { readerErr <- put(readerCtx, "reader") }()
			<-hs.entered
			waiterErr := make(chan error, 1)
			go func() { waiterErr <- put(context.Background(), "waiter") }()
			require.Eventually(t, func() bool { return engine.PolicyJoins(ws) == 1 }, 10*time.Second, time.Millisecond)
			if tc.fail == nil {
				giveUp()
			} else {
				close(hs.release)
			}
			defer giveUp()
			rerr := <-readerErr
			require.Error(t, rerr)
			if tc.fail == nil {
				assert.ErrorIs(t, rerr, context.Canceled)
			} else {
				assert.ErrorIs(t, rerr, workspace.ErrUnavailable)
			}
			werr := <-waiterErr
			if tc.waiterErr == nil {
				assert.NoError(t, werr)
			} else {
				assert.True(t, errors.Is(werr, tc.waiterErr), "the waiter got %v", werr)
			}
			assert.Equal(t, tc.reads, engine.PolicyReads(ws), "reads of the policy's head")
		})
	}
}

// TestAPolicyReadThatPanicsRefusesItsWaiters: an operation waiting for a
// read of the policy that panicked is refused, neither let through
// unchecked nor left waiting.
func TestAPolicyReadThatPanicsRefusesItsWaiters(t *testing.T) {
	hs := holdViews(t, errPanic)
	ws := engine.New(hs, workspace.Options{PolicyRecheck: time.Hour})
	defer ws.Close()
	put := func(who string) error {
		_, err := ws.Notes().Put(context.Background(), workspace.Write{Actor: who}, workspace.NotePut{Kind: "k", Key: who})
		return err
	}
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_ = put("reader")
	}()
	<-hs.entered
	waiterErr := make(chan error, 1)
	go func() { waiterErr <- put("waiter") }()
	require.Eventually(t, func() bool { return engine.PolicyJoins(ws) == 1 }, 10*time.Second, time.Millisecond)
	close(hs.release)
	assert.NotNil(t, <-panicked, "the reader's panic reaches its caller")
	select {
	case err := <-waiterErr:
		assert.ErrorContains(t, err, "was aborted")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter is still waiting")
	}
	n, err := ws.Notes().Get(context.Background(), "k", "waiter")
	assert.ErrorIs(t, err, workspace.ErrNotFound, "nothing was written for the waiter: %+v", n)
}

// TestAReadCutShortByCloseSaysClosed: an operation whose read fails
// because its handle closed meanwhile (the store closed under it) is
// refused with ErrClosed, not with the store's error: a write's read of
// the policy, and a read of a record.
func TestAReadCutShortByCloseSaysClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(ws *workspace.Workspace) error
	}{
		{"a write's read of the policy", func(ws *workspace.Workspace) error {
			_, err := ws.Notes().Put(context.Background(), workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "k", Key: "a"})
			return err
		}},
		{"a read", func(ws *workspace.Workspace) error {
			_, err := ws.Notes().Get(context.Background(), "k", "a")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := holdViews(t, errors.New("closed pool"))
			ws := engine.New(hs, workspace.Options{PolicyRecheck: time.Hour})
			got := make(chan error, 1)
			go func() { got <- tc.op(ws) }()
			<-hs.entered
			require.NoError(t, ws.Close())
			close(hs.release)
			assert.ErrorIs(t, <-got, workspace.ErrClosed)
		})
	}
}

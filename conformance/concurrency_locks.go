package conformance

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// testLockHandOvers: lockers over several handles take turns on the
// lease guarding one artifact (waiting for each other's release), and
// each does an unconditional read-modify-write of it under its fence.
// At most one holds the lease at any time: an in-test detector (atomics,
// no mutex) sees no overlap, the log shows acquire/release pairs with
// tokens 1, 2, 3, ... and every write inside its writer's pair, and no
// increment is lost.
func testLockHandOvers(t *testing.T, h Harness) {
	const (
		lockers = 6
		rounds  = 5
		name    = "shared/counter.txt"
	)
	resource := "artifact:" + name
	ctx := caseCtx(t, 90*time.Second)
	dsn := h.NewDSN(t)
	hs := handles(t, dsn, 3)
	a, err := hs[0].Artifacts().Create(ctx, workspace.Write{Actor: "setup"},
		workspace.NewArtifact{Name: name, Content: []byte("0")})
	require.NoError(t, err)
	head0, err := hs[0].Events().Head(ctx)
	require.NoError(t, err)

	var (
		holder   atomic.Int64 // the token of whoever believes it holds the lease
		inside   atomic.Int64 // how many believe they hold it
		overlaps atomic.Int64
	)
	tokens := make([][]int64, lockers)
	errs := make([]error, lockers)
	var wg sync.WaitGroup
	for l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := hs[l%len(hs)]
			actor := fmt.Sprintf("locker-%d", l)
			for range rounds {
				lease, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{
					Resource: resource, Owner: actor, TTL: time.Minute, Wait: true,
				})
				if err != nil {
					errs[l] = fmt.Errorf("acquire: %w", err)
					return
				}
				tokens[l] = append(tokens[l], lease.Token)
				if !holder.CompareAndSwap(0, lease.Token) || inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				err = fencedIncrement(ctx, ws, actor, name, lease.Token)
				inside.Add(-1)
				if !holder.CompareAndSwap(lease.Token, 0) {
					overlaps.Add(1)
				}
				if err != nil {
					errs[l] = err
					return
				}
				if err := ws.Locks().Release(ctx, lease); err != nil {
					errs[l] = fmt.Errorf("release token %d: %w", lease.Token, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for l, err := range errs {
		require.NoError(t, err, "locker %d", l)
	}
	assert.Zero(t, overlaps.Load(), "two lockers held the lease at once")

	var all []int64
	holderOf := map[int64]string{}
	for l, ts := range tokens {
		assert.True(t, slices.IsSorted(ts), "locker %d got tokens out of order: %v", l, ts)
		for _, tok := range ts {
			holderOf[tok] = fmt.Sprintf("locker-%d", l)
		}
		all = append(all, ts...)
	}
	slices.Sort(all)
	want := make([]int64, lockers*rounds)
	for i := range want {
		want[i] = int64(i + 1)
	}
	assert.Equal(t, want, all, "each hand-over issues the next token, once")

	got, err := hs[1].Artifacts().Get(ctx, workspace.ByName(name))
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(lockers*rounds), string(got.Content), "no increment lost under the lease")
	assert.Equal(t, int64(1+lockers*rounds), got.Version)

	// The log: acquired(t) released(t) acquired(t+1) ..., and each write
	// of the artifact between its own writer's acquire and release.
	var (
		held    int64 // token currently held per the log, 0 if free
		lastTok int64
		writes  int
	)
	for _, ev := range readAll(t, hs[2], workspace.EventQuery{AfterSeq: head0}) {
		switch {
		case ev.Type == workspace.EventLockAcquired && ev.Subject.ID == resource:
			assert.Zero(t, held, "seq %d: token %d acquired while token %d was held", ev.Seq, ev.Version, held)
			assert.Equal(t, lastTok+1, ev.Version, "seq %d: tokens increase by one per hand-over", ev.Seq)
			assert.Equal(t, holderOf[ev.Version], ev.Actor, "seq %d: acquirer of token %d", ev.Seq, ev.Version)
			held, lastTok = ev.Version, ev.Version
		case ev.Type == workspace.EventLockWaited && ev.Subject.ID == resource:
			// The wait that ends in the acquire recorded next.
			assert.Zero(t, held, "seq %d: a wait for token %d ended while token %d was held", ev.Seq, ev.Version, held)
			assert.Equal(t, lastTok+1, ev.Version, "seq %d: a wait ends with the next token", ev.Seq)
			assert.Equal(t, holderOf[ev.Version], ev.Actor, "seq %d: waiter for token %d", ev.Seq, ev.Version)
			d, err := time.ParseDuration(ev.Message)
			assert.NoError(t, err, "seq %d: lock.waited's message %q", ev.Seq, ev.Message)
			assert.Positive(t, d, "seq %d: a wait lasts", ev.Seq)
		case ev.Type == workspace.EventLockReleased && ev.Subject.ID == resource:
			assert.Equal(t, held, ev.Version, "seq %d: released token %d, held %d", ev.Seq, ev.Version, held)
			held = 0
		case ev.Type == workspace.EventArtifactUpdated && ev.Subject.ID == a.ID:
			writes++
			assert.NotZero(t, held, "seq %d: write outside any lease", ev.Seq)
			assert.Equal(t, holderOf[held], ev.Actor, "seq %d: write by a non-holder", ev.Seq)
		case ev.Subject.ID == resource:
			t.Errorf("seq %d: unexpected lock event %s", ev.Seq, ev.Type)
		}
	}
	assert.Zero(t, held, "the last lease was released")
	assert.Equal(t, int64(lockers*rounds), lastTok)
	assert.Equal(t, lockers*rounds, writes)
}

// fencedIncrement adds 1 to the counter in artifact name with an
// unconditional read-modify-write carrying the lease's fence: only mutual
// exclusion keeps it from losing updates.
func fencedIncrement(ctx context.Context, ws *workspace.Workspace, actor, name string, token int64) error {
	cur, err := ws.Artifacts().Get(ctx, workspace.ByName(name))
	if err != nil {
		return fmt.Errorf("get under token %d: %w", token, err)
	}
	n, err := strconv.Atoi(string(cur.Content))
	if err != nil {
		return fmt.Errorf("counter content %q: %w", cur.Content, err)
	}
	_, err = ws.Artifacts().Update(ctx, workspace.Write{Actor: actor, Fence: token}, workspace.ByName(name),
		workspace.ArtifactChange{Content: []byte(strconv.Itoa(n + 1))})
	if err != nil {
		return fmt.Errorf("write under token %d: %w", token, err)
	}
	return nil
}

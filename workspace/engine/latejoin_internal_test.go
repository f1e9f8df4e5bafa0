package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// queue hands jobs to h's committer the way submit does: counted as
// queued, then sent, each send blocking until the committer takes it (so
// the tests take them with Eventually).
func queue(h *core, jobs ...*job) {
	for _, j := range jobs {
		h.writers.queued.Add(1)
		go func() { h.jobs <- j }()
	}
}

func newJob(ctx context.Context, key string) *job {
	return &job{ctx: ctx, idemKey: key, done: make(chan struct{})}
}

// takeAll runs lateJoin until it has taken want jobs or carried one.
func takeAll(t *testing.T, h *core, g *gathering, waiting *atomic.Int64, want int) []*job {
	t.Helper()
	var got []*job
	require.Eventually(t, func() bool {
		got = append(got, h.lateJoin(g, waiting)...)
		return len(got) >= want || g.carry != nil
	}, testWait, time.Millisecond)
	return got
}

const testWait = 10 * time.Second

// TestLateJobsJoinWhileACallerWaits: a job queued while a group runs joins
// it, and counts among the callers the transaction waits for.
func TestLateJobsJoinWhileACallerWaits(t *testing.T) {
	h := &core{jobs: make(chan *job)}
	g := &gathering{keys: map[string]bool{}, jobs: []*job{newJob(context.Background(), "")}}
	var waiting atomic.Int64
	waiting.Store(1)
	a, b := newJob(context.Background(), ""), newJob(context.Background(), "")
	queue(h, a, b)
	got := takeAll(t, h, g, &waiting, 2)
	assert.ElementsMatch(t, []*job{a, b}, got)
	assert.Len(t, g.jobs, 3)
	assert.Equal(t, int64(3), waiting.Load())
	assert.Zero(t, h.writers.queued.Load())
}

// TestALateJobIsCarriedOnceEveryCallerHasGivenUp: when every caller in the
// group has given up, its transaction is being cancelled; a job taken then
// does not join it (it would fail with their cancellation) but starts the
// next group.
func TestALateJobIsCarriedOnceEveryCallerHasGivenUp(t *testing.T) {
	h := &core{jobs: make(chan *job)}
	first := newJob(context.Background(), "")
	g := &gathering{keys: map[string]bool{}, jobs: []*job{first}}
	var waiting atomic.Int64 // 0: the caller of first has given up
	late := newJob(context.Background(), "")
	queue(h, late)
	got := takeAll(t, h, g, &waiting, 1)
	assert.Empty(t, got)
	assert.Same(t, late, g.carry)
	assert.Equal(t, []*job{first}, g.jobs)
	assert.Zero(t, waiting.Load())
}

// TestALateJobWithAKeyInTheGroupIsCarried: two jobs with one idempotency
// key never share a transaction, late or not.
func TestALateJobWithAKeyInTheGroupIsCarried(t *testing.T) {
	h := &core{jobs: make(chan *job)}
	g := &gathering{keys: map[string]bool{}}
	g.add(newJob(context.Background(), "k"))
	var waiting atomic.Int64
	waiting.Store(1)
	again := newJob(context.Background(), "k")
	queue(h, again)
	got := takeAll(t, h, g, &waiting, 1)
	assert.Empty(t, got)
	assert.Same(t, again, g.carry)
	assert.Len(t, g.jobs, 1)
	assert.Equal(t, int64(1), waiting.Load())
}

// TestALateJobWhoseCallerHasGivenUpIsAnsweredNotRun.
func TestALateJobWhoseCallerHasGivenUpIsAnsweredNotRun(t *testing.T) {
	h := &core{jobs: make(chan *job)}
	g := &gathering{keys: map[string]bool{}, jobs: []*job{newJob(context.Background(), "")}}
	var waiting atomic.Int64
	waiting.Store(1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gone := newJob(ctx, "")
	queue(h, gone)
	require.Eventually(t, func() bool {
		assert.Empty(t, h.lateJoin(g, &waiting))
		return len(g.jobs) == 2
	}, testWait, time.Millisecond)
	<-gone.done
	assert.ErrorIs(t, gone.err, context.Canceled)
	assert.Equal(t, int64(1), waiting.Load())
}

// TestLateJobsKeepTheGroupWithinMaxGroup.
func TestLateJobsKeepTheGroupWithinMaxGroup(t *testing.T) {
	h := &core{jobs: make(chan *job)}
	g := &gathering{keys: map[string]bool{}}
	for range maxGroup - 2 {
		g.add(newJob(context.Background(), ""))
	}
	var waiting atomic.Int64
	waiting.Store(maxGroup - 2)
	var more []*job
	for i := range 5 {
		more = append(more, newJob(context.Background(), fmt.Sprint(i)))
	}
	queue(h, more...)
	got := takeAll(t, h, g, &waiting, 2)
	assert.Len(t, got, 2)
	assert.Len(t, g.jobs, maxGroup)
	assert.Empty(t, h.lateJoin(g, &waiting), "a full group takes no more")
	// The three left stay queued for the next group.
	for range 3 {
		<-h.jobs
	}
}

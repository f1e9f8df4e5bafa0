package engine

import (
	"context"
	"sync"
	"time"
)

// flight is one read of a core's cached state in flight (the policy's
// head, the pauses) that other callers wait for instead of reading too:
// so the callers that find a cache expired together, all of them under
// load, cost one read. Each cache decides whom a flight may answer
// (policyCache.join, pauseCache's gen); the waiting, the answer, its
// failure and forgetting the flight once it has answered are here.
type flight[T any] struct {
	start time.Time // when it began (its snapshot is at or after this)
	done  chan struct{}
	// set before done closes
	val T
	err error
	// gaveUp is set when the reader's own context had ended, or its
	// handle had closed, by the time the read failed.
	gaveUp bool
}

func newFlight[T any](start time.Time) *flight[T] {
	return &flight[T]{start: start, done: make(chan struct{})}
}

// wait returns f's answer, or the store's failure (an outage, which a
// read of the caller's own would have met too, after retrying as long).
// again is set when the read failed only because its reader gave up (its
// context ended, its handle closed), which says nothing of the store: the
// caller, still waiting, reads for itself.
func (f *flight[T]) wait(ctx context.Context, what string) (v T, err error, again bool) {
	select {
	case <-f.done:
		if f.err != nil && f.gaveUp && ctx.Err() == nil {
			return v, nil, true
		}
		return f.val, f.err, false
	case <-ctx.Done():
		return v, wrapErr(what, ctx.Err()), false
	}
}

// fly runs read as f's reader and answers f's waiters with its result,
// first forgetting f as the cache's flight (*slot, guarded by mu) so no
// later caller joins a read that has answered. The answer's gaveUp says
// whether h's caller had given up (its context ended, its handle closed)
// when read returned. A read that panics answers its waiters with
// aborted, so they neither go on unchecked nor wait for an answer that
// will not come.
func (f *flight[T]) fly(ctx context.Context, h *handle, mu *sync.Mutex, slot **flight[T], read func() (T, error), aborted error) (T, error) {
	answer := func(v T, err error, gaveUp bool) {
		mu.Lock()
		if *slot == f {
			*slot = nil
		}
		mu.Unlock()
		f.val, f.err, f.gaveUp = v, err, gaveUp
		close(f.done)
	}
	finished := false
	defer func() {
		if !finished {
			var zero T
			answer(zero, aborted, false)
		}
	}()
	v, err := read()
	finished = true
	answer(v, err, ctx.Err() != nil || h.closed.Load())
	return v, err
}

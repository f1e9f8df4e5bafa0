package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// testGivingUpLeavesOthersIntact: writers on a few handles put notes at
// once, so that a handle commits several of them in one transaction, and
// every other writer gives up (its context ends) a moment after it calls.
// A batch keeps its own result and its own error (DESIGN.md, Batches):
// every writer that did not give up succeeds, whatever its group's other
// callers did; one that gave up is acknowledged (and then stored) or
// refused with its own context's error. (A refused one may still have
// been stored: through a server, the caller stops waiting, not the write.)
func testGivingUpLeavesOthersIntact(t *testing.T, h Harness) {
	const (
		rounds  = 8
		writers = 16
	)
	ctx := testCtx(t)
	dsn := h.NewDSN(t)
	hs := handles(t, dsn, 2)
	type outcome struct {
		key     string
		gaveUp  bool
		err     error
		written bool
	}
	var all []outcome
	for r := range rounds {
		outs := make([]outcome, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := outcome{key: fmt.Sprintf("r%d-w%d", r, i), gaveUp: i%2 == 1}
				wctx := ctx
				if o.gaveUp {
					var cancel context.CancelFunc
					// Gives up from at once to a few milliseconds in: before
					// its turn, while its group runs, or after.
					wctx, cancel = context.WithTimeout(ctx, time.Duration(i*r%7)*500*time.Microsecond)
					defer cancel()
				}
				<-start
				_, o.err = hs[i%len(hs)].Notes().Put(wctx, as("writer"), workspace.NotePut{Kind: "decision", Key: o.key, Body: o.key})
				outs[i] = o
			}()
		}
		close(start)
		wg.Wait()
		all = append(all, outs...)
	}
	for i, o := range all {
		_, err := hs[0].Notes().Get(ctx, "decision", o.key)
		if err == nil {
			all[i].written = true
		} else {
			require.ErrorIs(t, err, workspace.ErrNotFound, o.key)
		}
	}
	acked, gaveUp := 0, 0
	for _, o := range all {
		switch {
		case !o.gaveUp:
			assert.NoError(t, o.err, "%s: a writer that did not give up succeeds", o.key)
			assert.True(t, o.written, "%s: acknowledged, so stored", o.key)
		case o.err == nil:
			acked++
			assert.True(t, o.written, "%s: acknowledged, so stored", o.key)
		default:
			gaveUp++
			assert.True(t, errors.Is(o.err, context.DeadlineExceeded) || errors.Is(o.err, context.Canceled),
				"%s: refused only with its own context's error, got %v", o.key, o.err)
		}
	}
	t.Logf("of %d writers that gave up, %d were acknowledged and %d refused", acked+gaveUp, acked, gaveUp)
}

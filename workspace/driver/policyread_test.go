package driver_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
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
	before := driver.PolicyReads(ws)
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
	reads := driver.PolicyReads(ws) - before
	// One read per period, and one more for a period a slow read spans.
	limit := 2*int64(elapsed/recheck) + 2
	t.Logf("%d writes and %d policy reads in %v (limit %d)", writes, reads, elapsed, limit)
	assert.LessOrEqual(t, reads, limit)
	assert.Greater(t, writes, writers, "every writer wrote more than once")
}

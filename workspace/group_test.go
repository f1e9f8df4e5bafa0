package workspace_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

// heldStore is a real store whose first write transaction waits for held
// to close before it starts, and which counts its write transactions.
type heldStore struct {
	workspace.Store
	held    chan struct{}
	holding chan struct{} // closed once the first transaction waits
	once    sync.Once
	commits atomic.Int64
}

func (s *heldStore) Update(ctx context.Context, fn func(tx workspace.Tx) error) error {
	s.commits.Add(1)
	s.once.Do(func() {
		close(s.holding)
		<-s.held
	})
	return s.Store.Update(ctx, fn)
}

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
			p, err := workspace.ParseDSN("sqlite:" + filepath.Join(t.TempDir(), "ws.db"))
			require.NoError(t, err)
			st, err := p.Driver.Open(ctx, p.Config)
			require.NoError(t, err)
			hs := &heldStore{Store: st, held: make(chan struct{}), holding: make(chan struct{})}
			ws := workspace.New(hs, workspace.Options{GroupWait: tc.wait})
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
			<-hs.holding
			for i := range 3 {
				wg.Go(func() { assert.NoError(t, note(fmt.Sprint("queued", i))) })
			}
			require.Eventually(t, func() bool { return workspace.QueuedWriters(ws) == 3 }, 10*time.Second, time.Millisecond)
			// Held for a second: the wait may last up to 125 ms.
			time.Sleep(time.Second)
			close(hs.held)
			wg.Wait()
			assert.Equal(t, tc.commits, hs.commits.Load())
		})
	}
}

package engine_test

import (
	"context"
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

// pausedViews is a real store whose next read snapshot, once armed, waits
// for release before it reads.
type pausedViews struct {
	driver.Store
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (s *pausedViews) View(ctx context.Context, fn func(tx driver.ReadTx) error) error {
	s.mu.Lock()
	armed := s.armed
	s.armed = false
	s.mu.Unlock()
	if armed {
		close(s.entered)
		<-s.release
	}
	return s.Store.View(ctx, fn)
}

func (s *pausedViews) arm() {
	s.mu.Lock()
	s.armed = true
	s.mu.Unlock()
}

// TestConcurrentWritersShareTheirPauseRead: a write that finds the cached
// pauses expired while another's read of them is under way, begun since
// the last pause or resume, waits for that read instead of reading them
// too, so writers that find the copy expired together cost one read.
// Before, sixteen writers on PostgreSQL made a read each, a transaction
// of its own, about once per write group.
func TestConcurrentWritersShareTheirPauseRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := &pausedViews{Store: openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"), nil),
		entered: make(chan struct{}), release: make(chan struct{})}
	ws := engine.New(st, workspace.Options{PolicyRecheck: time.Hour})
	defer ws.Close()
	put := func(who string) error {
		_, err := ws.Notes().Put(ctx, workspace.Write{Actor: who}, workspace.NotePut{Kind: "k", Key: who})
		return err
	}
	// The policy and the pauses are read and cached for the hour; a pause
	// and a resume clear the pauses' copy.
	require.NoError(t, put("warm"))
	for _, op := range []workspace.Op{workspace.PauseActorOp{Actor: "x"}, workspace.ResumeActorOp{Actor: "x"}} {
		_, err := ws.Commit(ctx, workspace.Batch{Actor: "root", Ops: []workspace.Op{op}})
		require.NoError(t, err)
	}
	reads := engine.PauseReads(ws)
	st.arm()
	errs := make(chan error, 2)
	go func() { errs <- put("reader") }()
	<-st.entered
	go func() { errs <- put("waiter") }()
	require.Eventually(t, func() bool { return engine.PauseJoins(ws) == 1 }, 10*time.Second, time.Millisecond)
	close(st.release)
	assert.NoError(t, <-errs)
	assert.NoError(t, <-errs)
	assert.Equal(t, reads+1, engine.PauseReads(ws), "reads of the pauses for the two writes")
}

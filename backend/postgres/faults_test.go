package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
)

// TestTerminatedConnectionsLoseNoAcknowledgedWriteOrEvent terminates every
// server connection of one workspace (its pools' and its listeners') again
// and again while writers and subscribers run; the server itself stays up,
// since other packages' tests share it. Writers see an error now and then
// and retry with the same idempotency key; subscribers whose stream ends
// resume from their last seq. Afterwards every acknowledged write is there
// exactly once, the log is contiguous, and every subscriber saw every
// event once, in order.
func TestTerminatedConnectionsLoseNoAcknowledgedWriteOrEvent(t *testing.T) {
	const (
		writerHandles = 2
		writersPer    = 3
		writesEach    = 40
		subscribers   = 2
		terminations  = 20
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	app := pgtest.RandomName("faults_")
	dsn := pgtest.WithParams(t, pgtest.NewDSN(t), "application_name", app)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	listenApp := "agentspace-listen:agentspace." + u.Query().Get("ws_schema")

	openFault := func() *workspace.Workspace {
		ws, err := workspace.Open(ctx, dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = ws.Close() })
		return ws
	}
	writers := make([]*workspace.Workspace, writerHandles)
	for i := range writers {
		writers[i] = openFault()
	}

	// Subscribers on handles of their own, resuming after any stream error.
	var (
		subMu sync.Mutex
		seen  = make([][]int64, subscribers)
		ends  = make([]int, subscribers)
		subWG sync.WaitGroup
	)
	subCtx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	for i := range subscribers {
		ws := openFault()
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			var last int64
			for subCtx.Err() == nil {
				sub, err := ws.Events().Subscribe(subCtx, workspace.SubscribeRequest{
					Query: workspace.EventQuery{AfterSeq: last}, Heartbeat: 100 * time.Millisecond})
				if err != nil {
					subMu.Lock()
					ends[i]++
					subMu.Unlock()
					select {
					case <-subCtx.Done():
					case <-time.After(20 * time.Millisecond):
					}
					continue
				}
				for m := range sub.C() {
					if m.Progress {
						continue
					}
					subMu.Lock()
					seen[i] = append(seen[i], m.Event.Seq)
					subMu.Unlock()
					last = m.Event.Seq
				}
				_ = sub.Close()
				subMu.Lock()
				ends[i]++
				subMu.Unlock()
			}
		}()
	}

	// The terminator.
	admin := pgtest.Connect(t)
	// It terminates connections every 75 ms, terminations times; the
	// writers write at least writesEach each, and on until it is done.
	termDone := make(chan struct{})
	terminated := make(chan int, 1)
	go func() {
		killed := 0
		defer func() {
			close(termDone)
			terminated <- killed
		}()
		for range terminations {
			select {
			case <-ctx.Done():
				return
			case <-time.After(75 * time.Millisecond):
			}
			var n int
			if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name IN ($1, $2)`,
				app, listenApp).Scan(&n); err != nil {
				t.Errorf("terminate: %v", err)
				return
			}
			killed += n
		}
	}()
	terminating := func() bool {
		select {
		case <-termDone:
			return false
		default:
			return true
		}
	}

	var (
		mu        sync.Mutex
		acked     []string
		issued    int
		writeErrs int
		firstErrs []string
		wg        sync.WaitGroup
	)
	for h, ws := range writers {
		for w := range writersPer {
			wg.Add(1)
			go func() {
				defer wg.Done()
				actor := fmt.Sprintf("writer-%d-%d", h, w)
				for i := 0; i < writesEach || terminating(); i++ {
					mu.Lock()
					issued++
					mu.Unlock()
					key := fmt.Sprintf("%s-%d", actor, i)
					wr := workspace.Write{Actor: actor, IdempotencyKey: key}
					for attempt := 0; ; attempt++ {
						_, err := ws.Notes().Put(ctx, wr, workspace.NotePut{Kind: "fault", Key: key, Body: key})
						if err == nil {
							mu.Lock()
							acked = append(acked, key)
							mu.Unlock()
							break
						}
						mu.Lock()
						writeErrs++
						if len(firstErrs) < 5 {
							firstErrs = append(firstErrs, err.Error())
						}
						mu.Unlock()
						if ctx.Err() != nil || attempt >= 50 || errors.Is(err, workspace.ErrInvalid) {
							t.Errorf("%s: write %s failed for good: %v", actor, key, err)
							return
						}
						time.Sleep(10 * time.Millisecond)
					}
				}
			}()
		}
	}
	wg.Wait()
	killed := <-terminated
	require.False(t, t.Failed())

	check := openFault()
	head, err := check.Events().Head(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, issued, writerHandles*writersPer*writesEach)
	assert.Len(t, acked, issued, "every write issued was acknowledged")
	for _, key := range acked {
		n, err := check.Notes().Get(ctx, "fault", key)
		if assert.NoError(t, err, "acknowledged note %s", key) {
			assert.Equal(t, int64(1), n.Version, "note %s was written once, retries or not", key)
		}
	}
	assert.Equal(t, int64(len(acked)), head, "one event per write, none twice")
	var seqs []int64
	for after := int64(0); after < head; {
		page, err := check.Events().Read(ctx, workspace.EventQuery{AfterSeq: after, Limit: 1000})
		require.NoError(t, err)
		require.NotEmpty(t, page.Events)
		for _, ev := range page.Events {
			seqs = append(seqs, ev.Seq)
		}
		after = page.Next
	}
	assertSeqs(t, "the log", seqs, head)

	// Each subscriber reaches the head, then stops.
	for i := range subscribers {
		for {
			subMu.Lock()
			n := len(seen[i])
			subMu.Unlock()
			if int64(n) >= head {
				break
			}
			select {
			case <-ctx.Done():
				require.FailNow(t, "subscriber did not catch up", "subscriber %d saw %d of %d", i, n, head)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	stopSubs()
	subWG.Wait()
	for i := range subscribers {
		assertSeqs(t, fmt.Sprintf("subscriber %d", i), seen[i], head)
	}
	t.Logf("%d writes acknowledged under %d terminated connections; %d write errors seen and retried (first: %v); subscriber streams restarted %v times",
		len(acked), killed, writeErrs, firstErrs, ends)
	assert.Positive(t, killed, "connections were terminated")
}

// assertSeqs checks that seqs is exactly 1..head, in order.
func assertSeqs(t *testing.T, who string, seqs []int64, head int64) {
	t.Helper()
	if !assert.Len(t, seqs, int(head), "%s: events seen", who) {
		return
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			assert.Fail(t, "events missed, repeated or out of order", "%s: position %d has seq %d", who, i, s)
			return
		}
	}
}

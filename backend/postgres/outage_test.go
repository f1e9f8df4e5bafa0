package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
)

// TestAFollowerReadsTheLogAsSoonAsTheDatabaseAnswersWhateverItsBackoff
// cuts a follower off its database while another store writes, with the
// follower's reconnect back-off set to an hour and its engine never
// polling: the follower delivers what was committed during the outage and
// after it, gap-free, because its listener probes the pool while it backs
// off and reads the log once the database answers.
func TestAFollowerReadsTheLogAsSoonAsTheDatabaseAnswersWhateverItsBackoff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dsn := pgtest.NewDSN(t)
	writer, err := workspace.Open(ctx, dsn, workspace.Options{Private: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = writer.Close() })
	proxy := pgtest.NewProxy(t, pgtest.ServerAddr(t, dsn))
	follower, s := lazyHandle(t, proxy.Via(t, dsn), listenPing, listenLinger, func(l *listener) {
		l.backoffMin, l.backoffMax = time.Hour, time.Hour
	})

	sub, err := follower.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	put := func(n int) {
		for range n {
			_, err := writer.Notes().Put(ctx, workspace.Write{Actor: "w"}, workspace.NotePut{Kind: "decision", Key: fmt.Sprint(time.Now().UnixNano())})
			require.NoError(t, err)
		}
	}
	put(3)
	got := nextSeqs(ctx, t, sub, 3)

	proxy.Cut()
	for s.listener.failed.Load() == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the listener never failed to reconnect")
		case <-time.After(10 * time.Millisecond):
		}
	}
	put(3) // committed while the follower cannot reach the database
	proxy.Restore()
	start := time.Now()
	put(1)
	got = append(got, nextSeqs(ctx, t, sub, 4)...)
	t.Logf("the first event committed after the outage was delivered %v after its write began (reconnect back-off: 1h)", time.Since(start))
	assert.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7}, got)
}

// nextSeqs returns the seqs of sub's next n events.
func nextSeqs(ctx context.Context, t *testing.T, sub *workspace.Subscription, n int) []int64 {
	t.Helper()
	var seqs []int64
	for len(seqs) < n {
		m, err := sub.Next(ctx)
		require.NoError(t, err)
		if !m.Progress {
			seqs = append(seqs, m.Event.Seq)
		}
	}
	return seqs
}

// TestAnUnreachableDatabaseIsUnavailableNamingTheOperation cuts a store
// off its database, with the policy read before every operation (so that
// it is what first meets the dead connection): each call fails with
// ErrUnavailable naming its own operation, not the policy read nor the
// statement that ran into the outage, and works again once the database
// answers.
func TestAnUnreachableDatabaseIsUnavailableNamingTheOperation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dsn := pgtest.NewDSN(t)
	proxy := pgtest.NewProxy(t, pgtest.ServerAddr(t, dsn))
	ws, err := workspace.Open(ctx, pgtest.WithParams(t, proxy.Via(t, dsn), "ws_policy_recheck", "0"), workspace.Options{Private: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	w := workspace.Write{Actor: "ann"}
	_, err = ws.Tasks().Create(ctx, w, workspace.NewTask{Title: "t"})
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "a", Content: []byte("1")})
	require.NoError(t, err)

	proxy.Cut()
	calls := []struct {
		op   string
		call func() error
	}{
		{"tasks.claim", func() error {
			_, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "ann", Lease: time.Minute})
			return err
		}},
		{"notes.put", func() error {
			_, err := ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "decision", Key: "k"})
			return err
		}},
		{"locks.acquire", func() error {
			_, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "r", Owner: "ann", TTL: time.Minute})
			return err
		}},
		{"artifacts.get", func() error {
			_, err := ws.Artifacts().Get(ctx, workspace.ByName("a"))
			return err
		}},
	}
	for _, c := range calls {
		err := c.call()
		require.ErrorIs(t, err, workspace.ErrUnavailable, c.op)
		var ue *workspace.UnavailableError
		require.ErrorAs(t, err, &ue, c.op)
		assert.True(t, strings.HasPrefix(err.Error(), c.op+": postgres: database unavailable: "), err.Error())
		assert.NotContains(t, err.Error(), "policy", c.op)
		assert.NotContains(t, err.Error(), "insert into", c.op)
	}

	proxy.Restore()
	task, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "ann", Lease: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, "t", task.Title)
}

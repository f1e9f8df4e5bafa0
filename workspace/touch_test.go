package workspace_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

// clock is a Toucher's controlled clock for its per-actor interval.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestTouchRenewsClaimsAndLeasesWithinTheCap: a touch extends the actor's
// claim by its own lease length and its lease by its TTL, nobody else's;
// a second touch within Every reads and writes nothing; after Every it
// renews again, never granting more than the holder asked for.
func TestTouchRenewsClaimsAndLeasesWithinTheCap(t *testing.T) {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	for range 2 {
		_, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "t"})
		require.NoError(t, err)
	}
	mine, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "ann", Lease: time.Hour})
	require.NoError(t, err)
	theirs, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "bob", Lease: time.Hour})
	require.NoError(t, err)
	lease, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:a", Owner: "ann", TTL: 30 * time.Minute})
	require.NoError(t, err)

	c := &clock{now: time.Now()}
	tc := workspace.NewToucher(ws, workspace.TouchOptions{Every: time.Minute, Now: c.Now})
	r, err := tc.Touch(ctx, "ann")
	require.NoError(t, err)
	assert.Equal(t, workspace.TouchResult{Claims: 1, Leases: 1}, r)
	got, err := ws.Tasks().Get(ctx, mine.ID)
	require.NoError(t, err)
	assert.True(t, got.LeaseExpiresAt.After(mine.LeaseExpiresAt), "the claim was extended")
	assert.Equal(t, time.Hour, got.LeaseExpiresAt.Sub(got.UpdatedAt), "by its own lease length, no more")
	l, err := ws.Locks().Get(ctx, "file:a")
	require.NoError(t, err)
	assert.True(t, l.ExpiresAt.After(lease.ExpiresAt), "the lease was extended")
	assert.Equal(t, lease.Token, l.Token)
	assert.LessOrEqual(t, time.Until(l.ExpiresAt), 30*time.Minute, "by its TTL, no more")
	other, err := ws.Tasks().Get(ctx, theirs.ID)
	require.NoError(t, err)
	assert.Equal(t, theirs.Version, other.Version, "another's claim is untouched")

	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	c.add(59 * time.Second)
	r, err = tc.Touch(ctx, "ann")
	require.NoError(t, err)
	assert.True(t, r.Skipped, "within Every")
	after, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, head, after, "nothing written within Every")

	c.add(time.Second)
	r, err = tc.Touch(ctx, "ann")
	require.NoError(t, err)
	assert.Equal(t, workspace.TouchResult{Claims: 1, Leases: 1}, r, "renewed again after Every")
	l2, err := ws.Locks().Get(ctx, "file:a")
	require.NoError(t, err)
	assert.LessOrEqual(t, time.Until(l2.ExpiresAt), 30*time.Minute, "the lease's span does not grow with renewals")

	_, err = ws.Tasks().Complete(ctx, workspace.Write{Actor: "ann"}, mine.ID, workspace.TaskResult{Summary: "done"})
	require.NoError(t, err)
	require.NoError(t, ws.Locks().Release(ctx, l2))
	c.add(time.Minute)
	r, err = tc.Touch(ctx, "ann")
	require.NoError(t, err)
	assert.Equal(t, workspace.TouchResult{}, r, "nothing held, nothing renewed")
	r, err = tc.Touch(ctx, "")
	require.NoError(t, err)
	assert.True(t, r.Skipped, "no actor, no touch")
}

// TestTouchDoesNotReviveALapsedClaim: a claim whose lease ran out before
// the touch stays lapsed, and another agent claims the task.
func TestTouchDoesNotReviveALapsedClaim(t *testing.T) {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	_, err = ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "t"})
	require.NoError(t, err)
	claimed, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "ann", Lease: time.Millisecond})
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(claimed.LeaseExpiresAt.Add(time.Millisecond)) {
		require.True(t, time.Now().Before(deadline))
		time.Sleep(time.Millisecond)
	}
	r, err := workspace.NewToucher(ws, workspace.TouchOptions{}).Touch(ctx, "ann")
	require.NoError(t, err)
	assert.Zero(t, r.Claims)
	next, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "bob", Lease: time.Hour})
	require.NoError(t, err)
	assert.Equal(t, claimed.ID, next.ID)
}

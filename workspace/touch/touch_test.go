package touch_test

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
	"github.com/agentspace/agentspace/workspace/touch"
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

	// A minute on: the claims and the lease were granted Every ago.
	c := &clock{now: time.Now().Add(time.Minute)}
	tc := touch.New(ws, touch.Options{Every: time.Minute, Now: c.Now})
	r, err := tc.Touch(ctx, "ann")
	require.NoError(t, err)
	assert.Equal(t, touch.Result{Claims: 1, Leases: 1}, r)
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
	assert.Equal(t, touch.Result{Claims: 1, Leases: 1}, r, "renewed again after Every")
	l2, err := ws.Locks().Get(ctx, "file:a")
	require.NoError(t, err)
	assert.LessOrEqual(t, time.Until(l2.ExpiresAt), 30*time.Minute, "the lease's span does not grow with renewals")

	_, err = ws.Tasks().Complete(ctx, workspace.Write{Actor: "ann"}, mine.ID, workspace.TaskResult{Summary: "done"})
	require.NoError(t, err)
	require.NoError(t, ws.Locks().Release(ctx, l2))
	c.add(time.Minute)
	r, err = tc.Touch(ctx, "ann")
	require.NoError(t, err)
	assert.Equal(t, touch.Result{}, r, "nothing held, nothing renewed")
	r, err = tc.Touch(ctx, "")
	require.NoError(t, err)
	assert.True(t, r.Skipped, "no actor, no touch")
}

// openTouch opens a SQLite workspace with one task per title.
func openTouch(t *testing.T, titles ...string) *workspace.Workspace {
	t.Helper()
	ws, err := workspace.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	for _, title := range titles {
		_, err := ws.Tasks().Create(context.Background(), workspace.Write{Actor: "lead"}, workspace.NewTask{Title: title})
		require.NoError(t, err)
	}
	return ws
}

// TestTouchCapsALeaseAtMaxLease: a lease taken for 3h is renewed by at
// most MaxLease (1h) from the renewal: not while more than MaxLease is
// left (a renewal never shortens it), and by MaxLease, not its 3h, once
// less is left by the Toucher's clock.
func TestTouchCapsALeaseAtMaxLease(t *testing.T) {
	ctx := context.Background()
	ws := openTouch(t)
	lease, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:big", Owner: "ann", TTL: 3 * time.Hour})
	require.NoError(t, err)
	assert.Equal(t, 3*time.Hour, lease.TTL)
	c := &clock{now: lease.AcquiredAt}
	tc := touch.New(ws, touch.Options{Every: time.Second, MaxLease: time.Hour, Now: c.Now})

	r, err := tc.Touch(ctx, "ann")
	require.NoError(t, err)
	assert.Equal(t, touch.Result{}, r, "3h left: a 1h renewal would shorten it")
	l, err := ws.Locks().Get(ctx, "file:big")
	require.NoError(t, err)
	assert.Equal(t, lease.ExpiresAt, l.ExpiresAt)

	c.add(2*time.Hour + time.Second) // less than MaxLease left by the Toucher's clock
	before := time.Now().UTC().Truncate(time.Microsecond)
	r, err = tc.Touch(ctx, "ann")
	after := time.Now().UTC()
	require.NoError(t, err)
	assert.Equal(t, touch.Result{Leases: 1}, r)
	got, err := ws.Locks().Get(ctx, "file:big")
	require.NoError(t, err)
	assert.Equal(t, lease.Token, got.Token, "the same lease, its fence unchanged")
	assert.False(t, got.ExpiresAt.Before(before.Add(time.Hour)), "renewed by MaxLease from the renewal")
	assert.False(t, got.ExpiresAt.After(after.Add(time.Hour)), "and no more: not the lease's 3h")
}

// TestTouchersOfManyHandlesDoNotStretchALease: a lease taken for 30s and
// touched by one fresh Toucher after another, each on a handle with a
// store of its own (as a new `wsctl mcp`, a restarted or a second server
// is), is renewed by its own 30s every time, however long ago it was
// acquired: each renewal's expiry is its lock.renewed event's time plus
// 30s exactly. A lease its holder renewed for 20s is renewed by 20s: its
// last ask.
func TestTouchersOfManyHandlesDoNotStretchALease(t *testing.T) {
	ctx := context.Background()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	holder, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Close() })
	lease, err := holder.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:a", Owner: "ann", TTL: 30 * time.Second})
	require.NoError(t, err)

	renewals := func(want time.Duration, n int) {
		t.Helper()
		for i := range n {
			ws, err := workspace.Open(ctx, dsn+"?ws_private=true")
			require.NoError(t, err)
			cur, err := ws.Locks().Get(ctx, "file:a")
			require.NoError(t, err)
			// The Toucher's clock a moment before the lease ends, so that
			// a renewal by its TTL extends it and one is made.
			c := &clock{now: cur.ExpiresAt.Add(-time.Millisecond)}
			r, err := touch.New(ws, touch.Options{Now: c.Now}).Touch(ctx, "ann")
			require.NoError(t, err)
			require.Equal(t, touch.Result{Leases: 1}, r, "toucher %d renews", i)
			got, err := ws.Locks().Get(ctx, "file:a")
			require.NoError(t, err)
			page, err := ws.Events().Read(ctx, workspace.EventQuery{Types: []string{workspace.EventLockRenewed}})
			require.NoError(t, err)
			require.NotEmpty(t, page.Events)
			renewed := page.Events[len(page.Events)-1]
			assert.Equal(t, lease.Token, got.Token)
			assert.Equal(t, want, got.TTL, "toucher %d: the lease's own TTL is kept", i)
			assert.Equal(t, want, got.ExpiresAt.Sub(renewed.Time), "toucher %d renewed by the lease's own TTL, no more", i)
			require.NoError(t, ws.Close())
		}
	}
	renewals(30*time.Second, 6)

	cur, err := holder.Locks().Get(ctx, "file:a")
	require.NoError(t, err)
	_, err = holder.Locks().Renew(ctx, cur, 20*time.Second)
	require.NoError(t, err)
	renewals(20*time.Second, 3)
}

// TestTouchDoesNotReviveWhatLapsed: by the Toucher's clock, a claim and a
// lease are renewed up to the instant they lapse and not from it: an
// agent that stops calling keeps them exactly as long as its last
// renewal granted (its own lease length from that renewal), and a call
// after that revives nothing. The clock is the Toucher's own, so no test
// waits for a lease to run out.
func TestTouchDoesNotReviveWhatLapsed(t *testing.T) {
	ctx := context.Background()
	ws := openTouch(t, "t")
	claimed, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "ann", Lease: time.Hour})
	require.NoError(t, err)
	lease, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:a", Owner: "ann", TTL: time.Hour})
	require.NoError(t, err)
	c := &clock{}
	tc := touch.New(ws, touch.Options{Every: time.Nanosecond, Now: c.Now})

	// The last instant before both lapse: renewed.
	c.now = claimed.LeaseExpiresAt.Add(-time.Microsecond)
	if lease.ExpiresAt.Before(claimed.LeaseExpiresAt) {
		c.now = lease.ExpiresAt.Add(-time.Microsecond)
	}
	r, err := tc.Touch(ctx, "ann")
	require.NoError(t, err)
	assert.Equal(t, touch.Result{Claims: 1, Leases: 1}, r)
	task, err := ws.Tasks().Get(ctx, claimed.ID)
	require.NoError(t, err)
	assert.Equal(t, time.Hour, task.LeaseExpiresAt.Sub(task.UpdatedAt), "its last renewal granted its own lease length")
	l, err := ws.Locks().Get(ctx, "file:a")
	require.NoError(t, err)
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)

	// It stops calling. From the instant the renewed claim and lease have
	// lapsed (the later of the two), a late call renews neither and
	// writes nothing.
	c.now = task.LeaseExpiresAt
	if l.ExpiresAt.After(c.now) {
		c.now = l.ExpiresAt
	}
	for range 2 {
		r, err = tc.Touch(ctx, "ann")
		require.NoError(t, err)
		assert.Equal(t, touch.Result{}, r, "lapsed: neither is revived (and Every has passed: it looked)")
		c.add(time.Hour)
	}
	after, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, head, after, "nothing written for what had lapsed")
	got, err := ws.Tasks().Get(ctx, claimed.ID)
	require.NoError(t, err)
	assert.Equal(t, task.Version, got.Version, "the claim was not renewed")
	assert.Equal(t, task.LeaseExpiresAt, got.LeaseExpiresAt, "it lapses when its last renewal said")
	gl, err := ws.Locks().Get(ctx, "file:a")
	require.NoError(t, err)
	assert.Equal(t, l.ExpiresAt, gl.ExpiresAt, "nor the lease")
}

// TestConcurrentTouchesOfOneActorRenewOnce: however many calls of one
// agent arrive at once, one of them renews and the rest read nothing.
func TestConcurrentTouchesOfOneActorRenewOnce(t *testing.T) {
	ctx := context.Background()
	ws := openTouch(t, "t")
	claimed, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "ann", Lease: time.Hour})
	require.NoError(t, err)
	c := &clock{now: claimed.UpdatedAt.Add(time.Minute)}
	tc := touch.New(ws, touch.Options{Every: time.Minute, Now: c.Now})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		renewed  int
		skipped  int
		failures []error
	)
	for range 8 {
		wg.Go(func() {
			r, err := tc.Touch(ctx, "ann")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures = append(failures, err)
			}
			renewed += r.Claims
			if r.Skipped {
				skipped++
			}
		})
	}
	wg.Wait()
	require.Empty(t, failures)
	assert.Equal(t, 1, renewed)
	assert.Equal(t, 7, skipped)
	got, err := ws.Tasks().Get(ctx, claimed.ID)
	require.NoError(t, err)
	assert.Equal(t, claimed.Version+1, got.Version, "one renewal")
}

// TestTouchersOfManyServersRenewAsOne: the cap is the actor's, not each
// Toucher's. A claim and a lease just granted are not renewed by any
// Toucher within Every; once Every has passed, the first Toucher renews
// them and a second one (another server's) then renews nothing.
func TestTouchersOfManyServersRenewAsOne(t *testing.T) {
	ctx := context.Background()
	ws := openTouch(t, "t")
	claimed, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "ann", Lease: time.Hour})
	require.NoError(t, err)
	_, err = ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:a", Owner: "ann", TTL: 30 * time.Minute})
	require.NoError(t, err)
	c := &clock{now: claimed.UpdatedAt.Add(time.Second)}
	a := touch.New(ws, touch.Options{Every: time.Minute, Now: c.Now})
	b := touch.New(ws, touch.Options{Every: time.Minute}) // the real clock, as the store's
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	for _, tc := range []*touch.Toucher{a, b} {
		r, err := tc.Touch(ctx, "ann")
		require.NoError(t, err)
		assert.Equal(t, touch.Result{}, r, "granted a second ago: nothing to renew")
	}
	after, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, head, after, "nothing written")

	// a's clock two minutes on: it renews; b, by the real clock, sees the
	// renewal it just made.
	c.add(2 * time.Minute)
	r, err := a.Touch(ctx, "ann")
	require.NoError(t, err)
	assert.Equal(t, touch.Result{Claims: 1, Leases: 1}, r)
	third := touch.New(ws, touch.Options{Every: time.Minute}) // a server that never touched ann
	r, err = third.Touch(ctx, "ann")
	require.NoError(t, err)
	assert.Equal(t, touch.Result{}, r, "another server's Toucher renewed them a moment ago")
}

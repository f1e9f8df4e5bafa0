package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

func acquire(t testing.TB, ws *workspace.Workspace, resource, owner string, ttl time.Duration) workspace.Lease {
	t.Helper()
	l, err := ws.Locks().Acquire(testCtx(t), workspace.AcquireRequest{Resource: resource, Owner: owner, TTL: ttl})
	require.NoError(t, err, "acquire %s as %s", resource, owner)
	return l
}

// testLockHeldRefusesOthers: a live lease refuses every other owner, on every
// handle, with who holds it and until when.
func testLockHeldRefusesOthers(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	l := acquire(t, ws1, "file:src/api.go", "alice", time.Minute)
	assert.Equal(t, "file:src/api.go", l.Resource)
	assert.Equal(t, "alice", l.Owner)
	assert.GreaterOrEqual(t, l.Token, int64(1))
	assert.True(t, l.ExpiresAt.After(l.AcquiredAt))
	assert.Equal(t, time.UTC, l.ExpiresAt.Location())
	before := snap(t, ws1)

	_, err := ws2.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:src/api.go", Owner: "bob", TTL: time.Minute})
	require.ErrorIs(t, err, workspace.ErrLocked)
	var le *workspace.LockedError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "alice", le.Holder)
	assert.Equal(t, l.Token, le.Token)
	assertSameTime(t, l.ExpiresAt, le.ExpiresAt, "ExpiresAt")
	assert.Equal(t, before, snap(t, ws1), "a refused acquire writes nothing")

	got, err := ws2.Locks().Get(ctx, "file:src/api.go")
	require.NoError(t, err)
	assert.Equal(t, l.Token, got.Token)
	assert.Equal(t, "alice", got.Owner)
	assertSameTime(t, l.ExpiresAt, got.ExpiresAt, "ExpiresAt")
	_, err = ws2.Locks().Get(ctx, "file:other")
	assert.ErrorIs(t, err, workspace.ErrNotFound)

	other := acquire(t, ws2, "file:a-first", "bob", time.Minute)
	list, err := ws1.Locks().List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, other.Resource, list[0].Resource, "ordered by resource")
	assert.Equal(t, l.Resource, list[1].Resource)
}

// testLockReacquire: the owner acquiring again extends its lease and keeps
// the token.
func testLockReacquire(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	l := acquire(t, ws1, "role:orchestrator", "alice", time.Minute)
	before := headOf(t, ws1)
	again, err := ws2.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "role:orchestrator", Owner: "alice", TTL: time.Hour})
	require.NoError(t, err)
	assert.Equal(t, l.Token, again.Token, "same token")
	assert.True(t, again.ExpiresAt.After(l.ExpiresAt), "extended")
	evs := eventsAfter(t, ws1, before)
	require.Len(t, evs, 1)
	assert.Equal(t, workspace.EventLockRenewed, evs[0].Type)
	assert.Equal(t, l.Token, evs[0].Version)
}

// testLockExpiry: an expired lease is free with nobody cleaning up; the next
// owner gets a strictly greater token, and the log records the expiry just
// before the new acquisition.
func testLockExpiry(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	old := acquire(t, ws1, "file:x", "crashy", 50*time.Millisecond)
	before := headOf(t, ws1)

	var next workspace.Lease
	waitFor(t, "the lease to expire", func() bool {
		l, err := ws2.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:x", Owner: "steady", TTL: time.Minute})
		if err != nil {
			require.ErrorIs(t, err, workspace.ErrLocked)
			return false
		}
		next = l
		return true
	})
	assert.Greater(t, next.Token, old.Token, "the token strictly increases")
	assert.Equal(t, "steady", next.Owner)
	evs := eventsAfter(t, ws1, before)
	require.Equal(t, []string{workspace.EventLockExpired, workspace.EventLockAcquired}, types(evs))
	assert.Equal(t, evs[0].Seq+1, evs[1].Seq)
	assert.Equal(t, old.Token, evs[0].Version, "lock.expired names the old token")
	assert.Equal(t, next.Token, evs[1].Version)
	assert.Equal(t, "file:x", evs[0].Subject.ID)

	_, err := ws1.Locks().Renew(ctx, old, time.Minute)
	assert.ErrorIs(t, err, workspace.ErrLockLost)
	assert.ErrorIs(t, ws1.Locks().Release(ctx, old), workspace.ErrLockLost)
	got, err := ws1.Locks().Get(ctx, "file:x")
	require.NoError(t, err)
	assert.Equal(t, "steady", got.Owner)

	// An expired lease nobody took over is not listed and not returned.
	acquire(t, ws1, "file:y", "crashy", 20*time.Millisecond)
	waitFor(t, "the lease to lapse", func() bool {
		_, err := ws2.Locks().Get(ctx, "file:y")
		return err != nil
	})
	_, err = ws2.Locks().Get(ctx, "file:y")
	assert.ErrorIs(t, err, workspace.ErrNotFound)
	list, err := ws2.Locks().List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "file:x", list[0].Resource)
}

// testLockRenew: Renew extends a live lease with the same token; a lease that
// is not the caller's is refused.
func testLockRenew(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	l := acquire(t, ws1, "file:x", "alice", time.Minute)
	r, err := ws2.Locks().Renew(ctx, l, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, l.Token, r.Token)
	assert.True(t, r.ExpiresAt.After(l.ExpiresAt))
	got, err := ws1.Locks().Get(ctx, "file:x")
	require.NoError(t, err)
	assertSameTime(t, r.ExpiresAt, got.ExpiresAt, "ExpiresAt")

	before := snap(t, ws1)
	notMine := l
	notMine.Owner = "bob"
	_, err = ws2.Locks().Renew(ctx, notMine, time.Hour)
	assert.ErrorIs(t, err, workspace.ErrNotHolder)
	wrongToken := l
	wrongToken.Token = l.Token + 1
	_, err = ws2.Locks().Renew(ctx, wrongToken, time.Hour)
	assert.ErrorIs(t, err, workspace.ErrNotHolder)
	_, err = ws2.Locks().Renew(ctx, workspace.Lease{Resource: "file:never", Owner: "alice", Token: 1}, time.Hour)
	assert.ErrorIs(t, err, workspace.ErrNotHolder)
	assert.Equal(t, before, snap(t, ws1))
}

// testLockRelease: only the owner with its token releases; a released lease
// is free and its next holder gets a greater token.
func testLockRelease(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	l := acquire(t, ws1, "file:x", "alice", time.Minute)
	before := snap(t, ws1)
	cases := []struct {
		name    string
		lease   workspace.Lease
		wantErr error
	}{
		{"another owner", workspace.Lease{Resource: "file:x", Owner: "bob", Token: l.Token}, workspace.ErrNotHolder},
		{"a token never issued", workspace.Lease{Resource: "file:x", Owner: "alice", Token: l.Token + 1}, workspace.ErrNotHolder},
		{"a resource never locked", workspace.Lease{Resource: "file:never", Owner: "alice", Token: 1}, workspace.ErrNotHolder},
	}
	for _, c := range cases {
		assert.ErrorIs(t, ws2.Locks().Release(ctx, c.lease), c.wantErr, c.name)
	}
	assert.Equal(t, before, snap(t, ws1), "refused releases write nothing")

	require.NoError(t, ws2.Locks().Release(ctx, l), "the owner releases from any handle")
	evs := eventsAfter(t, ws1, before.Head)
	require.Len(t, evs, 1)
	assert.Equal(t, workspace.EventLockReleased, evs[0].Type)
	assert.Equal(t, "alice", evs[0].Actor)
	_, err := ws1.Locks().Get(ctx, "file:x")
	assert.ErrorIs(t, err, workspace.ErrNotFound)
	assert.ErrorIs(t, ws1.Locks().Release(ctx, l), workspace.ErrLockLost, "releasing twice")
	list, err := ws2.Locks().List(ctx)
	require.NoError(t, err)
	assert.Empty(t, list, "released leases are not listed")

	b := acquire(t, ws2, "file:x", "bob", time.Minute)
	assert.Greater(t, b.Token, l.Token)
	assert.ErrorIs(t, ws1.Locks().Release(ctx, l), workspace.ErrLockLost, "an old token after a hand-over")
	_, err = ws1.Locks().Renew(ctx, l, time.Minute)
	assert.ErrorIs(t, err, workspace.ErrLockLost)
}

// testLockForceRelease: any actor can free a lease; it is recorded, and the
// former holder has lost it.
func testLockForceRelease(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	l := acquire(t, ws1, "file:x", "stuck", time.Hour)
	before := headOf(t, ws1)
	require.NoError(t, ws2.Locks().ForceRelease(ctx, workspace.Write{Actor: "admin", Message: "agent crashed"}, "file:x"))
	evs := eventsAfter(t, ws1, before)
	require.Len(t, evs, 1)
	assert.Equal(t, workspace.EventLockForced, evs[0].Type)
	assert.Equal(t, "admin", evs[0].Actor)
	assert.Equal(t, "agent crashed", evs[0].Message)
	assert.Equal(t, "file:x", evs[0].Subject.ID)

	_, err := ws1.Locks().Get(ctx, "file:x")
	assert.ErrorIs(t, err, workspace.ErrNotFound)
	_, err = ws1.Locks().Renew(ctx, l, time.Minute)
	assert.ErrorIs(t, err, workspace.ErrLockLost)
	assert.ErrorIs(t, ws1.Locks().Release(ctx, l), workspace.ErrLockLost)
	assert.ErrorIs(t, ws2.Locks().ForceRelease(ctx, as("admin"), "file:x"), workspace.ErrNotFound, "nothing to force")
	n := acquire(t, ws2, "file:x", "fresh", time.Minute)
	assert.Greater(t, n.Token, l.Token)
}

// testLockedArtifact: while artifact:NAME is leased, other actors cannot
// write the artifact; the holder can.
func testLockedArtifact(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	a, err := ws1.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: "plans/auth.md", Content: []byte("v1")})
	require.NoError(t, err)
	l := acquire(t, ws1, "artifact:plans/auth.md", "alice", time.Minute)
	acquire(t, ws1, "artifact:plans/new.md", "alice", time.Minute)
	before := snap(t, ws1)

	refused := map[string]func() error{
		"update": func() error {
			_, err := ws2.Artifacts().Update(ctx, as("bob"), workspace.ByName(a.Name), workspace.ArtifactChange{Content: []byte("bob")})
			return err
		},
		"update by id": func() error {
			_, err := ws2.Artifacts().Update(ctx, as("bob"), workspace.ByID(a.ID), workspace.ArtifactChange{Labels: map[string]string{"x": "y"}})
			return err
		},
		"rollback": func() error {
			_, err := ws2.Artifacts().Rollback(ctx, as("bob"), workspace.ByName(a.Name), 1)
			return err
		},
		"delete": func() error { return ws2.Artifacts().Delete(ctx, as("bob"), workspace.ByName(a.Name)) },
		"create under a locked name": func() error {
			_, err := ws2.Artifacts().Create(ctx, as("bob"), workspace.NewArtifact{Name: "plans/new.md"})
			return err
		},
		"in a batch": func() error {
			_, err := ws2.Commit(ctx, workspace.Batch{Actor: "bob", Ops: []workspace.Op{
				workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: "k"}},
				workspace.UpdateArtifactOp{Ref: workspace.ByName(a.Name), Change: workspace.ArtifactChange{Content: []byte("bob")}},
			}})
			return err
		},
	}
	for name, call := range refused {
		err := call()
		require.ErrorIs(t, err, workspace.ErrLocked, name)
		var le *workspace.LockedError
		require.ErrorAs(t, err, &le, name)
		assert.Equal(t, "alice", le.Holder, name)
	}
	assert.Equal(t, before, snap(t, ws1), "refused writes write nothing")

	up, err := ws2.Artifacts().Update(ctx, workspace.Write{Actor: "alice", Fence: l.Token}, workspace.ByName(a.Name), workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err, "the holder writes, from any handle")
	assert.Equal(t, int64(2), up.Version)
	_, err = ws1.Artifacts().Update(ctx, as("alice"), workspace.ByName(a.Name), workspace.ArtifactChange{Content: []byte("v3")})
	require.NoError(t, err, "the holder writes without a fence too")

	require.NoError(t, ws1.Locks().Release(ctx, l))
	_, err = ws2.Artifacts().Update(ctx, as("bob"), workspace.ByName(a.Name), workspace.ArtifactChange{Content: []byte("bob")})
	require.NoError(t, err, "after the release anyone writes")
}

// testLockStaleFence: a write fenced with a token older than the newest one
// issued for the artifact's lock is refused, whoever holds the lock now.
func testLockStaleFence(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	a, err := ws1.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: "out.txt", Content: []byte("v1")})
	require.NoError(t, err)
	la := acquire(t, ws1, "artifact:out.txt", "alice", time.Minute)
	_, err = ws1.Artifacts().Update(ctx, workspace.Write{Actor: "alice", Fence: la.Token}, workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err)
	require.NoError(t, ws1.Locks().Release(ctx, la))
	lb := acquire(t, ws2, "artifact:out.txt", "bob", time.Minute)
	require.Greater(t, lb.Token, la.Token)
	_, err = ws2.Artifacts().Update(ctx, workspace.Write{Actor: "bob", Fence: lb.Token}, workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("v3")})
	require.NoError(t, err)
	require.NoError(t, ws2.Locks().Release(ctx, lb))
	before := snap(t, ws1)

	for name, call := range map[string]func() error{
		"update": func() error {
			_, err := ws1.Artifacts().Update(ctx, workspace.Write{Actor: "alice", Fence: la.Token}, workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("zombie")})
			return err
		},
		"delete": func() error {
			return ws1.Artifacts().Delete(ctx, workspace.Write{Actor: "alice", Fence: la.Token}, workspace.ByID(a.ID))
		},
		"rollback": func() error {
			_, err := ws1.Artifacts().Rollback(ctx, workspace.Write{Actor: "alice", Fence: la.Token}, workspace.ByID(a.ID), 1)
			return err
		},
	} {
		err := call()
		require.ErrorIs(t, err, workspace.ErrStaleFence, name)
		var se *workspace.StaleFenceError
		if assert.ErrorAs(t, err, &se, name) {
			assert.Equal(t, la.Token, se.Fence)
			assert.Equal(t, lb.Token, se.Newest)
		}
	}
	assert.Equal(t, before, snap(t, ws1), "stale writes write nothing")
	_, err = ws1.Artifacts().Update(ctx, workspace.Write{Actor: "alice", Fence: lb.Token}, workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("v4")})
	require.NoError(t, err, "a fence equal to the newest token passes")
}

// testLockWaitRelease: a waiter on another handle acquires once the holder
// releases, and not before.
func testLockWaitRelease(t *testing.T, h Harness) {
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	ctx := testCtx(t)
	held := acquire(t, ws1, "role:leader", "alice", time.Hour)

	short, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
	defer cancel()
	_, err := ws2.Locks().Acquire(short, workspace.AcquireRequest{Resource: "role:leader", Owner: "bob", TTL: time.Minute, Wait: true})
	assert.ErrorIs(t, err, context.DeadlineExceeded, "a wait ends with its context")

	started := time.Now()
	waiter := goCall(t, func() (workspace.Lease, error) {
		return ws2.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "role:leader", Owner: "bob", TTL: time.Minute, Wait: true})
	})
	time.Sleep(300 * time.Millisecond) // give the waiter time to (wrongly) acquire
	notYet(t, waiter, "a wait on a held lease")
	before := headOf(t, ws1)
	require.NoError(t, ws1.Locks().Release(ctx, held))
	got, err := recv(t, waiter)
	require.NoError(t, err)
	assert.Equal(t, "bob", got.Owner)
	assert.Greater(t, got.Token, held.Token)
	evs := eventsAfter(t, ws1, before)
	require.Equal(t, []string{workspace.EventLockReleased, workspace.EventLockWaited, workspace.EventLockAcquired}, types(evs),
		"the waiter acquired after the release, and recorded its wait")
	assert.Equal(t, "bob", evs[1].Actor)
	assert.Equal(t, "bob", evs[2].Actor)
	assert.Equal(t, got.Token, evs[1].Version, "lock.waited carries the token the wait ended with")
	assert.Equal(t, evs[2].Seq, evs[1].Seq+1, "lock.waited comes just before its lock.acquired")
	waited, err := time.ParseDuration(evs[1].Message)
	require.NoError(t, err, "lock.waited's message is a duration: %q", evs[1].Message)
	// The wait is timed from the end of bob's first try, which a loaded
	// machine may delay by any amount: what holds whatever the scheduling
	// is that bob did wait, and no longer than this test saw him wait.
	assert.Positive(t, waited, "bob waited")
	assert.LessOrEqual(t, waited, time.Since(started), "bob's wait is no longer than the call the test made")
}

// testLockWaitExpiry: a waiter acquires when the holder's lease expires,
// with no release.
func testLockWaitExpiry(t *testing.T, h Harness) {
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	ctx := testCtx(t)
	held := acquire(t, ws1, "role:leader", "crashy", 100*time.Millisecond)
	got, err := ws2.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "role:leader", Owner: "bob", TTL: time.Minute, Wait: true})
	require.NoError(t, err)
	assert.Equal(t, "bob", got.Owner)
	assert.Greater(t, got.Token, held.Token)
	assert.False(t, got.AcquiredAt.Before(held.ExpiresAt), "not before the old lease expired")
}

// testLockKeepsItsTTL: a lease records the TTL its holder last asked for,
// which every handle reads back (List and Get): its Acquire's, an
// extending Acquire's by its owner, then its last Renew's, shorter or
// longer; the token stays. Each expiry is the granting event's time plus
// that TTL exactly, so a renewal made from the record (tool use as a
// heartbeat) grants what the holder asked for and no more.
func testLockKeepsItsTTL(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	check := func(want time.Duration, typ, what string) workspace.Lease {
		t.Helper()
		got, err := ws2.Locks().Get(ctx, "file:ttl")
		require.NoError(t, err, what)
		assert.Equal(t, want, got.TTL, what)
		live, err := ws2.Locks().List(ctx)
		require.NoError(t, err, what)
		require.Len(t, live, 1, what)
		assert.Equal(t, want, live[0].TTL, "%s: listed", what)
		page, err := ws2.Events().Read(ctx, workspace.EventQuery{Types: []string{typ}, SubjectID: "file:ttl"})
		require.NoError(t, err, what)
		require.NotEmpty(t, page.Events, what)
		granted := page.Events[len(page.Events)-1]
		assert.Equal(t, want, got.ExpiresAt.Sub(granted.Time), "%s: it expires its TTL after the grant", what)
		return got
	}
	l := acquire(t, ws1, "file:ttl", "alice", 30*time.Second)
	assert.Equal(t, 30*time.Second, l.TTL, "Acquire returns it")
	check(30*time.Second, workspace.EventLockAcquired, "acquired")

	again := acquire(t, ws1, "file:ttl", "alice", 40*time.Second)
	assert.Equal(t, l.Token, again.Token)
	assert.Equal(t, 40*time.Second, again.TTL, "an extending Acquire returns its own")
	check(40*time.Second, workspace.EventLockRenewed, "extended by its owner")

	r, err := ws2.Locks().Renew(ctx, again, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, 10*time.Second, r.TTL, "Renew returns it")
	check(10*time.Second, workspace.EventLockRenewed, "renewed shorter")
	r, err = ws1.Locks().Renew(ctx, r, time.Hour)
	require.NoError(t, err)
	got := check(time.Hour, workspace.EventLockRenewed, "renewed longer")
	assert.Equal(t, l.Token, got.Token, "the same lease throughout")
}

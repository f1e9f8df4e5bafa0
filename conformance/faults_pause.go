//go:build unix

package conformance

import (
	"bufio"
	"errors"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/procstop"
	"github.com/agentspace/agentspace/workspace"
)

const (
	rolePausedHolder = "paused-holder"
	pausedTTL        = time.Second
	pausedArtifact   = "fenced/report.md"
	pausedActor      = "paused-holder"
)

// testPausedLeaseHolder: a child process takes the artifact's lease and
// writes under it, then is frozen (SIGSTOP) past the lease's TTL. Another
// agent takes the lease over and writes. Thawed (SIGCONT), the child goes
// on as if nothing happened: its writes with its old fencing token are
// rejected with ErrStaleFence, its unfenced write with ErrLocked, its
// renewal with ErrLockLost, and the store keeps only the new holder's work.
func testPausedLeaseHolder(t *testing.T, h Harness) {
	ctx := caseCtx(t, 90*time.Second)
	dsn, ws := fresh(t, h)
	_, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "setup"},
		workspace.NewArtifact{Name: pausedArtifact, Content: []byte("draft")})
	require.NoError(t, err)

	kid := startRelChild(t, ctx, subtestPattern(t), rolePausedHolder, "paused", dsn, "", 80*time.Second)
	kid.expect(t, ctx, "wrote")
	oldToken, err := strconv.ParseInt(kid.expect(t, ctx, "leased "), 10, 64)
	require.NoError(t, err)
	thawed := false
	defer func() {
		if !thawed {
			_ = syscall.Kill(kid.cmd.Process.Pid, syscall.SIGCONT)
		}
	}()
	// kill(2) only queues the stop: until every thread of the child has
	// stopped, "write" could still be read and the late write begun, and a
	// child frozen inside its transaction rightly holds the store's write
	// lock (the successor would wait for it, not for the lease).
	require.NoError(t, procstop.Stop(ctx, kid.cmd.Process.Pid), "child never stopped")
	// Queued in the pipe: the child reads it the moment it runs again.
	kid.send(t, "write")

	// Woken by the lease's expiry, not by its release: the holder is frozen.
	lease, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{
		Resource: "artifact:" + pausedArtifact, Owner: "successor", TTL: time.Minute, Wait: true})
	require.NoError(t, err)
	assert.Greater(t, lease.Token, oldToken, "the successor's token is newer")
	after, err := ws.Artifacts().Update(ctx, workspace.Write{Actor: "successor", Fence: lease.Token},
		workspace.ByName(pausedArtifact), workspace.ArtifactChange{Content: []byte("successor's version")})
	require.NoError(t, err)

	require.NoError(t, syscall.Kill(kid.cmd.Process.Pid, syscall.SIGCONT))
	thawed = true
	assert.Equal(t, "stale-fence", kid.expect(t, ctx, "fenced update "), "a late write with the old token")
	assert.Equal(t, "stale-fence", kid.expect(t, ctx, "fenced batch "), "a late batch with the old token")
	assert.Equal(t, "locked", kid.expect(t, ctx, "unfenced update "), "a late write without a token")
	assert.Equal(t, "lost", kid.expect(t, ctx, "renew "), "renewing the lost lease")
	kid.wait(t, ctx)

	got, err := ws.Artifacts().Get(ctx, workspace.ByName(pausedArtifact))
	require.NoError(t, err)
	assert.Equal(t, after.Version, got.Version, "nothing was written after the successor")
	assert.Equal(t, "successor's version", string(got.Content))
	held, err := ws.Locks().Get(ctx, "artifact:"+pausedArtifact)
	require.NoError(t, err)
	assert.Equal(t, "successor", held.Owner, "the late batch released nothing")
	assert.Equal(t, lease.Token, held.Token)
}

// pausedHolderChild takes the lease, writes under it, says "leased TOKEN",
// and on "write" tries its late writes, saying how each ended.
func pausedHolderChild(t *testing.T, dsn, _ string, in *bufio.Scanner, say func(string, ...any)) {
	ctx := testCtx(t)
	ws := open(t, dsn)
	lease, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{
		Resource: "artifact:" + pausedArtifact, Owner: pausedActor, TTL: pausedTTL})
	require.NoError(t, err)
	_, err = ws.Artifacts().Update(ctx, workspace.Write{Actor: pausedActor, Fence: lease.Token},
		workspace.ByName(pausedArtifact), workspace.ArtifactChange{Content: []byte("holder's version")})
	require.NoError(t, err)
	say("wrote")
	say("leased %d", lease.Token)
	cmd, err := readLine(in)
	require.NoError(t, err)
	require.Equal(t, "write", cmd)

	_, err = ws.Artifacts().Update(ctx, workspace.Write{Actor: pausedActor, Fence: lease.Token},
		workspace.ByName(pausedArtifact), workspace.ArtifactChange{Content: []byte("late")})
	say("fenced update %s", fenceOutcome(err))
	_, err = ws.Commit(ctx, workspace.Batch{Actor: pausedActor, Ops: []workspace.Op{
		workspace.UpdateArtifactOp{Ref: workspace.ByName(pausedArtifact),
			Change: workspace.ArtifactChange{Content: []byte("late batch")}, Cond: workspace.Cond{Fence: lease.Token}},
		workspace.ReleaseLockOp{Resource: "artifact:" + pausedArtifact, Token: lease.Token},
	}})
	say("fenced batch %s", fenceOutcome(err))
	_, err = ws.Artifacts().Update(ctx, workspace.Write{Actor: pausedActor},
		workspace.ByName(pausedArtifact), workspace.ArtifactChange{Content: []byte("late, unfenced")})
	say("unfenced update %s", fenceOutcome(err))
	_, err = ws.Locks().Renew(ctx, lease, pausedTTL)
	say("renew %s", fenceOutcome(err))
}

// fenceOutcome names err's class for a child's report.
func fenceOutcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, workspace.ErrStaleFence):
		return "stale-fence"
	case errors.Is(err, workspace.ErrLocked):
		return "locked"
	case errors.Is(err, workspace.ErrLockLost):
		return "lost"
	case errors.Is(err, workspace.ErrNotHolder):
		return "not-holder"
	case errors.Is(err, workspace.ErrConflict):
		return "conflict"
	}
	return "error: " + err.Error()
}

//go:build unix

package conformance

import (
	"bufio"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/procstop"
	"github.com/agentspace/agentspace/workspace"
)

const (
	roleStoppedAgent = "stopped-agent"
	stoppedArtifact  = "zombie/report.md"
	stoppedNewFile   = "zombie/new.md" // no artifact has this name: the child creates it late
	stoppedActor     = "zombie"
)

// testStoppedAgentIsFencedOut: a child process claims a task, takes the
// lock of an artifact and writes under it, takes the lock of a name no
// artifact has yet, and is frozen (SIGSTOP) holding all three, long before
// any would lapse. An operator stops it (StopActorOp) and another agent
// claims the task at once. Thawed (SIGCONT), the child carries on: its
// fenced update and batch, and its fenced create of the new file alone and
// in a batch, fail with ErrStaleFence, its heartbeat with ErrLockLost, its
// completion with ErrNotHolder; the new file does not exist and the log
// holds nothing by it after the stop.
func testStoppedAgentIsFencedOut(t *testing.T, h Harness) {
	ctx := caseCtx(t, 90*time.Second)
	dsn, ws := fresh(t, h)
	_, err := ws.Artifacts().Create(ctx, as("setup"), workspace.NewArtifact{Name: stoppedArtifact, Content: []byte("draft")})
	require.NoError(t, err)
	task, err := ws.Tasks().Create(ctx, as("setup"), workspace.NewTask{Title: "write the report", Labels: map[string]string{"only": "stop"}})
	require.NoError(t, err)

	kid := startRelChild(t, ctx, subtestPattern(t), roleStoppedAgent, "stopped", dsn, "", 80*time.Second)
	held := strings.Fields(kid.expect(t, ctx, "holding "))
	require.Len(t, held, 3)
	require.Equal(t, task.ID, held[0])
	thawed := false
	defer func() {
		if !thawed {
			_ = syscall.Kill(kid.cmd.Process.Pid, syscall.SIGCONT)
		}
	}()
	require.NoError(t, procstop.Stop(ctx, kid.cmd.Process.Pid), "child never stopped")
	kid.send(t, "write")

	r, err := ws.Commit(ctx, workspace.Batch{Actor: "operator", Ops: []workspace.Op{
		workspace.StopActorOp{Actor: stoppedActor, Message: "stuck in a loop"}}})
	require.NoError(t, err)
	require.Len(t, r.Events, 3, "its two leases ended and its claim returned")
	stoppedAt := r.Events[len(r.Events)-1].Seq
	next, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "successor", Lease: time.Hour, Labels: map[string]string{"only": "stop"}})
	require.NoError(t, err)
	assert.Equal(t, task.ID, next.ID, "the task is another's at once, not when its claim would lapse")

	require.NoError(t, syscall.Kill(kid.cmd.Process.Pid, syscall.SIGCONT))
	thawed = true
	assert.Equal(t, "stale-fence", kid.expect(t, ctx, "fenced update "), "a late write with its revoked token")
	assert.Equal(t, "stale-fence", kid.expect(t, ctx, "fenced batch "), "a late batch with its revoked token")
	assert.Equal(t, "stale-fence", kid.expect(t, ctx, "fenced create "), "a late create of a new file with its revoked token")
	assert.Equal(t, "stale-fence", kid.expect(t, ctx, "fenced batch create "), "a late batch creating a new file with its revoked token")
	assert.Equal(t, "lost", kid.expect(t, ctx, "heartbeat "), "a heartbeat on its returned claim")
	assert.Equal(t, "not-holder", kid.expect(t, ctx, "complete "), "completing the task another holds")
	kid.wait(t, ctx)

	got, err := ws.Artifacts().Get(ctx, workspace.ByName(stoppedArtifact))
	require.NoError(t, err)
	assert.Equal(t, "holder's version", string(got.Content), "nothing it wrote after the stop is stored")
	_, err = ws.Artifacts().Get(ctx, workspace.ByName(stoppedNewFile))
	assert.ErrorIs(t, err, workspace.ErrNotFound, "the new file it created after the stop is not stored")
	cur, err := ws.Tasks().Get(ctx, task.ID)
	require.NoError(t, err)
	assert.Equal(t, "successor", cur.Assignee)
	assert.Equal(t, workspace.TaskInProgress, cur.Status)
	late, err := ws.Events().Read(ctx, workspace.EventQuery{AfterSeq: stoppedAt, Actor: stoppedActor})
	require.NoError(t, err)
	assert.Empty(t, late.Events, "the log holds nothing by it after the stop")
}

// stoppedAgentChild claims the task, takes the artifact's lock and the new
// file's for an hour, writes under the first, says "holding TASK TOKEN
// NEWTOKEN", and on "write" carries on as if nothing happened, saying how
// each late call ended.
func stoppedAgentChild(t *testing.T, dsn, _ string, in *bufio.Scanner, say func(string, ...any)) {
	ctx := testCtx(t)
	ws := open(t, dsn)
	task, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: stoppedActor, Lease: time.Hour, Labels: map[string]string{"only": "stop"}})
	require.NoError(t, err)
	lease, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{
		Resource: workspace.ArtifactResource(stoppedArtifact), Owner: stoppedActor, TTL: time.Hour})
	require.NoError(t, err)
	fenced := workspace.Write{Actor: stoppedActor, Fence: lease.Token}
	_, err = ws.Artifacts().Update(ctx, fenced, workspace.ByName(stoppedArtifact), workspace.ArtifactChange{Content: []byte("holder's version")})
	require.NoError(t, err)
	newLease, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{
		Resource: workspace.ArtifactResource(stoppedNewFile), Owner: stoppedActor, TTL: time.Hour})
	require.NoError(t, err)
	say("holding %s %d %d", task.ID, lease.Token, newLease.Token)
	cmd, err := readLine(in)
	require.NoError(t, err)
	require.Equal(t, "write", cmd)

	_, err = ws.Artifacts().Update(ctx, fenced, workspace.ByName(stoppedArtifact), workspace.ArtifactChange{Content: []byte("late")})
	say("fenced update %s", fenceOutcome(err))
	_, err = ws.Commit(ctx, workspace.Batch{Actor: stoppedActor, Ops: []workspace.Op{
		workspace.UpdateArtifactOp{Ref: workspace.ByName(stoppedArtifact),
			Change: workspace.ArtifactChange{Content: []byte("late batch")}, Cond: workspace.Cond{Fence: lease.Token}},
		workspace.ReleaseLockOp{Resource: lease.Resource, Token: lease.Token},
	}})
	say("fenced batch %s", fenceOutcome(err))
	_, err = ws.Artifacts().Create(ctx, workspace.Write{Actor: stoppedActor, Fence: newLease.Token},
		workspace.NewArtifact{Name: stoppedNewFile, Content: []byte("late")})
	say("fenced create %s", fenceOutcome(err))
	_, err = ws.Commit(ctx, workspace.Batch{Actor: stoppedActor, Ops: []workspace.Op{
		workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: stoppedNewFile, Content: []byte("late batch")}, Fence: newLease.Token},
		workspace.ReleaseLockOp{Resource: newLease.Resource, Token: newLease.Token},
	}})
	say("fenced batch create %s", fenceOutcome(err))
	_, err = ws.Tasks().Heartbeat(ctx, as(stoppedActor), task.ID, time.Hour)
	say("heartbeat %s", fenceOutcome(err))
	_, err = ws.Tasks().Complete(ctx, as(stoppedActor), task.ID, workspace.TaskResult{Summary: "late"})
	say("complete %s", fenceOutcome(err))
}

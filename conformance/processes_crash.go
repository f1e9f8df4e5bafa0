package conformance

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// testKilledProcess: a child takes a lease and claims the only task, then
// is killed with SIGKILL. Nobody cleans up, yet once their TTLs pass a
// waiting survivor gets both: the task (its second attempt, after a
// task.released) and the lease (the next token, after a lock.expired).
func testKilledProcess(t *testing.T, h Harness) {
	const ttlMillis = 300
	ctx := caseCtx(t, 60*time.Second)
	dsn, ws := fresh(t, h)
	orphan, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "setup"}, workspace.NewTask{Title: "orphan"})
	require.NoError(t, err)

	c := startChild(t, ctx, dsn, roleHold, "doomed", ttlMillis, time.Now().Add(45*time.Second))
	select {
	case <-c.ready:
	case <-c.done:
		require.Fail(t, "child ended before it was ready", "%v\n%s", c.err, c.describe())
	case <-ctx.Done():
		require.Fail(t, "child never became ready", c.describe())
	}
	_, err = io.WriteString(c.stdin, "go\n")
	require.NoError(t, err)
	var (
		token  int64
		taskID string
	)
	select {
	case line := <-c.said:
		_, err := fmt.Sscanf(line, "holding %d %s", &token, &taskID)
		require.NoError(t, err, "child said %q", line)
	case <-c.done:
		require.Fail(t, "child ended before it held anything", "%v\n%s", c.err, c.describe())
	case <-ctx.Done():
		require.Fail(t, "child never held anything", c.describe())
	}
	require.Equal(t, orphan.ID, taskID)
	require.NoError(t, c.cmd.Process.Kill())
	<-c.done
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)

	task, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "survivor", Lease: time.Minute, Wait: true})
	require.NoError(t, err, "a waiting claimer gets the task once the dead claimer's lease lapses")
	assert.Equal(t, orphan.ID, task.ID)
	assert.Equal(t, 2, task.Attempts, "the lapsed claim counts as an attempt")
	assert.Equal(t, "survivor", task.Assignee)

	lease, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: holdResource, Owner: "survivor", TTL: time.Minute, Wait: true})
	require.NoError(t, err, "a waiting acquirer gets the lease once the dead holder's TTL passes")
	assert.Equal(t, token+1, lease.Token, "the fencing token moves past the dead holder's")

	var types []string
	for _, ev := range readAll(t, ws, workspace.EventQuery{AfterSeq: head}) {
		types = append(types, ev.Type)
		assert.Equal(t, "survivor", ev.Actor, "seq %d (%s): the taker-over writes the expiry", ev.Seq, ev.Type)
	}
	assert.Equal(t, []string{
		workspace.EventTaskReleased, workspace.EventTaskClaimed,
		workspace.EventLockExpired, workspace.EventLockAcquired,
	}, types)
}

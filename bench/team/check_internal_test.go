package team

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

// TestTheClaimCheckAllowsAClaimAfterTheLeaseOnly: two agents acknowledged
// the same task's claim; within the first's lease that is a double claim,
// after it (a done that failed, the lease lapsed) it is not. The log's
// version of the check sees the same in task.claimed events.
func TestTheClaimCheckAllowsAClaimAfterTheLeaseOnly(t *testing.T) {
	ctx := t.Context()
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	require.NoError(t, err)
	defer ws.Close()
	task, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "x"}, workspace.NewTask{Title: "t", Labels: taskLabels("r1")})
	require.NoError(t, err)
	m := meta{Run: "r1"}
	t0 := time.Now()
	claim := func(agent int, at time.Time) Record {
		return Record{Agent: agent, Op: OpClaim, Key: task.ID, Start: at.UnixNano(), End: at.Add(time.Millisecond).UnixNano()}
	}
	check := func(recs []Record, events []taskEvent) Invariant {
		fol := newFollower(ws, 0)
		fol.tasks = events
		return checkTasks(ctx, ws, m, map[string][]Record{OpClaim: recs}, fol)
	}
	assert.True(t, check([]Record{claim(1, t0), claim(2, t0.Add(claimLease+time.Second))}, nil).OK, "a claim after the lease")
	inv := check([]Record{claim(1, t0), claim(2, t0.Add(time.Second))}, nil)
	assert.False(t, inv.OK, "a claim within the lease")
	assert.Contains(t, inv.Detail, "within the first claim's lease")

	ev := func(seq int64, actor string, at time.Time) taskEvent {
		return taskEvent{Seq: seq, Time: at, Type: workspace.EventTaskClaimed, ID: task.ID, Actor: actor}
	}
	assert.True(t, check(nil, []taskEvent{ev(1, "a", t0), ev(2, "b", t0.Add(claimLease+time.Second))}).OK)
	done := taskEvent{Seq: 2, Time: t0.Add(time.Second), Type: workspace.EventTaskUpdated, ID: task.ID, Actor: "a"}
	assert.True(t, check(nil, []taskEvent{ev(1, "a", t0), done, ev(3, "b", t0.Add(2*time.Second))}).OK, "claimed again after its done")
	inv = check(nil, []taskEvent{ev(1, "a", t0), ev(2, "b", t0.Add(time.Second))})
	assert.False(t, inv.OK)
	assert.Contains(t, inv.Detail, "while a's claim")
}

package conformance

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// claimOnly claims the task carrying the label only=id, so a test can put a
// chosen task in progress whatever else is ready.
func claimOnly(t testing.TB, ws *workspace.Workspace, actor, tag string, lease time.Duration) workspace.Task {
	t.Helper()
	task, err := ws.Tasks().Claim(testCtx(t), workspace.ClaimRequest{Actor: actor, Lease: lease, Labels: map[string]string{"only": tag}})
	require.NoError(t, err)
	return task
}

// testTaskCreateGet: a new task is pending at version 1, its references must
// exist, and another handle reads it back.
func testTaskCreateGet(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	parent, err := ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "epic"})
	require.NoError(t, err)
	dep, err := ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "schema"})
	require.NoError(t, err)
	task, err := ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{
		Title: "api", Description: "write the API\nin Go", ParentID: parent.ID, DependsOn: []string{dep.ID},
		Priority: 7, Labels: map[string]string{"area": "auth"}, Assignee: "coder",
	})
	require.NoError(t, err)
	assert.Len(t, task.ID, 36)
	assert.Equal(t, workspace.TaskPending, task.Status)
	assert.Equal(t, int64(1), task.Version)
	assert.Equal(t, 0, task.Attempts)
	assert.Equal(t, "lead", task.CreatedBy)

	got, err := ws2.Tasks().Get(ctx, task.ID)
	require.NoError(t, err)
	assert.Equal(t, task.ID, got.ID)
	assert.Equal(t, "api", got.Title)
	assert.Equal(t, "write the API\nin Go", got.Description)
	assert.Equal(t, parent.ID, got.ParentID)
	assert.Equal(t, []string{dep.ID}, got.DependsOn)
	assert.Equal(t, 7, got.Priority)
	assert.Equal(t, map[string]string{"area": "auth"}, got.Labels)
	assert.Equal(t, "coder", got.Assignee)
	assert.Equal(t, workspace.TaskPending, got.Status)
	assert.Equal(t, int64(1), got.Version)
	assertSameTime(t, task.CreatedAt, got.CreatedAt, "CreatedAt")

	missing := "01900000-0000-7000-8000-000000000000"
	before := snap(t, ws1)
	_, err = ws2.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "x", DependsOn: []string{missing}})
	assert.ErrorIs(t, err, workspace.ErrNotFound, "an unknown dependency")
	_, err = ws2.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "x", ParentID: missing})
	assert.ErrorIs(t, err, workspace.ErrNotFound, "an unknown parent")
	_, err = ws2.Tasks().Get(ctx, missing)
	assert.ErrorIs(t, err, workspace.ErrNotFound)
	_, err = ws2.Tasks().Update(ctx, as("lead"), missing, workspace.TaskChange{Title: ptr("y")})
	assert.ErrorIs(t, err, workspace.ErrNotFound)
	assert.Equal(t, before, snap(t, ws1))

	up, err := ws2.Tasks().Update(ctx, asAt("lead", 1), task.ID, workspace.TaskChange{Title: ptr("api v2"), Priority: ptr(9)})
	require.NoError(t, err)
	assert.Equal(t, int64(2), up.Version)
	assert.Equal(t, "api v2", up.Title)
	assert.Equal(t, 9, up.Priority)
	_, err = ws1.Tasks().Update(ctx, asAt("lead", 1), task.ID, workspace.TaskChange{Title: ptr("lost")})
	var ce *workspace.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, int64(2), ce.Current)
}

// testTaskStateMachine walks every pair of distinct statuses: the documented
// transitions succeed, the rest are ErrInvalid (ErrNotHolder for finishing
// a pending task, which nobody holds) and change nothing.
func testTaskStateMachine(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	const actor = "agent"
	// reach puts a new task into status s.
	reach := func(tag string, s workspace.TaskStatus) workspace.Task {
		task, err := ws.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: tag, Labels: map[string]string{"only": tag}})
		require.NoError(t, err)
		switch s {
		case workspace.TaskPending:
			return task
		case workspace.TaskBlocked, workspace.TaskCancelled:
			task, err = ws.Tasks().Update(ctx, as(actor), task.ID, workspace.TaskChange{Status: ptr(s)})
			require.NoError(t, err)
			return task
		}
		task = claimOnly(t, ws, actor, tag, time.Minute)
		switch s {
		case workspace.TaskDone:
			task, err = ws.Tasks().Complete(ctx, as(actor), task.ID, workspace.TaskResult{Summary: "ok"})
		case workspace.TaskFailed:
			task, err = ws.Tasks().Fail(ctx, as(actor), task.ID, workspace.TaskResult{Summary: "no"})
		}
		require.NoError(t, err)
		require.Equal(t, s, task.Status)
		return task
	}
	allowed := map[[2]workspace.TaskStatus]bool{
		{"pending", "blocked"}: true, {"pending", "cancelled"}: true,
		{"in_progress", "done"}: true, {"in_progress", "failed"}: true, {"in_progress", "pending"}: true,
		{"in_progress", "blocked"}: true, {"in_progress", "cancelled"}: true,
		{"blocked", "pending"}: true, {"blocked", "cancelled"}: true,
		{"failed", "pending"}: true, {"failed", "cancelled"}: true,
	}
	all := []workspace.TaskStatus{workspace.TaskPending, workspace.TaskInProgress, workspace.TaskBlocked, workspace.TaskDone, workspace.TaskFailed, workspace.TaskCancelled}
	n := 0
	for _, from := range all {
		for _, to := range all {
			if from == to {
				continue
			}
			n++
			tag := fmt.Sprintf("%s-%s", from, to)
			task := reach(tag, from)
			before := headOf(t, ws)
			got, err := ws.Tasks().Update(ctx, as(actor), task.ID, workspace.TaskChange{Status: ptr(to)})
			if allowed[[2]workspace.TaskStatus{from, to}] {
				require.NoError(t, err, "%s -> %s is allowed", from, to)
				assert.Equal(t, to, got.Status, tag)
				assert.Equal(t, task.Version+1, got.Version, tag)
				stored, err := ws.Tasks().Get(ctx, task.ID)
				require.NoError(t, err)
				assert.Equal(t, to, stored.Status, tag)
				if from == workspace.TaskInProgress && to == workspace.TaskPending {
					assert.Empty(t, stored.Assignee, "a released task has no assignee")
				}
				continue
			}
			want := workspace.ErrInvalid
			if from == workspace.TaskPending && (to == workspace.TaskDone || to == workspace.TaskFailed) {
				want = workspace.ErrNotHolder // finishing takes the claim a pending task lacks
			}
			assert.ErrorIs(t, err, want, "%s -> %s is not allowed", from, to)
			stored, err := ws.Tasks().Get(ctx, task.ID)
			require.NoError(t, err)
			assert.Equal(t, from, stored.Status, tag)
			assert.Equal(t, task.Version, stored.Version, tag)
			assert.Equal(t, before, headOf(t, ws), "%s: a refused transition writes no event", tag)
		}
	}
	assert.Equal(t, 30, n)
}

// testTaskClaimOrder: Claim takes the highest priority, then the oldest,
// never one with an undone dependency, never one not pending; ErrNoTask
// when nothing is ready.
func testTaskClaimOrder(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	mk := func(title string, prio int, deps ...string) workspace.Task {
		task, err := ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: title, Priority: prio, DependsOn: deps})
		require.NoError(t, err)
		return task
	}
	low := mk("low", 0)
	dep := mk("dep", -1)
	high1 := mk("high1", 5)
	top := mk("top", 10, dep.ID)
	mid := mk("mid", 3)
	high2 := mk("high2", 5)
	blocked := mk("blocked", 100)
	_, err := ws1.Tasks().Update(ctx, as("lead"), blocked.ID, workspace.TaskChange{Status: ptr(workspace.TaskBlocked)})
	require.NoError(t, err)
	cancelled := mk("cancelled", 100)
	_, err = ws1.Tasks().Update(ctx, as("lead"), cancelled.ID, workspace.TaskChange{Status: ptr(workspace.TaskCancelled)})
	require.NoError(t, err)
	afterCancelled := mk("after-cancelled", 100, cancelled.ID)

	handles := []*workspace.Workspace{ws1, ws2}
	for i, want := range []workspace.Task{high1, high2, mid, low, dep} {
		before := headOf(t, ws1)
		got, err := handles[i%2].Tasks().Claim(ctx, workspace.ClaimRequest{Actor: fmt.Sprintf("agent%d", i), Lease: time.Minute})
		require.NoError(t, err, "claim %d", i)
		assert.Equal(t, want.Title, got.Title, "claim %d", i)
		assert.Equal(t, workspace.TaskInProgress, got.Status)
		assert.Equal(t, fmt.Sprintf("agent%d", i), got.Assignee)
		assert.Equal(t, 1, got.Attempts)
		assert.Equal(t, want.Version+1, got.Version)
		assert.True(t, got.LeaseExpiresAt.After(got.UpdatedAt), "a claim carries a lease")
		evs := eventsAfter(t, ws1, before)
		require.Len(t, evs, 1)
		assert.Equal(t, workspace.EventTaskClaimed, evs[0].Type)
		assert.Equal(t, got.ID, evs[0].Subject.ID)
		assert.Equal(t, got.Assignee, evs[0].Actor)
	}

	before := snap(t, ws1)
	_, err = ws2.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "late"})
	require.ErrorIs(t, err, workspace.ErrNoTask, "top waits for dep; blocked, cancelled and their dependents are never ready")
	assert.Equal(t, before, snap(t, ws1), "ErrNoTask writes nothing")

	_, err = ws1.Tasks().Complete(ctx, as("agent4"), dep.ID, workspace.TaskResult{})
	require.NoError(t, err)
	got, err := ws2.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "late"})
	require.NoError(t, err)
	assert.Equal(t, top.ID, got.ID, "a task is ready once its dependencies are done")
	_, err = ws2.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "late"})
	require.ErrorIs(t, err, workspace.ErrNoTask)
	stored, err := ws1.Tasks().Get(ctx, afterCancelled.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskPending, stored.Status)
}

// testTaskClaimFilters: a claim restricted by labels or parent takes only
// matching tasks.
func testTaskClaimFilters(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	epic, err := ws.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "epic", Labels: map[string]string{"role": "none"}})
	require.NoError(t, err)
	sub, err := ws.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "sub", ParentID: epic.ID, Labels: map[string]string{"role": "none"}})
	require.NoError(t, err)
	rev, err := ws.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "review", Priority: -5, Labels: map[string]string{"role": "reviewer", "lang": "go"}})
	require.NoError(t, err)

	got, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "r", Labels: map[string]string{"role": "reviewer", "lang": "go"}})
	require.NoError(t, err)
	assert.Equal(t, rev.ID, got.ID)
	_, err = ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "r", Labels: map[string]string{"role": "reviewer"}})
	assert.ErrorIs(t, err, workspace.ErrNoTask)
	got, err = ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "w", ParentID: epic.ID})
	require.NoError(t, err)
	assert.Equal(t, sub.ID, got.ID)
	_, err = ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "w", ParentID: epic.ID})
	assert.ErrorIs(t, err, workspace.ErrNoTask)
}

// testTaskClaimLeaseExpiry: a claim that is not heartbeaten lapses; the task
// goes to the next claimer (Attempts counts), and the first claimer has lost it.
func testTaskClaimLeaseExpiry(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	task, err := ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "flaky"})
	require.NoError(t, err)
	first, err := ws1.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "crashy", Lease: 50 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, task.ID, first.ID)
	before := headOf(t, ws1)

	var second workspace.Task
	waitFor(t, "the lapsed claim to be claimable", func() bool {
		got, err := ws2.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "steady", Lease: time.Minute})
		if err != nil {
			require.ErrorIs(t, err, workspace.ErrNoTask)
			return false
		}
		second = got
		return true
	})
	assert.Equal(t, task.ID, second.ID)
	assert.Equal(t, "steady", second.Assignee)
	assert.Equal(t, 2, second.Attempts, "Attempts counts the claims")
	evs := eventsAfter(t, ws1, before)
	assert.Equal(t, []string{workspace.EventTaskReleased, workspace.EventTaskClaimed}, types(evs), "the lapse is recorded before the new claim")

	_, err = ws1.Tasks().Heartbeat(ctx, as("crashy"), task.ID, time.Minute)
	assert.ErrorIs(t, err, workspace.ErrLockLost)
	_, err = ws1.Tasks().Complete(ctx, as("crashy"), task.ID, workspace.TaskResult{})
	assert.ErrorIs(t, err, workspace.ErrNotHolder)
	done, err := ws2.Tasks().Complete(ctx, as("steady"), task.ID, workspace.TaskResult{Summary: "done"})
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskDone, done.Status)
}

// testTaskHeartbeatExtends: a heartbeat moves the lease forward, so the task
// is not lost at the first deadline; a lapsed claimer's heartbeat is refused.
func testTaskHeartbeatExtends(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	_, err := ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "long"})
	require.NoError(t, err)
	var claimed, beat workspace.Task
	// The heartbeat must come before the first lease ends; on a machine too
	// busy for that, try again with a longer one.
	for lease := time.Second; ; lease *= 2 {
		claimed, err = ws1.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "worker", Lease: lease})
		require.NoError(t, err)
		beat, err = ws1.Tasks().Heartbeat(ctx, as("worker"), claimed.ID, time.Hour)
		if err == nil || lease > 8*time.Second {
			break
		}
		require.ErrorIs(t, err, workspace.ErrLockLost)
	}
	require.NoError(t, err)
	assert.True(t, beat.LeaseExpiresAt.After(claimed.LeaseExpiresAt))
	assert.Equal(t, workspace.TaskInProgress, beat.Status)
	assert.Equal(t, claimed.Attempts, beat.Attempts)

	sleepPast(claimed.LeaseExpiresAt)
	_, err = ws2.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "thief"})
	assert.ErrorIs(t, err, workspace.ErrNoTask, "the heartbeat kept the claim")
	_, err = ws2.Tasks().Heartbeat(ctx, as("thief"), claimed.ID, time.Hour)
	assert.Error(t, err, "only the assignee heartbeats")
	assert.True(t, isAny(err, workspace.ErrLockLost, workspace.ErrNotHolder), "got %v", err)

	// A short heartbeat lets it lapse; then the claimer has lost it.
	brief, err := ws1.Tasks().Heartbeat(ctx, as("worker"), claimed.ID, 20*time.Millisecond)
	require.NoError(t, err)
	sleepPast(brief.LeaseExpiresAt)
	_, err = ws1.Tasks().Heartbeat(ctx, as("worker"), claimed.ID, time.Hour)
	assert.ErrorIs(t, err, workspace.ErrLockLost, "a heartbeat after the lease lapsed")
	_, err = ws1.Tasks().Complete(ctx, as("worker"), claimed.ID, workspace.TaskResult{})
	assert.ErrorIs(t, err, workspace.ErrLockLost, "completing a lapsed claim")
}

// testTaskOnlyAssigneeFinishes: while a claim is live, only its assignee
// completes, fails or releases it; anyone may cancel it.
func testTaskOnlyAssigneeFinishes(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	for _, tag := range []string{"a", "b"} {
		_, err := ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: tag, Labels: map[string]string{"only": tag}})
		require.NoError(t, err)
	}
	a := claimOnly(t, ws1, "owner", "a", time.Minute)
	before := snap(t, ws1)
	for name, call := range map[string]func() (workspace.Task, error){
		"complete": func() (workspace.Task, error) {
			return ws2.Tasks().Complete(ctx, as("other"), a.ID, workspace.TaskResult{Summary: "mine"})
		},
		"fail": func() (workspace.Task, error) {
			return ws2.Tasks().Fail(ctx, as("other"), a.ID, workspace.TaskResult{})
		},
		"release": func() (workspace.Task, error) { return ws2.Tasks().Release(ctx, as("other"), a.ID) },
		"block": func() (workspace.Task, error) {
			return ws2.Tasks().Update(ctx, as("other"), a.ID, workspace.TaskChange{Status: ptr(workspace.TaskBlocked)})
		},
	} {
		_, err := call()
		assert.ErrorIs(t, err, workspace.ErrNotHolder, name)
	}
	assert.Equal(t, before, snap(t, ws1), "refused finishes write nothing")

	res := workspace.TaskResult{Summary: "shipped", Artifacts: []string{"src/api.go"}}
	done, err := ws1.Tasks().Complete(ctx, as("owner"), a.ID, res)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskDone, done.Status)
	got, err := ws2.Tasks().Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, res, got.Result)
	assert.Equal(t, "owner", got.Assignee)
	assert.Equal(t, workspace.TaskDone, got.Status)

	b := claimOnly(t, ws1, "owner", "b", time.Minute)
	c, err := ws2.Tasks().Update(ctx, as("lead"), b.ID, workspace.TaskChange{Status: ptr(workspace.TaskCancelled)})
	require.NoError(t, err, "cancellation is open to anyone")
	assert.Equal(t, workspace.TaskCancelled, c.Status)
	_, err = ws1.Tasks().Complete(ctx, as("owner"), b.ID, workspace.TaskResult{})
	assert.ErrorIs(t, err, workspace.ErrInvalid, "a cancelled task is final")
}

// testTaskRelease: a released task is pending again, unassigned, and the
// next claim counts a second attempt.
func testTaskRelease(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	_, err := ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "t"})
	require.NoError(t, err)
	c, err := ws1.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "a"})
	require.NoError(t, err)
	before := headOf(t, ws1)
	r, err := ws1.Tasks().Release(ctx, as("a"), c.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskPending, r.Status)
	assert.Empty(t, r.Assignee)
	evs := eventsAfter(t, ws1, before)
	require.Len(t, evs, 1)
	assert.Equal(t, workspace.EventTaskReleased, evs[0].Type)

	c2, err := ws2.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "b"})
	require.NoError(t, err)
	assert.Equal(t, c.ID, c2.ID)
	assert.Equal(t, 2, c2.Attempts)
	_, err = ws1.Tasks().Release(ctx, as("a"), c.ID)
	assert.ErrorIs(t, err, workspace.ErrNotHolder)
	f, err := ws2.Tasks().Fail(ctx, as("b"), c.ID, workspace.TaskResult{Summary: "broke"})
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskFailed, f.Status)
	_, err = ws1.Tasks().Update(ctx, as("lead"), c.ID, workspace.TaskChange{Status: ptr(workspace.TaskPending)})
	require.NoError(t, err, "a failed task may be retried")
	c3, err := ws1.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "a"})
	require.NoError(t, err)
	assert.Equal(t, 3, c3.Attempts)
}

// testTaskClaimWait: a waiting claim on one handle is woken by a task created
// on another, and gives up when its context ends.
func testTaskClaimWait(t *testing.T, h Harness) {
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)

	short, cancel := context.WithTimeout(testCtx(t), 250*time.Millisecond)
	defer cancel()
	_, err := ws1.Tasks().Claim(short, workspace.ClaimRequest{Actor: "idle", Wait: true})
	assert.ErrorIs(t, err, context.DeadlineExceeded, "a wait ends with its context")

	ctx := testCtx(t)
	waiter := goCall(t, func() (workspace.Task, error) {
		return ws1.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "waiter", Wait: true, Lease: time.Minute})
	})
	_, err = ws2.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "probe"})
	require.ErrorIs(t, err, workspace.ErrNoTask)
	time.Sleep(20 * time.Millisecond) // let the waiter block; correctness does not depend on it
	notYet(t, waiter, "a waiting claim with no task")
	task, err := ws2.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "arrives"})
	require.NoError(t, err)
	got, err := recv(t, waiter)
	require.NoError(t, err)
	assert.Equal(t, task.ID, got.ID)
	assert.Equal(t, "waiter", got.Assignee)
}

// testTaskList: List filters by status, assignee, parent and labels, each
// alone and together, and pages in creation order.
func testTaskList(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	ws2 := open(t, dsn)
	epic, err := ws.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "epic", Priority: -1})
	require.NoError(t, err)
	ids := []string{epic.ID}
	var subs []string
	for i := range 12 {
		nt := workspace.NewTask{Title: fmt.Sprintf("t%02d", i), Priority: -1}
		if i%3 == 0 {
			nt.ParentID = epic.ID
		}
		if i%2 == 0 {
			nt.Labels = map[string]string{"even": "yes"}
		}
		task, err := ws.Tasks().Create(ctx, as("lead"), nt)
		require.NoError(t, err)
		ids = append(ids, task.ID)
		if i%3 == 0 {
			subs = append(subs, task.ID)
		}
	}
	hot, err := ws.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "hot", Priority: 9})
	require.NoError(t, err)
	ids = append(ids, hot.ID)
	_, err = ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "w"})
	require.NoError(t, err)

	list := func(f workspace.TaskFilter) []string {
		var out []string
		for pages := 0; ; pages++ {
			require.Less(t, pages, 100)
			page, err := ws2.Tasks().List(ctx, f)
			require.NoError(t, err)
			for _, task := range page.Tasks {
				out = append(out, task.ID)
			}
			if page.Next == "" {
				return out
			}
			f.After = page.Next
		}
	}
	for _, limit := range []int{0, 1, 4, 14} {
		assert.Equal(t, ids, list(workspace.TaskFilter{Limit: limit}), "all, limit %d", limit)
	}
	assert.Equal(t, subs, list(workspace.TaskFilter{ParentID: epic.ID, Limit: 2}))
	assert.Equal(t, []string{hot.ID}, list(workspace.TaskFilter{Status: workspace.TaskInProgress}))
	assert.Equal(t, []string{hot.ID}, list(workspace.TaskFilter{Assignee: "w"}))
	assert.Len(t, list(workspace.TaskFilter{Status: workspace.TaskPending, Limit: 5}), 13)
	assert.Len(t, list(workspace.TaskFilter{Labels: map[string]string{"even": "yes"}, Limit: 5}), 6)
	assert.Empty(t, list(workspace.TaskFilter{Status: workspace.TaskDone}))
	// Filters together: each task matches them all.
	assert.Equal(t, subs, list(workspace.TaskFilter{Status: workspace.TaskPending, ParentID: epic.ID, Limit: 3}))
	assert.Equal(t, []string{subs[0], subs[2]}, list(workspace.TaskFilter{Status: workspace.TaskPending, ParentID: epic.ID,
		Labels: map[string]string{"even": "yes"}}))
	assert.Equal(t, []string{hot.ID}, list(workspace.TaskFilter{Status: workspace.TaskInProgress, Assignee: "w"}))
	assert.Empty(t, list(workspace.TaskFilter{Status: workspace.TaskPending, Assignee: "w"}))
	assert.Empty(t, list(workspace.TaskFilter{Assignee: "w", ParentID: epic.ID}))
}

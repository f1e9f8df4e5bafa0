package gitwork_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/gitwork"
	"github.com/agentspace/agentspace/workspace"
)

func TestMergeQueueMergesInSubmissionOrderAndNamesConflicts(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{gitwork.ModeRebase, gitwork.ModeMerge} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			repo, ws := newRepo(t), openWS(t)
			m := newManager(t, ws, gitwork.Config{Repo: repo, Mode: mode, Validate: []string{"test -f a.txt"}})
			first := work(t, m, ws, "ann", "t1", map[string]string{"one.txt": "1\n", "shared.txt": "ONE\ntwo\nthree\n"})
			second := work(t, m, ws, "bob", "t2", map[string]string{"two.txt": "2\n"})
			clash := work(t, m, ws, "cat", "t3", map[string]string{"shared.txt": "uno\ntwo\nthree\n"})
			fourth := work(t, m, ws, "dan", "t4", map[string]string{"four.txt": "4\n"})

			var got []gitwork.Result
			require.NoError(t, m.NewMerger("merger").Run(ctx, false, func(r gitwork.Result) { got = append(got, r) }))
			require.Len(t, got, 4)
			for i, w := range []gitwork.Worktree{first, second, clash, fourth} {
				assert.Equal(t, w.Task, got[i].Task, "entry %d in submission order", i)
			}
			assert.Equal(t, gitwork.StatusConflicted, got[2].Status)
			assert.Contains(t, got[2].Detail, "shared.txt")
			rec := record(t, ws, clash.Task)
			assert.Equal(t, gitwork.StatusConflicted, rec.Status)
			assert.Contains(t, rec.Detail, "shared.txt", "the record names the conflicting file")
			task, err := ws.Tasks().Get(ctx, clash.Task)
			require.NoError(t, err)
			assert.Equal(t, workspace.TaskInProgress, task.Status, "the conflicted task stays with its agent")
			assert.Equal(t, "cat", task.Assignee)

			subjects := firstParents(t, repo)
			if mode == gitwork.ModeRebase {
				assert.Equal(t, []string{"init", "t1", "t2", "t4"}, subjects)
			} else {
				require.Len(t, subjects, 4)
				assert.Equal(t, "init", subjects[0])
				assert.Equal(t, "t1", subjects[1], "the first fast-forwards")
				assert.Contains(t, subjects[2], "task "+second.Task)
				assert.Contains(t, subjects[3], "task "+fourth.Task)
			}
			for _, w := range []gitwork.Worktree{first, second, fourth} {
				r := record(t, ws, w.Task)
				assert.Equal(t, gitwork.StatusReleased, r.Status)
				assert.NotEmpty(t, r.Merged)
				task, err := ws.Tasks().Get(ctx, w.Task)
				require.NoError(t, err)
				assert.Equal(t, workspace.TaskDone, task.Status)
				_, err = os.Stat(w.Path)
				assert.True(t, os.IsNotExist(err), "merged worktree removed")
			}

			// The agent fixes it on top of main and submits again: it lands.
			gitT(t, clash.Path, "rebase", "-q", "-X", "theirs", "main")
			w, err := m.Submit(ctx, "cat", clash.Task)
			require.NoError(t, err)
			require.NoError(t, m.NewMerger("merger").Run(ctx, false, nil))
			assert.Equal(t, gitwork.StatusReleased, record(t, ws, w.Task).Status)
			assert.Equal(t, "uno\ntwo\nthree", gitT(t, repo, "show", "main:shared.txt"))
		})
	}
}

func TestFailingValidationNeverReachesTheBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo, Validate: []string{"test -f a.txt", "if test -e BAD; then echo found BAD >&2; exit 3; fi"}})
	before := gitT(t, repo, "rev-parse", "main")
	bad := work(t, m, ws, "ann", "bad", map[string]string{"BAD": "x\n"})
	var got []gitwork.Result
	require.NoError(t, m.NewMerger("merger").Run(ctx, false, func(r gitwork.Result) { got = append(got, r) }))
	require.Len(t, got, 1)
	assert.Equal(t, gitwork.StatusFailed, got[0].Status)
	assert.Contains(t, got[0].Detail, "found BAD")
	assert.Contains(t, got[0].Detail, "exit 3")
	assert.Equal(t, before, gitT(t, repo, "rev-parse", "main"), "the integration branch is untouched")
	assert.Equal(t, gitwork.StatusFailed, record(t, ws, bad.Task).Status)
	_, err := os.Stat(bad.Path)
	assert.NoError(t, err, "the worktree stays for its agent")
	task, err := ws.Tasks().Get(ctx, bad.Task)
	require.NoError(t, err)
	assert.Contains(t, task.Result.Summary, "gave this task back (failed): $ if test -e BAD; then echo found BAD >&2; exit 3; fi\nfound BAD\n\nexit 3\nNext: ",
		"the task's result shows the failing command's output, not only its command line")
}

// TestWhyKeepsTheCommandAndTheEndOfItsOutput: a long failure's excerpt
// keeps the failing command and the last lines of its output, cut at a
// line, in about 2 KiB.
func TestWhyKeepsTheCommandAndTheEndOfItsOutput(t *testing.T) {
	var out strings.Builder
	for i := range 500 {
		fmt.Fprintf(&out, "line %d\n", i)
	}
	w := gitwork.Worktree{Detail: "$ go test ./...\n" + out.String() + "FAIL: TestX\nexit 1"}
	why := w.Why()
	assert.LessOrEqual(t, len(why), 2<<10+8)
	assert.True(t, strings.HasPrefix(why, "$ go test ./...\n…\nline "), why)
	assert.True(t, strings.HasSuffix(why, "line 499\nFAIL: TestX\nexit 1"), why)
	assert.Equal(t, "conflicting files: a.txt", gitwork.Worktree{Detail: "conflicting files: a.txt"}.Why())
	long := gitwork.Worktree{Detail: strings.Repeat("x", 3000) + "\nshort tail"}.Why()
	assert.True(t, strings.HasSuffix(long, "…\nshort tail"), "a long first line is cut, a short rest kept whole: %q", long[190:])
}

func TestValidationTimesOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo, Validate: []string{"sleep 30"}, ValidateTimeout: 200e6})
	before := gitT(t, repo, "rev-parse", "main")
	w := work(t, m, ws, "ann", "slow", map[string]string{"s.txt": "s\n"})
	require.NoError(t, m.NewMerger("merger").Run(ctx, false, nil))
	rec := record(t, ws, w.Task)
	assert.Equal(t, gitwork.StatusFailed, rec.Status)
	assert.Contains(t, rec.Detail, "timed out")
	assert.Equal(t, before, gitT(t, repo, "rev-parse", "main"))
}

func TestConflictTaskModeMakesAResolutionTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo, OnConflict: gitwork.OnConflictTask})
	work(t, m, ws, "ann", "t1", map[string]string{"shared.txt": "A\n"})
	clash := work(t, m, ws, "bob", "t2", map[string]string{"shared.txt": "B\n"})
	require.NoError(t, m.NewMerger("merger").Run(ctx, false, nil))
	page, err := ws.Tasks().List(ctx, workspace.TaskFilter{ParentID: clash.Task})
	require.NoError(t, err)
	require.Len(t, page.Tasks, 1)
	assert.Contains(t, page.Tasks[0].Description, "shared.txt")
	assert.Equal(t, []string{"shared.txt"}, page.Tasks[0].Areas)
	assert.Equal(t, workspace.TaskPending, page.Tasks[0].Status)
}

// TestHandPushMidQueueIsNeverOverwritten moves main by hand while the
// merger validates: its compare-and-swap fails, it rebuilds on the new
// head, validates again and lands on top of the hand commit.
func TestHandPushMidQueueIsNeverOverwritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	counter := filepath.Join(t.TempDir(), "validations")
	m := newManager(t, ws, gitwork.Config{Repo: repo, Validate: []string{"echo $AGENTSPACE_MERGE_CANDIDATE >> '" + counter + "'"}})
	w := work(t, m, ws, "ann", "queued", map[string]string{"q.txt": "q\n"})

	pushed := false
	mg := m.NewMerger("merger")
	mg.SetStepHook(func(step string) {
		if step != "validated" || pushed {
			return
		}
		pushed = true
		hand := filepath.Join(t.TempDir(), "hand")
		gitT(t, repo, "worktree", "add", "-q", "--detach", hand, "main")
		writeFile(t, filepath.Join(hand, "hand.txt"), "by hand\n")
		gitT(t, hand, "add", "-A")
		gitT(t, hand, "commit", "-q", "-m", "hand push")
		gitT(t, repo, "update-ref", "refs/heads/main", gitT(t, hand, "rev-parse", "HEAD"))
	})
	var got []gitwork.Result
	require.NoError(t, mg.Run(ctx, false, func(r gitwork.Result) { got = append(got, r) }))
	require.Len(t, got, 1)
	assert.Equal(t, gitwork.StatusMerged, got[0].Status)
	assert.Equal(t, []string{"init", "hand push", "queued"}, firstParents(t, repo))
	b, err := os.ReadFile(counter)
	require.NoError(t, err)
	assert.Len(t, strings.Fields(string(b)), 2, "validated once on the old head, once on the hand push")
	assert.Equal(t, gitwork.StatusReleased, record(t, ws, w.Task).Status)
}

func TestAMergerThatLostItsLeaseCannotMoveTheBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo, LeaderTTL: 300e6})
	work(t, m, ws, "ann", "t1", map[string]string{"one.txt": "1\n"})
	before := gitT(t, repo, "rev-parse", "main")

	slow := m.NewMerger("slow")
	slow.SetStepHook(func(step string) {
		if step != "validated" {
			return
		}
		// Another merger takes over the lapsed lease and writes its fence.
		err := ws.Locks().ForceRelease(ctx, workspace.Write{Actor: "ops"}, gitwork.QueueResource("main"))
		require.NoError(t, err)
		other := m.NewMerger("fast")
		other.SetStepHook(func(string) {})
		require.NoError(t, other.Run(ctx, false, nil))
	})
	err := slow.Run(ctx, false, nil)
	require.ErrorIs(t, err, gitwork.ErrLeaseLost)
	log := firstParents(t, repo)
	assert.Equal(t, []string{"init", "t1"}, log, "only the merger in charge merged it, once")
	assert.NotEqual(t, before, gitT(t, repo, "rev-parse", "main"))
}

// TestTheFenceRefStopsAMergerWhoseLeaseStillLooksLive: a successor's fence
// in git stops the compare-and-swap even when the workspace lease still
// renews (say the successor saw it expire by another clock).
func TestTheFenceRefStopsAMergerWhoseLeaseStillLooksLive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo})
	work(t, m, ws, "ann", "t1", map[string]string{"one.txt": "1\n"})
	before := gitT(t, repo, "rev-parse", "main")
	mg := m.NewMerger("merger")
	mg.SetStepHook(func(step string) {
		if step == "validated" {
			f := filepath.Join(t.TempDir(), "fence")
			writeFile(t, f, "token 999999\nowner successor\n")
			blob := gitT(t, repo, "hash-object", "-w", "--", f)
			gitT(t, repo, "update-ref", "refs/agentspace/merge-fence/main", blob)
		}
	})
	err := mg.Run(ctx, false, nil)
	require.ErrorIs(t, err, gitwork.ErrLeaseLost)
	assert.Equal(t, before, gitT(t, repo, "rev-parse", "main"), "the branch did not move")
}

// TestQueueOrderIsTheLogsNotTheSubmittersClock: three submitters whose
// recorded times disagree with the order they submitted in (one clock an
// hour ahead, one a day behind) are merged in the order their submissions
// reached the workspace's event log.
func TestQueueOrderIsTheLogsNotTheSubmittersClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo})
	first := work(t, m, ws, "ann", "first", map[string]string{"1.txt": "1\n"})
	second := work(t, m, ws, "bob", "second", map[string]string{"2.txt": "2\n"})
	third := work(t, m, ws, "cat", "third", map[string]string{"3.txt": "3\n"})
	skew := func(w gitwork.Worktree, at time.Time) {
		rec := record(t, ws, w.Task)
		rec.SubmittedAt = at
		_, err := gitwork.Plant(ctx, ws, w.Agent, rec)
		require.NoError(t, err)
	}
	skew(first, second.SubmittedAt.Add(time.Hour))
	skew(third, first.SubmittedAt.Add(-24*time.Hour))

	recs, err := gitwork.List(ctx, ws)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	assert.Equal(t, []string{first.Task, second.Task, third.Task}, []string{recs[0].Task, recs[1].Task, recs[2].Task})
	assert.True(t, recs[0].QueueSeq < recs[1].QueueSeq && recs[1].QueueSeq < recs[2].QueueSeq, "ordered by seq: %d %d %d", recs[0].QueueSeq, recs[1].QueueSeq, recs[2].QueueSeq)
	assert.True(t, recs[0].SubmittedAt.After(recs[1].SubmittedAt), "the clocks disagree with that order")

	var got []string
	require.NoError(t, m.NewMerger("merger").Run(ctx, false, func(r gitwork.Result) { got = append(got, r.Task) }))
	assert.Equal(t, []string{first.Task, second.Task, third.Task}, got)
	assert.Equal(t, []string{"init", "first", "second", "third"}, firstParents(t, repo))
}

// TestAFollowingMergerWakesOnTheSubmissionEvent: with the safety poll an
// hour away, only the submission's event can wake the merger to merge it
// (the second surely comes after a pass that found the queue empty).
func TestAFollowingMergerWakesOnTheSubmissionEvent(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo, FollowPoll: time.Hour})
	results := make(chan gitwork.Result, 4)
	waiting := make(chan struct{})
	mctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() {
		close(waiting)
		ran <- m.NewMerger("merger").Run(mctx, true, func(r gitwork.Result) { results <- r })
	}()
	<-waiting
	// Wait until it holds the queue (and so has passed over the empty queue).
	require.Eventually(t, func() bool {
		_, err := ws.Locks().Get(ctx, gitwork.QueueResource("main"))
		return err == nil
	}, 30*time.Second, 10*time.Millisecond)
	for i, name := range []string{"one", "two"} {
		w := work(t, m, ws, "ann", name, map[string]string{name + ".txt": name + "\n"})
		select {
		case r := <-results:
			assert.Equal(t, w.Task, r.Task, "submission %d", i)
			assert.Equal(t, gitwork.StatusMerged, r.Status)
		case <-ctx.Done():
			t.Fatalf("submission %d was not merged: the merger did not wake", i)
		}
	}
	stop()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"init", "one", "two"}, firstParents(t, repo))
}

package gitwork_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/gitwork"
	"github.com/agentspace/agentspace/workspace"
)

// doneTask adds a task that bob claims and completes.
func doneTask(t *testing.T, ws *workspace.Workspace, title string) workspace.Task {
	t.Helper()
	task := claimed(t, ws, "bob", title)
	done, err := ws.Tasks().Complete(context.Background(), workspace.Write{Actor: "bob"}, task.ID, workspace.TaskResult{Summary: "done"})
	require.NoError(t, err)
	return done
}

func plant(t *testing.T, ws *workspace.Workspace, w gitwork.Worktree) {
	t.Helper()
	_, err := gitwork.Plant(context.Background(), ws, "bob", w)
	require.NoError(t, err)
}

// refs lists every ref with its commit.
func refs(t *testing.T, repo string) string {
	t.Helper()
	return gitT(t, repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/")
}

// TestPlantedRecordsLeaveMainAndForeignBranchesAlone plants worktree
// records for ended tasks that name main, a branch and a worktree of the
// user's outside the machinery's namespace, and the machinery's own name
// for a task whose directory git has on another branch: gc and release
// refuse every one with a RecordError and remove nothing; gc still
// releases the genuine record beside them; Forget drops a record and
// leaves the repository as it is.
func TestPlantedRecordsLeaveMainAndForeignBranchesAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo})
	mine := filepath.Join(t.TempDir(), "my-feature")
	gitT(t, repo, "worktree", "add", "-q", "-b", "feature", mine, "main")

	onMain, onFeature, wrongBranch := doneTask(t, ws, "main"), doneTask(t, ws, "feature"), doneTask(t, ws, "wrong")
	plant(t, ws, gitwork.Worktree{Task: onMain.ID, Agent: "bob", Branch: "main", Path: "/nowhere", Status: gitwork.StatusActive})
	plant(t, ws, gitwork.Worktree{Task: onFeature.ID, Agent: "bob", Branch: "feature", Path: mine, Status: gitwork.StatusActive})
	// The machinery's own names for the task, but git has that directory on
	// the user's branch.
	short := strings.ReplaceAll(wrongBranch.ID, "-", "")[20:]
	squatted := filepath.Join(repo, ".agentspace", "worktrees", short)
	gitT(t, repo, "worktree", "add", "-q", "-b", "other", squatted, "main")
	plant(t, ws, gitwork.Worktree{Task: wrongBranch.ID, Agent: "bob", Branch: "agent/" + short, Path: squatted, Status: gitwork.StatusActive})
	// A genuine worktree whose task ended, beside them.
	genuine := claimed(t, ws, "ann", "genuine")
	gw, err := m.Start(ctx, "ann", genuine.ID)
	require.NoError(t, err)
	_, err = ws.Tasks().Complete(ctx, workspace.Write{Actor: "ann"}, genuine.ID, workspace.TaskResult{})
	require.NoError(t, err)
	before := refs(t, repo)

	out, err := m.GC(ctx, "operator")
	require.ErrorIs(t, err, gitwork.ErrRecordMismatch)
	require.ErrorIs(t, err, workspace.ErrConflict)
	for _, want := range []string{`branch "main"`, `branch "feature"`, "is a worktree on refs/heads/other"} {
		assert.Contains(t, err.Error(), want)
	}
	require.Len(t, out, 1, "the genuine record is still released")
	assert.Equal(t, genuine.ID, out[0].Task)
	assert.NoDirExists(t, gw.Path)
	after := strings.Replace(before, "refs/heads/"+gw.Branch+" "+gw.Base+"\n", "", 1)
	assert.Equal(t, after, refs(t, repo), "only the genuine branch went: main, feature and other are where they were")
	assert.DirExists(t, mine)
	assert.DirExists(t, squatted)

	for _, task := range []string{onMain.ID, onFeature.ID, wrongBranch.ID} {
		_, err := m.Release(ctx, "operator", task)
		var re *gitwork.RecordError
		require.True(t, errors.As(err, &re), "task %s: %v", task, err)
		assert.Equal(t, task, re.Task)
		assert.Equal(t, gitwork.StatusActive, record(t, ws, task).Status, "a refused record is not acted on")
	}
	assert.Equal(t, after, refs(t, repo))

	w, err := m.Forget(ctx, "operator", onMain.ID)
	require.NoError(t, err)
	assert.Equal(t, gitwork.StatusReleased, w.Status)
	assert.Equal(t, after, refs(t, repo), "forgetting touches no ref")
	_, err = os.Stat(filepath.Join(repo, "a.txt"))
	assert.NoError(t, err, "the main checkout is untouched")
}

// TestPlantedQueueEntriesFailAndMoveNothing plants queue entries: one
// naming main with a commit of a foreign branch as its head, one with the
// machinery's names for a branch that does not exist, one "merged" whose
// merged commit lacks the entry's commits (a genuine worktree's). The
// merger fails each with the reason, makes no resolve task, completes no
// task and removes no worktree; a genuine entry queued among them lands,
// and main holds only it.
func TestPlantedQueueEntriesFailAndMoveNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo, OnConflict: gitwork.OnConflictTask})
	gitT(t, repo, "branch", "feature", "main")
	mine := filepath.Join(t.TempDir(), "feature")
	gitT(t, repo, "worktree", "add", "-q", mine, "feature")
	writeFile(t, filepath.Join(mine, "evil.txt"), "evil\n")
	gitT(t, mine, "add", "-A")
	gitT(t, mine, "commit", "-q", "-m", "evil")
	evil := gitT(t, repo, "rev-parse", "feature")
	mainBefore := gitT(t, repo, "rev-parse", "main")

	foreign := claimed(t, ws, "bob", "foreign")
	plant(t, ws, gitwork.Worktree{Task: foreign.ID, Agent: "bob", Branch: "main", Path: repo, Base: mainBefore, Head: evil, Status: gitwork.StatusSubmitted})
	missing := claimed(t, ws, "bob", "missing")
	short := strings.ReplaceAll(missing.ID, "-", "")[20:]
	plant(t, ws, gitwork.Worktree{Task: missing.ID, Agent: "bob", Branch: "agent/" + short, Path: filepath.Join(repo, ".agentspace", "worktrees", short),
		Base: mainBefore, Head: evil, Status: gitwork.StatusSubmitted})
	// ann's real worktree, with a commit main lacks, claimed merged.
	victim := claimed(t, ws, "ann", "victim")
	vw, err := m.Start(ctx, "ann", victim.ID)
	require.NoError(t, err)
	writeFile(t, filepath.Join(vw.Path, "wip.txt"), "wip\n")
	gitT(t, vw.Path, "add", "-A")
	gitT(t, vw.Path, "commit", "-q", "-m", "wip")
	vw.Head, vw.Status, vw.Merged = gitT(t, vw.Path, "rev-parse", "HEAD"), gitwork.StatusMerged, mainBefore
	plant(t, ws, vw)
	good := work(t, m, ws, "carol", "good", map[string]string{"good.txt": "good\n"})

	var results []gitwork.Result
	require.NoError(t, m.NewMerger("merger").Run(ctx, false, func(r gitwork.Result) { results = append(results, r) }))
	got := map[string]gitwork.Result{}
	for _, r := range results {
		got[r.Task] = r
	}
	assert.Equal(t, gitwork.StatusMerged, got[good.Task].Status, "%+v", results)
	for task, why := range map[string]string{foreign.ID: `branch "main"`, missing.ID: "is gone", victim.ID: "lacks commit"} {
		assert.Equal(t, gitwork.StatusFailed, got[task].Status, "task %s: %+v", task, got[task])
		assert.Contains(t, got[task].Detail, why)
		assert.Contains(t, record(t, ws, task).Detail, why)
	}
	assert.Equal(t, []string{"init", "good"}, firstParents(t, repo), "main holds only the genuine entry")
	assert.Equal(t, evil, gitT(t, repo, "rev-parse", "feature"), "the foreign branch did not move")
	tv, err := ws.Tasks().Get(ctx, victim.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskInProgress, tv.Status, "a planted merged record completes no task")
	assert.DirExists(t, vw.Path, "nor removes its worktree")
	page, err := ws.Tasks().List(ctx, workspace.TaskFilter{Labels: map[string]string{"merge": "failed"}})
	require.NoError(t, err)
	assert.Empty(t, page.Tasks, "no resolve task is made on a planted record's word")
}

// TestEveryWorktreeOfTheRepositoryAgreesOnTheRoot: a Manager opened in a
// task's worktree (as an agent's wsctl is) takes a relative root from the
// main working tree, so it confirms and submits the records the main
// checkout's Manager made.
func TestEveryWorktreeOfTheRepositoryAgreesOnTheRoot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	for _, root := range []string{"", "wt"} {
		m := newManager(t, ws, gitwork.Config{Repo: repo, Root: root})
		task := claimed(t, ws, "ann", "root "+root)
		w, err := m.Start(ctx, "ann", task.ID)
		require.NoError(t, err)
		inside := newManager(t, ws, gitwork.Config{Repo: w.Path, Root: root})
		assert.Equal(t, m.Config().Root, inside.Config().Root)
		writeFile(t, filepath.Join(w.Path, "x.txt"), "x\n")
		gitT(t, w.Path, "add", "-A")
		gitT(t, w.Path, "commit", "-q", "-m", "x")
		_, err = inside.Submit(ctx, "ann", task.ID)
		require.NoError(t, err, "root %q", root)
	}
	assert.Equal(t, filepath.Join(repo, "wt"), newManager(t, ws, gitwork.Config{Repo: repo, Root: "wt"}).Config().Root)
}

package gitwork_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/gitwork"
	"github.com/agentspace/agentspace/workspace"
)

// commitIn writes files in a worktree and commits them.
func commitIn(t *testing.T, dir, msg string, files map[string]string) string {
	t.Helper()
	for name, content := range files {
		writeFile(t, filepath.Join(dir, name), content)
	}
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", msg)
	return gitT(t, dir, "rev-parse", "HEAD")
}

func TestPerAgentWorktreeIsReusedAndKeptUpToDate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo, PerAgent: true, Validate: []string{"test -f a.txt"}})
	merge := func() []gitwork.Result {
		var got []gitwork.Result
		require.NoError(t, m.NewMerger("merger").Run(ctx, false, func(r gitwork.Result) { got = append(got, r) }))
		return got
	}

	// ann's first task: the worktree and branch are made.
	t1 := claimed(t, ws, "ann", "t1")
	w1, err := m.Start(ctx, "ann", t1.ID)
	require.NoError(t, err)
	assert.Equal(t, "agent/ann", w1.Branch)
	assert.Equal(t, filepath.Join(repo, ".agentspace", "worktrees", "agent-ann"), w1.Path)
	assert.True(t, w1.PerAgent)
	commitIn(t, w1.Path, "t1", map[string]string{"one.txt": "1\n"})
	_, err = m.Submit(ctx, "ann", t1.ID)
	require.NoError(t, err)

	// One task at a time in an agent's worktree.
	t2 := claimed(t, ws, "ann", "t2")
	_, err = m.Start(ctx, "ann", t2.ID)
	require.ErrorIs(t, err, workspace.ErrConflict)
	assert.Contains(t, err.Error(), t1.ID, "the refusal names the task holding the worktree")

	// bob's work lands after ann's: rebased, so bob's branch is reset.
	t3 := claimed(t, ws, "bob", "t3")
	w3, err := m.Start(ctx, "bob", t3.ID)
	require.NoError(t, err)
	commitIn(t, w3.Path, "t3", map[string]string{"three.txt": "3\n"})
	_, err = m.Submit(ctx, "bob", t3.ID)
	require.NoError(t, err)
	got := merge()
	require.Len(t, got, 2)
	assert.Equal(t, gitwork.StatusMerged, got[0].Status)
	assert.Equal(t, gitwork.StatusMerged, got[1].Status)
	assert.Equal(t, []string{"init", "t1", "t3"}, firstParents(t, repo))
	main := gitT(t, repo, "rev-parse", "main")
	assert.Equal(t, main, gitT(t, w3.Path, "rev-parse", "HEAD"), "bob's branch, holding nothing unmerged, moved to the merged commit")
	assert.Empty(t, gitT(t, w3.Path, "status", "--porcelain"), "and its checkout with it")
	rec3 := record(t, ws, t3.ID)
	assert.Equal(t, gitwork.StatusReleased, rec3.Status)
	_, err = os.Stat(w3.Path)
	require.NoError(t, err, "a per-agent worktree outlives its task")
	for _, id := range []string{t1.ID, t3.ID} {
		task, err := ws.Tasks().Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, workspace.TaskDone, task.Status)
	}

	// ann's next task reuses the worktree, fast-forwarded to main.
	w2, err := m.Start(ctx, "ann", t2.ID)
	require.NoError(t, err)
	assert.Equal(t, w1.Path, w2.Path)
	assert.Equal(t, main, w2.Base)
	assert.Equal(t, main, gitT(t, w2.Path, "rev-parse", "HEAD"))
	assert.FileExists(t, filepath.Join(w2.Path, "three.txt"))

	// ann submits, then goes on committing before the merge, while bob
	// lands something first: ann's branch is not reset (it holds work
	// after the submission), and the next start rebases only that work.
	commitIn(t, w2.Path, "t2", map[string]string{"two.txt": "2\n"})
	sub2, err := m.Submit(ctx, "ann", t2.ID)
	require.NoError(t, err)
	extra := commitIn(t, w2.Path, "after submitting", map[string]string{"later.txt": "later\n"})
	t4 := claimed(t, ws, "bob", "t4")
	w4, err := m.Start(ctx, "bob", t4.ID)
	require.NoError(t, err)
	require.Equal(t, main, w4.Base)
	commitIn(t, w4.Path, "t4", map[string]string{"four.txt": "4\n"})
	_, err = m.Submit(ctx, "bob", t4.ID)
	require.NoError(t, err)
	// Submission order: ann's t2, then bob's t4.
	got = merge()
	require.Len(t, got, 2)
	assert.Equal(t, []string{t2.ID, t4.ID}, []string{got[0].Task, got[1].Task})
	assert.Equal(t, []string{"init", "t1", "t3", "t2", "t4"}, firstParents(t, repo))
	assert.Equal(t, extra, gitT(t, w2.Path, "rev-parse", "HEAD"), "work after the submission is never moved")
	msgs := messages(t, ws, t2.ID)
	assert.Contains(t, msgs[len(msgs)-1], "agent/ann kept at "+extra[:12], "the record says the branch was left alone")
	assert.Equal(t, sub2.Head, gitT(t, repo, "rev-parse", "main~1"), "ann's submission fast-forwarded; bob's was rebased on it")

	// A dirty worktree is refused at start, and nothing moves.
	t5 := claimed(t, ws, "ann", "t5")
	writeFile(t, filepath.Join(w2.Path, "scratch.txt"), "wip\n")
	_, err = m.Start(ctx, "ann", t5.ID)
	require.ErrorIs(t, err, gitwork.ErrDirty)
	assert.Contains(t, err.Error(), "scratch.txt")
	assert.Equal(t, extra, gitT(t, w2.Path, "rev-parse", "HEAD"))
	require.NoError(t, os.Remove(filepath.Join(w2.Path, "scratch.txt")))

	// Clean, it is rebased: the merged t2 commit drops out, the later one
	// stays, and the submission is the later work alone.
	w5, err := m.Start(ctx, "ann", t5.ID)
	require.NoError(t, err)
	main = gitT(t, repo, "rev-parse", "main")
	assert.Equal(t, main, w5.Base)
	assert.Equal(t, []string{"after submitting"}, splitLines(gitT(t, w5.Path, "log", "--format=%s", "main..HEAD")))
	assert.Equal(t, extra, gitT(t, repo, "rev-parse", "refs/agentspace/backup/agent-ann"), "the old head is kept before the rebase")
	s5, err := m.Submit(ctx, "ann", t5.ID)
	require.NoError(t, err)
	patch, err := ws.Artifacts().Get(ctx, workspace.ArtifactRef{Name: s5.Patch})
	require.NoError(t, err)
	assert.Contains(t, string(patch.Content), "later.txt")
	assert.NotContains(t, string(patch.Content), "two.txt", "only the commits since the last merged point")
	got = merge()
	require.Len(t, got, 1)
	assert.Equal(t, gitwork.StatusMerged, got[0].Status)
	assert.Equal(t, gitT(t, repo, "rev-parse", "main"), gitT(t, w5.Path, "rev-parse", "HEAD"))
}

func TestPerAgentStartRefusesABranchThatDoesNotRebase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo, PerAgent: true})
	t1 := claimed(t, ws, "ann", "t1")
	w, err := m.Start(ctx, "ann", t1.ID)
	require.NoError(t, err)
	// ann's own commit on shared.txt, then the task is released unmerged.
	mine := commitIn(t, w.Path, "mine", map[string]string{"shared.txt": "ann\n"})
	rel, err := m.Release(ctx, "ann", t1.ID)
	require.NoError(t, err)
	assert.Equal(t, gitwork.StatusReleased, rel.Status)
	assert.NotEmpty(t, rel.Backup, "unmerged work is kept under a backup ref")
	assert.DirExists(t, w.Path, "releasing the record leaves the agent's worktree")
	// bob lands a clashing change.
	work(t, m, ws, "bob", "theirs", map[string]string{"shared.txt": "bob\n"})
	require.NoError(t, m.NewMerger("merger").Run(ctx, false, nil))

	t2 := claimed(t, ws, "ann", "t2")
	_, err = m.Start(ctx, "ann", t2.ID)
	require.ErrorIs(t, err, workspace.ErrConflict)
	assert.Contains(t, err.Error(), "rebase")
	assert.Equal(t, mine, gitT(t, w.Path, "rev-parse", "HEAD"), "the stopped rebase was aborted")
	assert.Empty(t, gitT(t, w.Path, "status", "--porcelain"))
	_, err = ws.Notes().Get(ctx, gitwork.NoteKind, t2.ID)
	assert.ErrorIs(t, err, workspace.ErrNotFound, "nothing was recorded")
}

func TestPerAgentNamesAreSafe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo, PerAgent: true})
	seen := map[string]string{}
	actors := []string{"ann", "-rf", "a b", "x\ny", "../up", "a..b", "0123456789ab", "agent.lock", "ünï", "a/b", "a_b", "dev bot", "dev?bot",
		"dev_bot-53b12a67"} // the slug "dev bot" had when hashed slugs were plain names
	for i := 0; i < len(actors); i++ {
		actor := actors[i]
		path, branch, err := m.AgentWorktree(actor)
		require.NoError(t, err, actor)
		require.NoError(t, gitwork.CheckBranch(branch), actor)
		assert.Equal(t, filepath.Join(repo, ".agentspace", "worktrees"), filepath.Dir(path), "actor %q stays under the root", actor)
		if other, dup := seen[branch]; dup {
			t.Fatalf("actors %q and %q share branch %s", other, actor, branch)
		}
		seen[branch] = actor
		// An actor named as another's slug gets a worktree of its own.
		if slug := strings.TrimPrefix(filepath.Base(path), "agent-"); slug != actor && len(actors) < 64 {
			actors = append(actors, slug)
		}
	}
	task := claimed(t, ws, "-rf", "hostile")
	w, err := m.Start(ctx, "-rf", task.ID)
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(w.Path, "a.txt"))
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// messages lists the event messages of task's worktree record.
func messages(t *testing.T, ws *workspace.Workspace, task string) []string {
	t.Helper()
	page, err := ws.Events().Read(context.Background(), workspace.EventQuery{SubjectID: gitwork.NoteKind + "/" + task, Limit: 1000})
	require.NoError(t, err)
	var out []string
	for _, e := range page.Events {
		out = append(out, e.Message)
	}
	return out
}

// TestPerAgentResetFinishedByTheNextMerger: a merger that stopped after
// moving an agent's branch to the merged commit but before updating its
// checkout leaves it to the next, which updates the checkout.
func TestPerAgentResetFinishedByTheNextMerger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo, PerAgent: true})
	// bob's entry lands first, so ann's is rebased: her branch must move.
	t1 := claimed(t, ws, "bob", "first")
	w1, err := m.Start(ctx, "bob", t1.ID)
	require.NoError(t, err)
	t2 := claimed(t, ws, "ann", "second")
	w2, err := m.Start(ctx, "ann", t2.ID)
	require.NoError(t, err)
	commitIn(t, w1.Path, "first", map[string]string{"1.txt": "1\n"})
	_, err = m.Submit(ctx, "bob", t1.ID)
	require.NoError(t, err)
	commitIn(t, w2.Path, "second", map[string]string{"2.txt": "2\n"})
	_, err = m.Submit(ctx, "ann", t2.ID)
	require.NoError(t, err)

	stopped, stop := context.WithCancel(ctx)
	mg := m.NewMerger("merger")
	mg.SetStepHook(func(step string) {
		if step != "recorded" {
			return
		}
		rec := record(t, ws, t2.ID)
		if rec.Status != gitwork.StatusMerged {
			return
		}
		// The first half of the reset, then the merger dies.
		gitT(t, repo, "update-ref", "refs/heads/agent/ann", rec.Merged, rec.Head)
		stop()
	})
	_ = mg.Run(stopped, false, nil)
	rec := record(t, ws, t2.ID)
	require.Equal(t, gitwork.StatusMerged, rec.Status, "the merger stopped before finishing: %s", rec.Detail)
	require.NotEqual(t, rec.Head, rec.Merged, "ann's entry was rebased")
	require.NotEmpty(t, gitT(t, w2.Path, "status", "--porcelain"), "the checkout is behind its branch")

	require.NoError(t, m.NewMerger("merger").Run(ctx, false, nil))
	assert.Equal(t, gitwork.StatusReleased, record(t, ws, t2.ID).Status)
	assert.Equal(t, gitT(t, repo, "rev-parse", "main"), gitT(t, w2.Path, "rev-parse", "HEAD"))
	assert.Empty(t, gitT(t, w2.Path, "status", "--porcelain"), "the next merger updated the checkout")
	assert.FileExists(t, filepath.Join(w2.Path, "1.txt"))
	task, err := ws.Tasks().Get(ctx, t2.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskDone, task.Status)
}

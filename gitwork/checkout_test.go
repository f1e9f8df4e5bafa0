package gitwork_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/gitwork"
	"github.com/agentspace/agentspace/workspace"
)

// checkedOutRepo is newRepo with main checked out in its own directory,
// as a developer's clone has it.
func checkedOutRepo(t *testing.T) string {
	t.Helper()
	repo := newRepo(t)
	gitT(t, repo, "checkout", "-q", "main")
	gitT(t, repo, "config", "core.excludesFile", "/dev/null")
	writeFile(t, filepath.Join(repo, ".git", "info", "exclude"), ".agentspace/\n")
	return repo
}

// TestMergeUpdatesTheCheckedOutMainAsAFastForwardWould: with main checked
// out and a change of the user's to a file the entry does not touch, the
// queue lands the entry and updates the checkout: the merged file is
// there, git status shows only the user's change.
func TestMergeUpdatesTheCheckedOutMainAsAFastForwardWould(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := checkedOutRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo})
	work(t, m, ws, "ann", "hello", map[string]string{"hello.txt": "hello\n"})
	work(t, m, ws, "bob", "shared", map[string]string{"shared.txt": "ONE\ntwo\nthree\n"})
	writeFile(t, filepath.Join(repo, "a.txt"), "mine\n")

	require.NoError(t, m.NewMerger("merger").Run(ctx, false, nil))
	assert.Equal(t, []string{"init", "hello", "shared"}, firstParents(t, repo))
	assert.Equal(t, "M a.txt", gitT(t, repo, "status", "--porcelain"), "only the user's own change shows")
	b, err := os.ReadFile(filepath.Join(repo, "hello.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(b))
	b, err = os.ReadFile(filepath.Join(repo, "shared.txt"))
	require.NoError(t, err)
	assert.Equal(t, "ONE\ntwo\nthree\n", string(b))
	assert.Equal(t, "mine\n", readFile(t, filepath.Join(repo, "a.txt")), "the user's change is kept")
	assert.Equal(t, gitT(t, repo, "rev-parse", "main"), gitT(t, repo, "rev-parse", "HEAD"))
}

// TestMergeRefusesToOverwriteTheCheckedOutMainsChanges: an uncommitted
// change to a file the entry changes, or an untracked file where it adds
// one, stops the merge before main moves; the entry waits in the queue,
// the error says what to run, and once the checkout is clean the next run
// lands it.
func TestMergeRefusesToOverwriteTheCheckedOutMainsChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		files map[string]string
		mess  func(repo string)
		clean func(repo string)
	}{
		{"modified", map[string]string{"shared.txt": "ONE\ntwo\nthree\n"},
			func(repo string) { writeFile(t, filepath.Join(repo, "shared.txt"), "mine\n") },
			func(repo string) { gitT(t, repo, "stash", "-q") }},
		{"untracked", map[string]string{"new.txt": "new\n"},
			func(repo string) { writeFile(t, filepath.Join(repo, "new.txt"), "mine\n") },
			func(repo string) { require.NoError(t, os.Remove(filepath.Join(repo, "new.txt"))) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo, ws := checkedOutRepo(t), openWS(t)
			m := newManager(t, ws, gitwork.Config{Repo: repo})
			w := work(t, m, ws, "ann", "change", tc.files)
			tc.mess(repo)
			before := gitT(t, repo, "rev-parse", "main")
			status := gitT(t, repo, "status", "--porcelain")

			var results []gitwork.Result
			err := m.NewMerger("merger").Run(ctx, false, func(r gitwork.Result) { results = append(results, r) })
			var ce *gitwork.CheckoutError
			require.True(t, errors.As(err, &ce), "%v", err)
			assert.ErrorIs(t, err, workspace.ErrConflict)
			assert.Equal(t, repo, ce.Path)
			assert.Contains(t, err.Error(), "git -C "+repo+" stash")
			assert.NotContains(t, err.Error(), "wsctl", "a library error names no CLI command (wsctl adds its hint)")
			assert.Equal(t, before, gitT(t, repo, "rev-parse", "main"), "main did not move")
			assert.Equal(t, status, gitT(t, repo, "status", "--porcelain"), "the user's change is as it was")
			rec := record(t, ws, w.Task)
			assert.Equal(t, gitwork.StatusSubmitted, rec.Status, "the entry waits in the queue")
			assert.Contains(t, rec.Detail, "waiting: ")
			require.Len(t, results, 1)
			assert.Equal(t, gitwork.StatusSubmitted, results[0].Status)

			tc.clean(repo)
			require.NoError(t, m.NewMerger("merger").Run(ctx, false, nil))
			assert.Equal(t, []string{"init", "change"}, firstParents(t, repo))
			assert.Empty(t, gitT(t, repo, "status", "--porcelain"))
			assert.Equal(t, gitwork.StatusReleased, record(t, ws, w.Task).Status)
		})
	}
}

// TestAConflictTellsTheTaskWhatToDoNext: a conflicted entry's task stays
// with its agent and its result says what came back and the commands to
// run.
func TestAConflictTellsTheTaskWhatToDoNext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo})
	first := claimed(t, ws, "ann", "first")
	w1, err := m.Start(ctx, "ann", first.ID)
	require.NoError(t, err)
	w2 := work(t, m, ws, "bob", "second", map[string]string{"shared.txt": "bob\n"})
	writeFile(t, filepath.Join(w1.Path, "shared.txt"), "ann\n")
	gitT(t, w1.Path, "commit", "-q", "-am", "ann")
	_, err = m.Submit(ctx, "ann", first.ID)
	require.NoError(t, err)
	require.NoError(t, m.NewMerger("merger").Run(ctx, false, nil))

	assert.Equal(t, gitwork.StatusReleased, record(t, ws, w2.Task).Status, "bob's, submitted first, landed")
	task, err := ws.Tasks().Get(ctx, first.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskInProgress, task.Status)
	assert.Equal(t, "ann", task.Assignee)
	assert.Contains(t, task.Result.Summary, "gave this task back (conflicted): conflicting files: shared.txt")
	assert.Contains(t, task.Result.Summary, "Next: in "+w1.Path+", run 'git rebase main', resolve shared.txt, commit, then run 'wsctl work submit "+first.ID+"'")
	rec := record(t, ws, first.ID)
	assert.Equal(t, gitwork.StatusConflicted, rec.Status)
	assert.Contains(t, rec.Next("main"), "git rebase main")
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

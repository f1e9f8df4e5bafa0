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

func TestStartRecordsBaseAndSubmitStoresPatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo})
	base := gitT(t, repo, "rev-parse", "main")
	task := claimed(t, ws, "ann", "x")

	w, err := m.Start(ctx, "ann", task.ID)
	require.NoError(t, err)
	assert.Equal(t, gitwork.StatusActive, w.Status)
	assert.Equal(t, base, w.Base)
	assert.Equal(t, filepath.Join(repo, ".agentspace", "worktrees", w.Branch[len("agent/"):]), w.Path)
	again, err := m.Start(ctx, "ann", task.ID)
	require.NoError(t, err)
	assert.Equal(t, w.Path, again.Path, "starting again returns the same worktree")

	_, err = m.Start(ctx, "bob", task.ID)
	assert.ErrorIs(t, err, workspace.ErrNotHolder, "only the claimer starts a worktree")

	writeFile(t, filepath.Join(w.Path, "new.txt"), "new\n")
	_, err = m.Submit(ctx, "ann", task.ID)
	require.ErrorIs(t, err, gitwork.ErrDirty)
	assert.Contains(t, err.Error(), "new.txt")
	assert.Equal(t, gitwork.StatusActive, record(t, ws, task.ID).Status, "a refused submit changes nothing")

	gitT(t, w.Path, "add", "-A")
	gitT(t, w.Path, "commit", "-q", "-m", "new")
	w, err = m.Submit(ctx, "ann", task.ID)
	require.NoError(t, err)
	assert.Equal(t, gitwork.StatusSubmitted, w.Status)
	assert.Equal(t, gitT(t, w.Path, "rev-parse", "HEAD"), w.Head)
	patch, err := ws.Artifacts().Get(ctx, workspace.ArtifactRef{Name: gitwork.PatchName(task.ID)})
	require.NoError(t, err)
	assert.Contains(t, string(patch.Content), "+new")
	assert.Equal(t, task.ID, patch.TaskID)
	got, err := ws.Tasks().Get(ctx, task.ID)
	require.NoError(t, err)
	assert.True(t, got.LeaseExpiresAt.After(task.LeaseExpiresAt), "the claim is extended while queued")
}

func TestReleaseKeepsUnmergedWorkUnderABackupRef(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo})
	task := claimed(t, ws, "ann", "x")
	w, err := m.Start(ctx, "ann", task.ID)
	require.NoError(t, err)
	writeFile(t, filepath.Join(w.Path, "committed.txt"), "c\n")
	gitT(t, w.Path, "add", "-A")
	gitT(t, w.Path, "commit", "-q", "-m", "c")
	writeFile(t, filepath.Join(w.Path, "untracked.txt"), "u\n")
	_, err = m.Release(ctx, "bob", task.ID)
	require.ErrorIs(t, err, workspace.ErrNotHolder, "another agent may not release a live claim's worktree")

	w, err = m.Release(ctx, "ann", task.ID)
	require.NoError(t, err)
	assert.Equal(t, gitwork.StatusReleased, w.Status)
	require.NotEmpty(t, w.Backup)
	_, err = os.Stat(w.Path)
	assert.True(t, errors.Is(err, os.ErrNotExist), "the worktree is gone")
	assert.Equal(t, "c", gitT(t, repo, "show", w.Backup+":committed.txt"))
	assert.Equal(t, "u", gitT(t, repo, "show", w.Backup+":untracked.txt"), "untracked work is kept too")
}

func TestGCReleasesEndedTasksAndNeverALiveClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo})
	live := claimed(t, ws, "ann", "live")
	ended := claimed(t, ws, "bob", "ended")
	_, err := m.Start(ctx, "ann", live.ID)
	require.NoError(t, err)
	_, err = m.Start(ctx, "bob", ended.ID)
	require.NoError(t, err)
	_, err = ws.Tasks().Update(ctx, workspace.Write{Actor: "lead"}, ended.ID, workspace.TaskChange{Status: ptr(workspace.TaskCancelled)})
	require.NoError(t, err)

	out, err := m.GC(ctx, "janitor")
	require.NoError(t, err)
	require.Len(t, out, 1)
	assert.Equal(t, ended.ID, out[0].Task)
	assert.Equal(t, gitwork.StatusActive, record(t, ws, live.ID).Status)
	assert.Equal(t, gitwork.StatusReleased, record(t, ws, ended.ID).Status)
}

func ptr[T any](v T) *T { return &v }

func TestHostileIDsBranchesAndPathsAreRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo})
	for _, id := range []string{"-rf", "--upload-pack=touch pwned", "../../etc", "a b", "x\ny", "", "01234567-89ab-cdef-0123-456789abcdeF"} {
		_, err := m.Start(ctx, "ann", id)
		assert.ErrorIs(t, err, workspace.ErrInvalid, "task id %q", id)
		_, err = m.Submit(ctx, "ann", id)
		assert.ErrorIs(t, err, workspace.ErrInvalid, "task id %q", id)
		_, err = m.Release(ctx, "ann", id)
		assert.ErrorIs(t, err, workspace.ErrInvalid, "task id %q", id)
	}
	for _, b := range []string{"-b", "--force", "a..b", "a b", "a\nb", "a/.hidden", "a/-x", "x.lock", "a:b", "a~1", "a^", "@", "a@{1}", "/abs", "trail/", "a//b"} {
		assert.ErrorIs(t, gitwork.CheckBranch(b), workspace.ErrInvalid, "branch %q", b)
	}
	for _, b := range []string{"main", "agent/0123abcd", "release-1.2", "feature/x_y"} {
		assert.NoError(t, gitwork.CheckBranch(b), "branch %q", b)
	}
	for _, cfg := range []gitwork.Config{
		{Repo: repo, Integration: "--orphan"},
		{Repo: repo, BranchPrefix: "-x/"},
		{Repo: repo, BranchPrefix: "a b/"},
		{Repo: repo, Root: filepath.Join(t.TempDir(), "bad\nroot")},
		{Repo: repo, Mode: "--hard"},
		{Repo: repo, OnConflict: "ignore"},
	} {
		_, err := gitwork.New(ctx, ws, cfg)
		assert.ErrorIs(t, err, workspace.ErrInvalid, "config %+v", cfg)
	}
	// A path with spaces and a leading dash in a component is fine: it is
	// absolute and passed after --.
	root := filepath.Join(t.TempDir(), "-my worktrees")
	m2 := newManager(t, ws, gitwork.Config{Repo: repo, Root: root})
	task := claimed(t, ws, "ann", "spaces")
	w, err := m2.Start(ctx, "ann", task.ID)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(w.Path, root))
	_, err = os.Stat(filepath.Join(w.Path, "a.txt"))
	assert.NoError(t, err)
}

// TestStartAdoptsAWorktreeItsCrashedPredecessorLeft: a worktree made but
// not recorded (the process died in between) is adopted, not refused.
func TestStartAdoptsAWorktreeItsCrashedPredecessorLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo})
	task := claimed(t, ws, "ann", "x")
	// What a Start that died before recording leaves: the worktree alone.
	short := strings.ReplaceAll(task.ID, "-", "")[20:]
	path := filepath.Join(repo, ".agentspace", "worktrees", short)
	base := gitT(t, repo, "rev-parse", "main")
	gitT(t, repo, "worktree", "add", "-q", "-b", "agent/"+short, path, base)
	require.Empty(t, mustList(t, ws), "no record")

	again, err := m.Start(ctx, "ann", task.ID)
	require.NoError(t, err)
	assert.Equal(t, path, again.Path)
	assert.Equal(t, base, again.Base)
	assert.Equal(t, gitwork.StatusActive, again.Status)
}

func mustList(t *testing.T, ws *workspace.Workspace) []gitwork.Worktree {
	t.Helper()
	recs, err := gitwork.List(context.Background(), ws)
	require.NoError(t, err)
	return recs
}

// TestSubmitSaysWhatBecameOfTheTask: a submit of a task that was cancelled
// says so (ErrTaskEnded, a conflict), of one whose claim was given back
// that it is not held, and of one another claimed who holds it; none
// changes the record.
func TestSubmitSaysWhatBecameOfTheTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, ws := newRepo(t), openWS(t)
	m := newManager(t, ws, gitwork.Config{Repo: repo})
	start := func(title string) (workspace.Task, gitwork.Worktree) {
		t.Helper()
		task := claimed(t, ws, "ann", title)
		w, err := m.Start(ctx, "ann", task.ID)
		require.NoError(t, err)
		writeFile(t, filepath.Join(w.Path, title+".txt"), title+"\n")
		gitT(t, w.Path, "add", "-A")
		gitT(t, w.Path, "commit", "-q", "-m", title)
		return task, w
	}

	cancelled, _ := start("cancelled")
	_, err := ws.Tasks().Update(ctx, workspace.Write{Actor: "lead"}, cancelled.ID, workspace.TaskChange{Status: ptr(workspace.TaskCancelled)})
	require.NoError(t, err)
	_, err = m.Submit(ctx, "ann", cancelled.ID)
	require.ErrorIs(t, err, gitwork.ErrTaskEnded)
	assert.ErrorIs(t, err, workspace.ErrConflict)
	assert.Equal(t, "task "+cancelled.ID+" was cancelled by lead: nothing is left to do in it", err.Error())
	assert.NotContains(t, err.Error(), "claim")

	returned, _ := start("returned")
	_, err = ws.Commit(ctx, workspace.Batch{Actor: "op", Ops: []workspace.Op{workspace.StopActorOp{Actor: "ann"}}})
	require.NoError(t, err)
	_, err = m.Submit(ctx, "ann", returned.ID)
	require.ErrorIs(t, err, workspace.ErrNotHolder)
	assert.Contains(t, err.Error(), `is pending: "ann" does not hold it`)

	_, err = ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "bob", Labels: map[string]string{"t": "returned"}})
	require.NoError(t, err)
	_, err = m.Submit(ctx, "ann", returned.ID)
	require.ErrorIs(t, err, workspace.ErrNotHolder)
	assert.Contains(t, err.Error(), `is claimed by "bob", not "ann"`)
	for _, id := range []string{cancelled.ID, returned.ID} {
		assert.Equal(t, gitwork.StatusActive, record(t, ws, id).Status, "a refused submit changes nothing")
	}
}

package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/gitwork"
	"github.com/agentspace/agentspace/workspace"
)

// checkedOut makes gitRepo's repository a developer's clone: main checked
// out, agentspace.toml and .agentspace/ ignored.
func checkedOut(t *testing.T, toml string) string {
	t.Helper()
	repo := gitRepo(t, toml)
	gitIn(t, repo, "checkout", "-q", "main")
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".git", "info", "exclude"), []byte("agentspace.toml\n.agentspace/\n"), 0o600))
	return repo
}

// runWsctl runs wsctl and returns its stdout, stderr and exit code.
func runWsctl(t *testing.T, cmd *exec.Cmd) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running wsctl: %v", err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// entry claims a new task as agent, commits files in its worktree and
// submits it (submit false: only commits).
func entry(t *testing.T, ws *workspace.Workspace, m *gitwork.Manager, agent, title string, files map[string]string, submit bool) gitwork.Worktree {
	t.Helper()
	ctx := context.Background()
	task, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: title, Labels: map[string]string{"n": title}})
	require.NoError(t, err)
	_, err = ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: agent, Labels: map[string]string{"n": title}, Lease: time.Hour})
	require.NoError(t, err)
	w, err := m.Start(ctx, agent, task.ID)
	require.NoError(t, err)
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(w.Path, name), []byte(content), 0o600))
	}
	gitIn(t, w.Path, "add", "-A")
	gitIn(t, w.Path, "commit", "-q", "-m", title)
	if submit {
		w, err = m.Submit(ctx, agent, task.ID)
		require.NoError(t, err)
	}
	return w
}

// TestMergeRunIntoACheckedOutMain: with main checked out, merge run lands
// one entry and gives one back: it prints each entry and a summary and
// exits 3; git status is clean with the merged file there; the conflicted
// task's result and 'wsctl work' tell its agent what came back and what
// to run. A change of the user's where the next entry lands stops that
// merge (exit 3, naming the command), main unmoved; once stashed, it lands.
func TestMergeRunIntoACheckedOutMain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	repo := checkedOut(t, "")
	ws, dsn := newWorkspace(t)
	m, err := gitwork.New(ctx, ws, gitwork.Config{Repo: repo})
	require.NoError(t, err)
	entry(t, ws, m, "ann", "hello", map[string]string{"hello.txt": "hello\n", "shared.txt": "ann\n"}, true)
	clash := entry(t, ws, m, "bob", "clash", map[string]string{"shared.txt": "bob\n"}, true)

	out, stderr, code := runWsctl(t, wsctlCmd(ctx, repo, dsn, "merger", nil, "merge", "run"))
	assert.Equal(t, exitConflict, code, "stdout %s stderr %s", out, stderr)
	assert.Contains(t, out, clash.Task+"\tconflicted\t-\tconflicting files: shared.txt")
	assert.Contains(t, out, "merge queue: 1 merged, 1 conflicted, 0 failed\n")
	assert.Contains(t, stderr, "1 merge queue entry came back to its agent")
	assert.Empty(t, gitIn(t, repo, "status", "--porcelain"), "the checkout followed main")
	b, err := os.ReadFile(filepath.Join(repo, "hello.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(b))

	task, err := ws.Tasks().Get(ctx, clash.Task)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskInProgress, task.Status)
	assert.Contains(t, task.Result.Summary, "Next: in "+clash.Path+", run 'git rebase main'")
	out, stderr, code = runWsctl(t, wsctlCmd(ctx, repo, dsn, "bob", nil, "work"))
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, clash.Task+"\tconflicted\t"+clash.Branch+"\t"+clash.Path+"\n")
	assert.Contains(t, out, "  came back from the merge queue: conflicting files: shared.txt\n")
	assert.Contains(t, out, "  next: in "+clash.Path+", run 'git rebase main', resolve shared.txt, commit, then run 'wsctl work submit "+clash.Task+"'")

	// The user edits hello.txt in the main checkout; the next entry changes it.
	later := entry(t, ws, m, "carol", "later", map[string]string{"hello.txt": "hello again\n"}, true)
	require.NoError(t, os.WriteFile(filepath.Join(repo, "hello.txt"), []byte("mine\n"), 0o600))
	before := gitIn(t, repo, "rev-parse", "main")
	out, stderr, code = runWsctl(t, wsctlCmd(ctx, repo, dsn, "merger", nil, "merge", "run"))
	assert.Equal(t, exitConflict, code, "stdout %s stderr %s", out, stderr)
	assert.Contains(t, stderr, "main is checked out in "+repo)
	assert.Contains(t, stderr, "git -C "+repo+" stash")
	assert.Contains(t, out, "still waiting")
	assert.Equal(t, before, gitIn(t, repo, "rev-parse", "main"), "main did not move")
	assert.Equal(t, "M hello.txt", gitIn(t, repo, "status", "--porcelain"))

	gitIn(t, repo, "stash", "-q")
	out, stderr, code = runWsctl(t, wsctlCmd(ctx, repo, dsn, "merger", nil, "merge", "run"))
	require.Equal(t, 0, code, "stdout %s stderr %s", out, stderr)
	assert.Contains(t, out, later.Task+"\tmerged\t")
	assert.Contains(t, out, "merge queue: 1 merged, 0 conflicted, 0 failed\n")
	assert.Empty(t, gitIn(t, repo, "status", "--porcelain"))
}

// plantRow writes a worktree record into the SQLite file behind the
// library's back, as a store from before worktree records were reserved
// could hold one (any actor could write it then).
func plantRow(t *testing.T, dsn, task, body string) {
	t.Helper()
	db, err := sql.Open("sqlite", strings.TrimPrefix(dsn, "sqlite:"))
	require.NoError(t, err)
	defer db.Close()
	now := time.Now().UnixMicro()
	_, err = db.Exec(`INSERT INTO notes (kind, key, title, body, author, version, created_at, updated_at, updated_by)
		VALUES ('worktree', ?, 'planted', ?, 'bob', 1, ?, ?, 'bob')
		ON CONFLICT (kind, key) DO UPDATE SET body = excluded.body, version = notes.version + 1`, task, body, now, now)
	require.NoError(t, err)
}

// TestPlantedWorktreeRecordsThroughTheCLI: the attack of issue 36 as an
// operator meets it. A record naming main for a done task: work gc and
// work release refuse it (exit 3, naming it) and main stays; release
// --forget drops it. A queued record naming main: merge run fails the
// entry, exits 3, and main stays where it was.
func TestPlantedWorktreeRecordsThroughTheCLI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	repo := checkedOut(t, "")
	ws, dsn := newWorkspace(t)
	main := gitIn(t, repo, "rev-parse", "main")
	done, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "done"})
	require.NoError(t, err)
	_, err = ws.Tasks().Update(ctx, workspace.Write{Actor: "lead"}, done.ID, workspace.TaskChange{Status: ptrTo(workspace.TaskCancelled)})
	require.NoError(t, err)
	plantRow(t, dsn, done.ID, `{"task":"`+done.ID+`","agent":"bob","branch":"main","path":"/nowhere","status":"active"}`)

	out, stderr, code := runWsctl(t, wsctlCmd(ctx, repo, dsn, "operator", nil, "work", "gc"))
	assert.Equal(t, exitConflict, code, "stdout %s stderr %s", out, stderr)
	assert.Contains(t, stderr, "skipped: worktree record of task "+done.ID+`: branch "main" is not the branch`)
	assert.Contains(t, stderr, "1 worktree record does not match the repository and was left alone")
	assert.Equal(t, main, gitIn(t, repo, "rev-parse", "refs/heads/main"))

	_, stderr, code = runWsctl(t, wsctlCmd(ctx, repo, dsn, "operator", nil, "work", "release", done.ID))
	assert.Equal(t, exitConflict, code, stderr)
	assert.Contains(t, stderr, "--forget")
	assert.Equal(t, main, gitIn(t, repo, "rev-parse", "refs/heads/main"))
	out, stderr, code = runWsctl(t, wsctlCmd(ctx, repo, dsn, "operator", nil, "work", "release", "--forget", done.ID))
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "forgot the worktree record of "+done.ID)

	queued, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "queued"})
	require.NoError(t, err)
	_, err = ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "bob", Lease: time.Hour})
	require.NoError(t, err)
	plantRow(t, dsn, queued.ID, `{"task":"`+queued.ID+`","agent":"bob","branch":"main","path":"`+repo+`","base":"`+main+`","head":"`+main+`","status":"submitted"}`)
	out, stderr, code = runWsctl(t, wsctlCmd(ctx, repo, dsn, "merger", nil, "merge", "run"))
	assert.Equal(t, exitConflict, code, "stdout %s stderr %s", out, stderr)
	assert.Contains(t, out, queued.ID+"\tfailed\t")
	assert.Contains(t, out, "merge queue: 0 merged, 0 conflicted, 1 failed\n")
	assert.Equal(t, main, gitIn(t, repo, "rev-parse", "refs/heads/main"))
	assert.Empty(t, gitIn(t, repo, "status", "--porcelain"))
	task, err := ws.Tasks().Get(ctx, queued.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskInProgress, task.Status, "no task is completed on a planted record's word")
}

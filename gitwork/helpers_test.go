package gitwork_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/gitwork"
	"github.com/agentspace/agentspace/workspace"
)

// newRepo makes a repository with one commit on main (a.txt, shared.txt)
// whose own checkout is detached, as a merge queue's hub should be.
func newRepo(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	gitT(t, "", "init", "-q", "-b", "main", dir)
	gitT(t, dir, "config", "user.email", "test@example.invalid")
	gitT(t, dir, "config", "user.name", "test")
	gitT(t, dir, "config", "gc.auto", "0") // no background gc racing the temp dir's removal
	writeFile(t, filepath.Join(dir, "a.txt"), "a\n")
	writeFile(t, filepath.Join(dir, "shared.txt"), "one\ntwo\nthree\n")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "init")
	gitT(t, dir, "checkout", "-q", "--detach")
	return dir
}

// gitT runs git in dir and returns its trimmed stdout.
func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o750))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
}

func openWS(t testing.TB) *workspace.Workspace {
	t.Helper()
	return openDSN(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
}

// openDSN opens a workspace handle on dsn, closed when the test ends.
func openDSN(t testing.TB, dsn string) *workspace.Workspace {
	t.Helper()
	ws, err := workspace.Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	return ws
}

func newManager(t testing.TB, ws *workspace.Workspace, cfg gitwork.Config) *gitwork.Manager {
	t.Helper()
	m, err := gitwork.New(context.Background(), ws, cfg)
	require.NoError(t, err)
	return m
}

// claimed adds a task and claims it as agent.
func claimed(t testing.TB, ws *workspace.Workspace, agent, title string) workspace.Task {
	t.Helper()
	ctx := context.Background()
	task, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: title, Labels: map[string]string{"t": title}})
	require.NoError(t, err)
	got, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: agent, Labels: map[string]string{"t": title}})
	require.NoError(t, err)
	require.Equal(t, task.ID, got.ID)
	return got
}

// work starts a worktree for a new task, writes files in it, commits and
// submits. It returns the record.
func work(t testing.TB, m *gitwork.Manager, ws *workspace.Workspace, agent, title string, files map[string]string) gitwork.Worktree {
	t.Helper()
	ctx := context.Background()
	task := claimed(t, ws, agent, title)
	w, err := m.Start(ctx, agent, task.ID)
	require.NoError(t, err)
	for name, content := range files {
		writeFile(t, filepath.Join(w.Path, name), content)
	}
	gitT(t, w.Path, "add", "-A")
	gitT(t, w.Path, "commit", "-q", "-m", title)
	w, err = m.Submit(ctx, agent, task.ID)
	require.NoError(t, err)
	return w
}

// firstParents lists the integration branch's first-parent subjects, oldest first.
func firstParents(t testing.TB, repo string) []string {
	t.Helper()
	out := gitT(t, repo, "log", "--first-parent", "--reverse", "--format=%s", "main")
	return strings.Split(out, "\n")
}

func record(t testing.TB, ws *workspace.Workspace, task string) gitwork.Worktree {
	t.Helper()
	recs, err := gitwork.List(context.Background(), ws)
	require.NoError(t, err)
	for _, r := range recs {
		if r.Task == task {
			return r
		}
	}
	t.Fatalf("no worktree record for task %s", task)
	return gitwork.Worktree{}
}

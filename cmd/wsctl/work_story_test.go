package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/gitwork"
	"github.com/agentspace/agentspace/internal/wsctltest"
	"github.com/agentspace/agentspace/workspace"
)

// storyAgent is one coding agent's turn: claim a task with a worktree, do
// what its title says there, commit and submit. It prints "TASK TITLE".
const storyAgent = `set -eu
line=$(wsctl task claim --worktree)
TASK=${line%%	*}
WT=${line#*	}
title=$(wsctl task show --json "$TASK" | sed -n 's/^  "title": "\(.*\)",$/\1/p')
cd "$WT"
case $title in
alpha) echo alpha > alpha.txt ;;
readme-*) printf '# Story\n%s was here\n' "$title" > README.md ;;
esac
git add -A
git commit -q -m "$title"
wsctl work submit "$TASK" >/dev/null
echo "$TASK $title"
`

// TestTheSecondFirstHourStory plays issue 38's story with real wsctl
// processes in a developer's clone (main checked out): init and setup for
// Claude Code, three agents claiming at once and working in worktrees, the
// queue merging into the checked-out main and handing one conflict back,
// its agent following the record's next step and landing it, a cancelled
// task whose worktree gc takes back, and git status clean at the end.
func TestTheSecondFirstHourStory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	repo := filepath.Join(t.TempDir(), "project")
	gitIn(t, "", "init", "-q", "-b", "main", repo)
	gitIn(t, repo, "config", "user.email", "dev@example.invalid")
	gitIn(t, repo, "config", "user.name", "dev")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "README.md"), []byte("# Story\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".gitignore"), []byte(".agentspace/\n"), 0o600))
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "commit", "-q", "-m", "init")

	// wsctl in dir as actor, finding the workspace as a user's shell does.
	run := func(dir, actor string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, "wsctl", args...)
		cmd.Dir = dir
		cmd.Env = wsctltest.Env()
		if actor != "" {
			cmd.Env = append(cmd.Env, "AGENTSPACE_ACTOR="+actor)
		}
		return runWsctl(t, cmd)
	}
	sh := func(dir, actor, script string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", script, "sh"}, args...)...)
		cmd.Dir = dir
		cmd.Env = wsctltest.Env("AGENTSPACE_ACTOR="+actor, "GIT_EDITOR=true")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("%s: %v", script, err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	must := func(out, stderr string, code int) string {
		t.Helper()
		require.Equal(t, 0, code, "stdout %s stderr %s", out, stderr)
		return out
	}

	must(run(repo, "", "init"))
	must(run(repo, "", "setup", "claude"))
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "commit", "-q", "-m", "agent setup")
	require.Empty(t, gitIn(t, repo, "status", "--porcelain"), "the workspace is ignored")
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(repo, ".agentspace", "workspace.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })

	for _, task := range []struct {
		title string
		prio  string
	}{{"alpha", "3"}, {"readme-a", "2"}, {"readme-b", "2"}, {"dropped", "0"}} {
		must(run(repo, "lead", "task", "add", task.title, "--priority", task.prio))
	}

	// Three agents claim at once, each works in its own worktree and submits.
	agents := []string{"ann", "bob", "cid"}
	took := map[string]string{} // title -> task id
	owner := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, agent := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, code := sh(repo, agent, storyAgent)
			mu.Lock()
			defer mu.Unlock()
			if !assert.Equal(t, 0, code, "%s: %s", agent, out) {
				return
			}
			id, title, _ := strings.Cut(strings.TrimSpace(out), " ")
			took[title], owner[title] = id, agent
		}()
	}
	wg.Wait()
	require.Len(t, took, 3, "%v", took)
	require.NotContains(t, took, "dropped", "the lowest priority waits")

	// The queue merges into the checked-out main and hands one back.
	out, stderr, code := run(repo, "merger", "merge", "run")
	require.Equal(t, exitConflict, code, "stdout %s stderr %s", out, stderr)
	assert.Contains(t, out, "merge queue: 2 merged, 1 conflicted, 0 failed\n")
	assert.Empty(t, gitIn(t, repo, "status", "--porcelain"), "main's checkout followed the merges")
	var back string
	for _, title := range []string{"readme-a", "readme-b"} {
		if strings.Contains(out, took[title]+"\tconflicted\t") {
			back = title
		}
	}
	require.NotEmpty(t, back, "one README edit came back: %s", out)

	// Its agent asks what happened and does what it is told.
	mine := must(run(repo, owner[back], "work"))
	assert.Contains(t, mine, "came back from the merge queue: conflicting files: README.md")
	assert.Contains(t, mine, "run 'git rebase main', resolve README.md, commit, then run 'wsctl work submit "+took[back]+"'")
	rec, err := ws.Notes().Get(ctx, gitwork.NoteKind, took[back])
	require.NoError(t, err)
	wt := filepath.Join(repo, ".agentspace", "worktrees", strings.ReplaceAll(took[back], "-", "")[20:])
	require.Contains(t, rec.Body, wt)
	resolve := `set -u
cd "$1"
git rebase main >/dev/null 2>&1 && exit 1   # it must stop on the conflict
set -e
printf '# Story\nreadme-a was here\nreadme-b was here\n' > README.md
git add README.md
git rebase --continue >/dev/null
wsctl work submit "$2" >/dev/null
`
	out, code = sh(repo, owner[back], resolve, wt, took[back])
	require.Equal(t, 0, code, out)
	out = must(run(repo, "merger", "merge", "run"))
	assert.Contains(t, out, took[back]+"\tmerged\t")
	assert.Contains(t, out, "merge queue: 1 merged, 0 conflicted, 0 failed\n")

	// A task is cancelled while its agent works on it; gc takes its worktree back.
	claimed := must(run(repo, "ann", "task", "claim", "--worktree"))
	dropped, dwt, _ := strings.Cut(strings.TrimSpace(claimed), "\t")
	require.NoError(t, os.WriteFile(filepath.Join(dwt, "scratch.txt"), []byte("half done\n"), 0o600))
	_, err = ws.Tasks().Update(ctx, workspace.Write{Actor: "lead", Message: "not needed after all"}, dropped, workspace.TaskChange{Status: ptrTo(workspace.TaskCancelled)})
	require.NoError(t, err)
	out = must(run(repo, "operator", "work", "gc"))
	assert.Regexp(t, dropped+` +released +agent/`, out)
	assert.NoDirExists(t, dwt)
	assert.Equal(t, "half done", gitIn(t, repo, "show", "refs/agentspace/backup/"+strings.ReplaceAll(dropped, "-", "")[20:]+":scratch.txt"),
		"the cancelled task's unfinished work is kept")

	// The end: main holds the three tasks' work, and the clone is clean.
	assert.Empty(t, gitIn(t, repo, "status", "--porcelain"))
	assert.Equal(t, "# Story\nreadme-a was here\nreadme-b was here", gitIn(t, repo, "show", "HEAD:README.md"))
	b, err := os.ReadFile(filepath.Join(repo, "README.md"))
	require.NoError(t, err)
	assert.Equal(t, "# Story\nreadme-a was here\nreadme-b was here\n", string(b))
	assert.FileExists(t, filepath.Join(repo, "alpha.txt"))
	assert.Equal(t, 1, strings.Count(gitIn(t, repo, "worktree", "list"), "\n")+1, "only the clone's own checkout is left")
	for title, id := range took {
		task, err := ws.Tasks().Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, workspace.TaskDone, task.Status, title)
	}
	task, err := ws.Tasks().Get(ctx, dropped)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskCancelled, task.Status)
}

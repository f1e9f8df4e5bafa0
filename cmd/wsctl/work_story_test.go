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
	claudeMD, err := os.ReadFile(filepath.Join(repo, "CLAUDE.md"))
	require.NoError(t, err)
	assert.Contains(t, string(claudeMD), "task_claim with worktree=true", "in a git repository the agent is told to claim its worktree")
	assert.Contains(t, must(run(repo, "ann", "prime")), "commit only in the worktree.path it returns, never in the main\ncheckout")
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

	issue50Traps(t, ctx, repo, ws, run, sh)

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

// issue50Traps plays, in the story's clone, the errors that pointed the
// wrong way: each now says what happened and what to do, with the exit
// code the docs promise.
func issue50Traps(t *testing.T, ctx context.Context, repo string, ws *workspace.Workspace,
	run func(dir, actor string, args ...string) (string, string, int), sh func(dir, actor, script string, args ...string) (string, int)) {
	t.Helper()
	must := func(out, stderr string, code int) string {
		t.Helper()
		require.Equal(t, 0, code, "stdout %s stderr %s", out, stderr)
		return out
	}
	add := func(title string) string {
		t.Helper()
		return strings.TrimSpace(must(run(repo, "lead", "task", "add", title, "--priority", "9")))
	}
	claimWorktree := func(actor string) (string, string) {
		t.Helper()
		id, wt, _ := strings.Cut(strings.TrimSpace(must(run(repo, actor, "task", "claim", "--worktree"))), "\t")
		return id, wt
	}
	commit := `set -e; cd "$1"; printf '%s\n' "$2" > "$2.txt"; git add -A; git commit -q -m "$2"`

	// A failed merge validation: the agent sees the failing command's output.
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".git", "info", "exclude"), []byte("agentspace.toml\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "agentspace.toml"),
		[]byte("[merge]\nvalidate = [\"if test -e broken.txt; then echo 'lint: broken.txt is not allowed' >&2; exit 2; fi\"]\n"), 0o600))
	t.Cleanup(func() { _ = os.Remove(filepath.Join(repo, "agentspace.toml")) })
	broken := add("broken")
	id, wt := claimWorktree("ann")
	require.Equal(t, broken, id)
	out, code := sh(repo, "ann", commit, wt, "broken")
	require.Equal(t, 0, code, out)
	must(run(wt, "ann", "work", "submit", broken)) // in the worktree: agentspace.toml names no dsn, the store is the one beside it
	out, stderr, code := run(repo, "merger", "merge", "run")
	assert.NotEqual(t, 0, code, "a failed entry: %s %s", out, stderr)
	assert.Contains(t, out, broken+"\tfailed\t")
	mine := must(run(repo, "ann", "work"))
	assert.Contains(t, mine, "came back from the merge queue: $ if test -e broken.txt")
	assert.Contains(t, mine, "    lint: broken.txt is not allowed\n", "wsctl work shows the output")
	shown := must(run(repo, "ann", "task", "get", broken)) // get, as artifact get
	assert.Contains(t, shown, "lint: broken.txt is not allowed", "the task's result shows it too")
	must(run(repo, "ann", "work", "release", broken))
	require.NoError(t, os.Remove(filepath.Join(repo, "agentspace.toml")))

	// A stopped agent's late "done": it no longer holds the task (exit 4).
	stopped := add("stopped")
	require.Equal(t, stopped, strings.Fields(must(run(repo, "bob", "task", "claim")))[0])
	must(run(repo, "operator", "agent", "stop", "bob", "-m", "stuck in a loop"))
	_, stderr, code = run(repo, "bob", "task", "done", stopped)
	assert.Equal(t, exitLocked, code, stderr)
	assert.Contains(t, stderr, `is pending: "bob" does not hold it`)
	assert.NotContains(t, stderr, "cannot go from")
	_, err := ws.Tasks().Update(ctx, workspace.Write{Actor: "lead"}, stopped, workspace.TaskChange{Status: ptrTo(workspace.TaskCancelled)})
	require.NoError(t, err)

	// A dirty worktree's advice comes once; a cancelled task's submit says so.
	cancelled := add("cancelled")
	id, wt = claimWorktree("cid")
	require.Equal(t, cancelled, id)
	out, code = sh(repo, "cid", commit, wt, "cancelled")
	require.Equal(t, 0, code, out)
	require.NoError(t, os.WriteFile(filepath.Join(wt, "half.txt"), []byte("half\n"), 0o600))
	_, stderr, code = run(wt, "cid", "work", "submit", cancelled)
	assert.Equal(t, exitConflict, code, stderr)
	assert.Equal(t, 1, strings.Count(stderr, "commit or remove them"), stderr)
	assert.NotContains(t, stderr, "commit your changes")
	require.NoError(t, os.Remove(filepath.Join(wt, "half.txt")))
	_, err = ws.Tasks().Update(ctx, workspace.Write{Actor: "lead", Message: "not needed"}, cancelled, workspace.TaskChange{Status: ptrTo(workspace.TaskCancelled)})
	require.NoError(t, err)
	_, stderr, code = run(wt, "cid", "work", "submit", cancelled)
	assert.Equal(t, exitConflict, code, stderr)
	assert.Contains(t, stderr, "was cancelled by lead: nothing is left to do in it: 'wsctl work release "+cancelled+"'")
	assert.NotContains(t, stderr, "claim it first")
	must(run(repo, "cid", "work", "release", cancelled))

	// The size limit names its parameter.
	cmd := exec.CommandContext(ctx, "wsctl", "--dsn", "sqlite:.agentspace/workspace.db?ws_max_artifact_size=8", "artifact", "put", "notes/big.md")
	cmd.Dir, cmd.Env, cmd.Stdin = repo, wsctltest.Env("AGENTSPACE_ACTOR=ann"), strings.NewReader("more than eight bytes")
	_, stderr, code = runWsctl(t, cmd)
	assert.Equal(t, exitUsage, code, stderr)
	assert.Contains(t, stderr, "over the limit of 8 (the store's ws_max_artifact_size)")

	// The event log: --type as the API takes it; past the head, where to go.
	out = must(run(repo, "", "events", "--json", "--type", "task.claimed,task.released", "--subject", "task:"+stopped))
	assert.Equal(t, 2, strings.Count(out, "\n"), "claimed, then returned by the stop: %s", out)
	must(run(repo, "", "events", "--type", "denied"))
	_, stderr, code = run(repo, "", "events", "--follow", "--after", "99999")
	assert.Equal(t, exitError, code, stderr)
	assert.Contains(t, stderr, "resume from the head (after=")
	assert.Contains(t, stderr, "'--after 0' reads the whole log")

	// A server that wants a token says which variable holds it (exit 10).
	_, base, _ := startServe(t, "sqlite:"+filepath.Join(repo, ".agentspace", "workspace.db"), "--require-token", "--listen", "127.0.0.1:0")
	_, stderr, code = run(repo, "ann", "--dsn", base, "task", "ls")
	assert.Equal(t, exitUnauthorized, code, stderr)
	assert.Contains(t, stderr, "set AGENTSPACE_TOKEN")
}

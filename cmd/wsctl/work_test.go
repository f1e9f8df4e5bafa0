package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/gitwork"
	"github.com/agentspace/agentspace/internal/procstop"
	"github.com/agentspace/agentspace/internal/wsctltest"
	"github.com/agentspace/agentspace/workspace"
)

// gitRepo makes a repository with one commit on main (shared.txt), its
// own checkout detached, and an agentspace.toml beside it (untracked).
func gitRepo(t *testing.T, toml string) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "repo")
	gitIn(t, "", "init", "-q", "-b", "main", repo)
	gitIn(t, repo, "config", "user.email", "test@example.invalid")
	gitIn(t, repo, "config", "user.name", "test")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "shared.txt"), []byte("one\ntwo\nthree\n"), 0o600))
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "commit", "-q", "-m", "init")
	gitIn(t, repo, "checkout", "-q", "--detach")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "agentspace.toml"), []byte(toml), 0o600))
	return repo
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// wsctlCmd is wsctl (this test binary, see TestMain) in dir against dsn.
func wsctlCmd(ctx context.Context, dir, dsn, actor string, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "wsctl", args...)
	cmd.Dir = dir
	cmd.Env = wsctltest.Env("AGENTSPACE_DSN=" + dsn)
	if actor != "" {
		cmd.Env = append(cmd.Env, "AGENTSPACE_ACTOR="+actor)
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

func newWorkspace(t *testing.T) (*workspace.Workspace, string) {
	t.Helper()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	ws, err := workspace.Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	return ws, dsn
}

// TestWorktreeAgentsMergeInSubmissionOrderAndOneConflicts runs five copies
// of docs/shell-agents.md's worktree agent at once over five tasks, then the merge
// queue: the four that touch disjoint files (and the first of the two
// that touch shared.txt) land in submission order, validated; the other
// comes back with shared.txt named, and main holds exactly the merged ones.
func TestWorktreeAgentsMergeInSubmissionOrderAndOneConflicts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	repo := gitRepo(t, "[merge]\nvalidate = [\"test -f shared.txt\"]\ntimeout = \"1m\"\n")
	ws, dsn := newWorkspace(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "worktree-agent.sh")
	require.NoError(t, os.WriteFile(script, []byte(wsctltest.DocScript(t, "#!/usr/bin/env sh")), 0o600))
	// Each task's title says what its work writes.
	doWork := filepath.Join(dir, "do-work.sh")
	require.NoError(t, os.WriteFile(doWork, []byte(`set -eu
title=$(wsctl task show --json "$TASK" | sed -n 's/^  "title": "\(.*\)",$/\1/p')
echo "$title" > "$title.txt"
case $title in f1|clash) printf '%s\ntwo\nthree\n' "$title" > shared.txt ;; esac
`), 0o600))
	for _, title := range []string{"f1", "f2", "f3", "f4", "clash"} {
		_, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: title})
		require.NoError(t, err)
	}

	var wg sync.WaitGroup
	errs := make([]string, 5)
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := wsctlCmd(ctx, repo, dsn, "", nil)
			cmd.Path, cmd.Args = "/bin/sh", []string{"sh", script, "sh", doWork}
			out, err := cmd.CombinedOutput()
			if err != nil {
				errs[i] = err.Error() + ": " + string(out)
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		require.Empty(t, e)
	}
	queued, err := gitwork.List(ctx, ws)
	require.NoError(t, err)
	require.Len(t, queued, 5)

	out, err := wsctlCmd(ctx, repo, dsn, "merger", nil, "merge", "run", "--once", "--json").Output()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "an entry came back, so merge run fails: %v %s", err, out)
	assert.Equal(t, exitConflict, ee.ExitCode(), "%s", ee.Stderr)
	assert.Contains(t, string(ee.Stderr), "1 merge queue entry came back to its agent")

	titles := map[string]string{}
	page, err := ws.Tasks().List(ctx, workspace.TaskFilter{})
	require.NoError(t, err)
	for _, task := range page.Tasks {
		titles[task.ID] = task.Title
	}
	var merged []string
	var conflicted []string
	for _, w := range queued { // in submission order
		rec, err := ws.Notes().Get(ctx, gitwork.NoteKind, w.Task)
		require.NoError(t, err)
		task, err := ws.Tasks().Get(ctx, w.Task)
		require.NoError(t, err)
		switch {
		case strings.Contains(rec.Body, `"status":"released"`):
			merged = append(merged, "task "+w.Task)
			assert.Equal(t, workspace.TaskDone, task.Status)
		case strings.Contains(rec.Body, `"status":"conflicted"`):
			conflicted = append(conflicted, titles[w.Task])
			assert.Contains(t, rec.Body, "shared.txt", "the conflicting file is named")
			assert.Equal(t, workspace.TaskInProgress, task.Status, "back with its agent")
		default:
			t.Errorf("task %s (%s): %s", w.Task, titles[w.Task], rec.Body)
		}
	}
	require.Len(t, conflicted, 1, "merge output: %s", out)
	firstShared := "f1"
	for _, w := range queued {
		if ti := titles[w.Task]; ti == "f1" || ti == "clash" {
			firstShared = ti
			break
		}
	}
	assert.NotEqual(t, firstShared, conflicted[0], "the later of the two shared.txt edits is the one that conflicts")
	log := strings.Split(gitIn(t, repo, "log", "--first-parent", "--reverse", "--format=%s", "main"), "\n")
	assert.Equal(t, append([]string{"init"}, merged...), log, "main holds exactly the merged ones, in submission order")
}

// TestTwoMergersOneAtATimeAndAPausedOneCannotAdvance starts two mergers at
// once (one merges, the other waits and finds nothing), then pauses a
// merger mid-entry past its lease (SIGSTOP): another takes over and lands
// the entry, and the paused one, resumed, cannot move main.
func TestTwoMergersOneAtATimeAndAPausedOneCannotAdvance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	repo := gitRepo(t, "[merge]\nlease = \"1s\"\n")
	ws, dsn := newWorkspace(t)
	m, err := gitwork.New(ctx, ws, gitwork.Config{Repo: repo})
	require.NoError(t, err)
	for i := range 3 {
		submitOne(t, ws, m, "agent", i)
	}
	slow := []string{"AGENTSPACE_TEST_MERGE_STEP_DELAY=100ms"}
	a := wsctlCmd(ctx, repo, dsn, "merger-a", slow, "merge", "run", "--once", "--json")
	b := wsctlCmd(ctx, repo, dsn, "merger-b", slow, "merge", "run", "--once", "--json")
	var aOut, bOut bytes.Buffer
	a.Stdout, b.Stdout = &aOut, &bOut
	require.NoError(t, a.Start())
	require.NoError(t, b.Start())
	require.NoError(t, a.Wait())
	require.NoError(t, b.Wait())
	lines := strings.Count(aOut.String(), "\n") + strings.Count(bOut.String(), "\n")
	assert.Equal(t, 3, lines, "each entry merged once: a=%s b=%s", aOut.String(), bOut.String())
	assert.True(t, aOut.Len() == 0 || bOut.Len() == 0, "one merger did all the work while the other waited: a=%s b=%s", aOut.String(), bOut.String())
	assert.Len(t, strings.Split(gitIn(t, repo, "log", "--first-parent", "--format=%s", "main"), "\n"), 4)

	// Pause a merger mid-entry, past its 1s lease.
	w := submitOne(t, ws, m, "agent", 3)
	before := gitIn(t, repo, "rev-parse", "main")
	paused := wsctlCmd(ctx, repo, dsn, "merger-paused", []string{"AGENTSPACE_TEST_MERGE_STEP_DELAY=1500ms"}, "merge", "run", "--once")
	var pausedErr bytes.Buffer
	paused.Stderr = &pausedErr
	require.NoError(t, paused.Start())
	require.Eventually(t, func() bool {
		n, err := ws.Notes().Get(ctx, gitwork.NoteKind, w.Task)
		return err == nil && strings.Contains(n.Body, `"status":"merging"`)
	}, 30*time.Second, 20*time.Millisecond)
	freezeOutsideWrite(ctx, t, paused.Process.Pid, strings.TrimPrefix(dsn, "sqlite:"))
	time.Sleep(1500 * time.Millisecond) // the lease (1s) lapses while it is stopped

	out, err := wsctlCmd(ctx, repo, dsn, "merger-next", nil, "merge", "run", "--once").CombinedOutput()
	require.NoError(t, err, "%s", out)
	landed := gitIn(t, repo, "rev-parse", "main")
	require.NotEqual(t, before, landed, "the next merger landed the entry")

	require.NoError(t, paused.Process.Signal(syscall.SIGCONT))
	err = paused.Wait()
	require.Error(t, err, "the paused merger must fail: %s", pausedErr.String())
	assert.Equal(t, landed, gitIn(t, repo, "rev-parse", "main"), "the paused merger did not move main")
	assert.Len(t, strings.Split(gitIn(t, repo, "log", "--first-parent", "--format=%s", "main"), "\n"), 5, "merged once")
}

// freezeOutsideWrite stops process pid (SIGSTOP) at a moment it holds no
// write transaction on the SQLite file at path. The merger renews its
// lease every third of its TTL, and a process frozen inside that
// transaction rightly keeps SQLite's write lock: every other writer would
// wait for it, not for the lease (conformance's paused-holder case freezes
// an idle child for the same reason). Stopped inside one, the process is
// let go for a moment and stopped again.
func freezeOutsideWrite(ctx context.Context, t *testing.T, pid int, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	require.NoError(t, err)
	defer db.Close()
	conn, err := db.Conn(ctx) // BEGIN and ROLLBACK on one connection
	require.NoError(t, err)
	defer conn.Close()
	for try := 0; ; try++ {
		require.NoError(t, procstop.Stop(ctx, pid), "the merger never stopped")
		_, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE")
		if err == nil {
			_, err = conn.ExecContext(ctx, "ROLLBACK")
			require.NoError(t, err)
			return
		}
		require.Contains(t, err.Error(), "SQLITE_BUSY", "only a held write lock may refuse the transaction")
		require.Less(t, try, 100, "the merger was inside a write transaction each of 100 times it was stopped")
		require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
		time.Sleep(time.Duration(1+rand.IntN(10)) * time.Millisecond)
	}
}

// submitOne claims a new task as agent, commits file i in its worktree and submits it.
func submitOne(t *testing.T, ws *workspace.Workspace, m *gitwork.Manager, agent string, i int) gitwork.Worktree {
	t.Helper()
	ctx := context.Background()
	title := "file" + strings.Repeat("x", i)
	task, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: title, Labels: map[string]string{"n": title}})
	require.NoError(t, err)
	_, err = ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: agent, Labels: map[string]string{"n": title}, Lease: time.Hour})
	require.NoError(t, err)
	w, err := m.Start(ctx, agent, task.ID)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(w.Path, title+".txt"), []byte(title+"\n"), 0o600))
	gitIn(t, w.Path, "add", "-A")
	gitIn(t, w.Path, "commit", "-q", "-m", "task "+task.ID)
	w, err = m.Submit(ctx, agent, task.ID)
	require.NoError(t, err)
	return w
}

// TestMergerKilledAtRandomMomentsKeepsMainValidated SIGKILLs the merger 20
// times at random moments over a queue of entries: after each kill main
// is at its old commit or at a validated candidate, and restarted mergers
// finish or retry every entry, which the records say.
func TestMergerKilledAtRandomMomentsKeepsMainValidated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	validated := filepath.Join(t.TempDir(), "validated")
	repo := gitRepo(t, "[merge]\nlease = \"5s\"\nvalidate = [\"sleep 0.05\", \"echo $AGENTSPACE_MERGE_CANDIDATE >> '"+validated+"'\"]\n")
	ws, dsn := newWorkspace(t)
	m, err := gitwork.New(ctx, ws, gitwork.Config{Repo: repo})
	require.NoError(t, err)
	const entries = 10
	for i := range entries {
		submitOne(t, ws, m, "agent", i)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 23))
	interrupted := map[string]bool{}
	midEntry := 0
	for kill := range 20 {
		before := gitIn(t, repo, "rev-parse", "main")
		prev, _ := ws.Locks().Get(ctx, gitwork.QueueResource("main"))
		cmd := wsctlCmd(ctx, repo, dsn, "merger", []string{"AGENTSPACE_TEST_MERGE_STEP_DELAY=5ms"}, "merge", "run", "--once")
		require.NoError(t, cmd.Start())
		// Kill it at a random moment once it holds the queue.
		require.Eventually(t, func() bool {
			l, err := ws.Locks().Get(ctx, gitwork.QueueResource("main"))
			return err == nil && l.Token != prev.Token
		}, 30*time.Second, 5*time.Millisecond)
		delay := time.Duration(rng.IntN(700)) * time.Millisecond
		time.Sleep(delay)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		// Free its lease at once rather than wait out the TTL (expiry is
		// the SIGSTOP test's subject): the next merger gets a new token. A
		// merger that drained the queue before the kill released it itself.
		if err := ws.Locks().ForceRelease(ctx, workspace.Write{Actor: "test"}, gitwork.QueueResource("main")); !errors.Is(err, workspace.ErrNotFound) {
			require.NoError(t, err)
		}

		after := gitIn(t, repo, "rev-parse", "main")
		if after != before {
			b, err := os.ReadFile(validated)
			require.NoError(t, err)
			assert.Contains(t, strings.Fields(string(b)), after, "kill %d after %s: main moved only to a validated commit", kill, delay)
			assert.Equal(t, "0", gitIn(t, repo, "rev-list", "--count", after+".."+before), "kill %d: main only moves forward", kill)
		}
		recs, err := gitwork.List(ctx, ws)
		require.NoError(t, err)
		mid := false
		for _, r := range recs {
			if r.Status == gitwork.StatusMerging {
				interrupted[r.Task] = true
			}
			mid = mid || r.Status == gitwork.StatusMerging || r.Status == gitwork.StatusMerged
		}
		if mid {
			midEntry++
		}
	}
	mergedBefore, err := strconv.Atoi(gitIn(t, repo, "rev-list", "--count", "--first-parent", "main"))
	require.NoError(t, err)
	mergedBefore-- // the initial commit
	// Restarted to the end, the queue drains.
	out, err := wsctlCmd(ctx, repo, dsn, "merger", nil, "merge", "run", "--once").CombinedOutput()
	require.NoError(t, err, "%s", out)
	recs, err := gitwork.List(ctx, ws)
	require.NoError(t, err)
	for _, r := range recs {
		assert.Equal(t, gitwork.StatusReleased, r.Status, "task %s: %s", r.Task, r.Detail)
		assert.NotEmpty(t, r.Merged)
	}
	log := strings.Split(gitIn(t, repo, "log", "--first-parent", "--format=%s", "main"), "\n")
	assert.Len(t, log, entries+1, "every entry merged exactly once")
	for task := range interrupted {
		evs, err := ws.Events().Read(ctx, workspace.EventQuery{SubjectKind: string(workspace.SubjectNote), SubjectID: gitwork.NoteKind + "/" + task, Limit: 1000})
		require.NoError(t, err)
		var says bool
		for _, e := range evs.Events {
			says = says || strings.Contains(e.Message, "finished after a merger stopped") || strings.Contains(e.Message, "retried")
		}
		assert.True(t, says, "task %s: the records say how the interrupted entry ended", task)
	}
	t.Logf("%d of 20 kills landed mid-entry; %d entries were interrupted while merging; %d merged before the last run",
		midEntry, len(interrupted), mergedBefore)
}

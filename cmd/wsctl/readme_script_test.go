package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/wsctltest"
	"github.com/agentspace/agentspace/workspace"
)

// agentRun is one copy of the shell agent: its exit code and what it said.
type agentRun struct {
	code   int
	stderr string
}

// runShellAgent runs the shell agent script of docs/shell-agents.md once against dsn, on artifact,
// with work as the command it runs for each task. wsctl on its $PATH is
// the real program (wsctltest.Binary, built once and shared with the
// script tests); AGENTSPACE_ACTOR is unset, so each copy picks its own
// actor as the script says.
func runShellAgent(ctx context.Context, t *testing.T, script, dsn, artifact string, work ...string) agentRun {
	t.Helper()
	cmd := exec.CommandContext(ctx, "sh", append([]string{script, artifact}, work...)...)
	cmd.Dir = filepath.Dir(script)
	// wsctltest.Env: a race-enabled wsctl would sleep 1s at exit; the
	// agents make dozens of calls.
	path := filepath.Dir(wsctltest.Binary(t)) + string(os.PathListSeparator) + os.Getenv("PATH")
	cmd.Env = wsctltest.Env("AGENTSPACE_DSN="+dsn, "PATH="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running the shell agent: %v", err)
	}
	return agentRun{code: cmd.ProcessState.ExitCode(), stderr: stderr.String()}
}

// TestReadmeShellAgentIsSafeInParallel runs three copies of docs/shell-agents.md's
// shell agent at once over six tasks that each append a line to one
// artifact: every task is claimed once and done, the lock changes hands
// with a new token each time and is never shared, and no write is lost.
func TestReadmeShellAgentIsSafeInParallel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	script := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(script, []byte(wsctltest.DocScript(t, "#!/bin/sh")), 0o600))
	dsn := "sqlite:" + filepath.Join(dir, "ws.db")

	ws, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	defer ws.Close()
	lead := workspace.Write{Actor: "lead"}
	var ids []string
	for i := range 6 {
		task, err := ws.Tasks().Create(ctx, lead, workspace.NewTask{Title: fmt.Sprintf("step %d", i)})
		require.NoError(t, err)
		ids = append(ids, task.ID)
	}

	// The work reads the artifact, thinks a little, and appends the task's
	// id: two agents inside the lock at once would lose a line.
	const artifact = "notes/log.md"
	work := []string{"sh", "-c", `cat; sleep 0.05; echo "$TASK"`}
	runs := make([]agentRun, 3)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() { runs[i] = runShellAgent(ctx, t, script, dsn, artifact, work...) })
	}
	wg.Wait()
	for i, r := range runs {
		require.Equal(t, 0, r.code, "copy %d failed:\n%s", i, r.stderr)
	}

	// Every task done, each claimed exactly once.
	for _, id := range ids {
		task, err := ws.Tasks().Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, workspace.TaskDone, task.Status, "task %s", id)
		assert.Equal(t, 1, task.Attempts, "task %s claimed once", id)
	}
	claims, err := ws.Events().Read(ctx, workspace.EventQuery{Types: []string{workspace.EventTaskClaimed}, Limit: 10000})
	require.NoError(t, err)
	assert.Len(t, claims.Events, len(ids), "one claim per task")

	// No write lost: one line per task, one version per task.
	a, err := ws.Artifacts().Get(ctx, workspace.ByName(artifact))
	require.NoError(t, err)
	lines := strings.Fields(string(a.Content))
	assert.ElementsMatch(t, ids, lines, "each task's line exactly once")
	assert.Equal(t, int64(len(ids)), a.Version)

	// The lock: acquired(n), released(n), acquired(n+1)... with a new token
	// each time and never extended: no two copies shared it.
	evs, err := ws.Events().Read(ctx, workspace.EventQuery{SubjectKind: "lock", SubjectName: "artifact:" + artifact, Limit: 10000,
		Types: []string{workspace.EventLockAcquired, workspace.EventLockReleased}})
	require.NoError(t, err)
	require.Len(t, evs.Events, 2*len(ids))
	holders := map[string]bool{}
	for i, e := range evs.Events {
		token := int64(i/2 + 1)
		want := workspace.EventLockAcquired
		if i%2 == 1 {
			want = workspace.EventLockReleased
		} else {
			holders[e.Actor] = true
		}
		assert.Equal(t, want, e.Type, "event #%d", e.Seq)
		assert.Equal(t, token, e.Version, "event #%d: token", e.Seq)
	}
	assert.NotContains(t, holders, "", "every copy named itself")
	t.Logf("%d copies, %d distinct lock holders", len(runs), len(holders))
}

// TestReadmeShellAgentGivesBackWhatItHeldOnFailure: when the work fails,
// the script exits non-zero and leaves neither the task claimed nor the
// lock held, so another agent can take the task at once.
func TestReadmeShellAgentGivesBackWhatItHeldOnFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	script := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(script, []byte(wsctltest.DocScript(t, "#!/bin/sh")), 0o600))
	dsn := "sqlite:" + filepath.Join(dir, "ws.db")

	ws, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	defer ws.Close()
	task, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "doomed"})
	require.NoError(t, err)

	r := runShellAgent(ctx, t, script, dsn, "notes/log.md", "false")
	assert.NotEqual(t, 0, r.code, "a failed work command fails the agent")

	got, err := ws.Tasks().Get(ctx, task.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskPending, got.Status, "the task is given back")
	assert.Equal(t, 1, got.Attempts)
	leases, err := ws.Locks().List(ctx)
	require.NoError(t, err)
	assert.Empty(t, leases, "the lock is released")
	_, err = ws.Artifacts().Get(ctx, workspace.ByName("notes/log.md"))
	assert.ErrorIs(t, err, workspace.ErrNotFound, "nothing was written")
}

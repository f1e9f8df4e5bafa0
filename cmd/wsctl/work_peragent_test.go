package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/gitwork"
	"github.com/agentspace/agentspace/workspace"
)

// perAgentLoop is an agent that takes tasks until none is ready, each in
// its own long-lived worktree: claim --worktree --per-agent, write a file
// named after the task, commit, submit, and wait for the merge queue to
// finish it before the next. A claim refused because the worktree still
// holds the last task (exit 3) is given back and tried again.
const perAgentLoop = `set -u
n=0
while :; do
	line=$(wsctl task claim --worktree --per-agent --repo "$REPO")
	rc=$?
	case $rc in
	0) ;;
	6) echo "done after $n tasks"; exit 0 ;;
	3) sleep 0.1; continue ;;
	*) exit $rc ;;
	esac
	TASK=${line%%	*}
	WT=${line#*	}
	( cd "$WT" && echo "$TASK" > "$TASK.txt" && git add -A && git commit -q -m "task $TASK" ) || exit 1
	wsctl work submit --repo "$REPO" "$TASK" >/dev/null || exit 1
	until wsctl task show --json "$TASK" | grep -q '"status": "done"'; do sleep 0.05; done
	n=$((n+1))
done
`

// TestPerAgentWorktreesAcrossProcesses runs three agent processes in
// per-agent mode over nine tasks with a merger following the queue: every
// task lands once, each agent worked in one worktree throughout, and each
// agent's branch ends up holding nothing main lacks.
func TestPerAgentWorktreesAcrossProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	repo := gitRepo(t, "[merge]\nvalidate = [\"test -f shared.txt\"]\n")
	ws, dsn := newWorkspace(t)
	const tasks = 9
	for i := range tasks {
		_, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "t" + strings.Repeat("i", i)})
		require.NoError(t, err)
	}
	mctx, stop := context.WithCancel(ctx)
	defer stop()
	merger := wsctlCmd(mctx, repo, dsn, "merger", nil, "merge", "run", "--follow")
	var mergerOut bytes.Buffer
	merger.Stdout, merger.Stderr = &mergerOut, &mergerOut
	require.NoError(t, merger.Start())

	agents := []string{"ann", "bob", "cat"}
	var wg sync.WaitGroup
	outs := make([]string, len(agents))
	errs := make([]error, len(agents))
	for i, agent := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := wsctlCmd(ctx, repo, dsn, agent, []string{"REPO=" + repo})
			cmd.Path, cmd.Args = "/bin/sh", []string{"sh", "-c", perAgentLoop}
			out, err := cmd.CombinedOutput()
			outs[i], errs[i] = string(out), err
		}()
	}
	wg.Wait()
	require.NoError(t, merger.Process.Signal(syscall.SIGINT))
	require.NoError(t, merger.Wait(), "%s", mergerOut.String())
	for i := range agents {
		require.NoError(t, errs[i], "%s: %s", agents[i], outs[i])
	}

	recs, err := gitwork.List(ctx, ws)
	require.NoError(t, err)
	require.Len(t, recs, tasks)
	paths := map[string]map[string]bool{}
	for _, r := range recs {
		assert.Equal(t, gitwork.StatusReleased, r.Status, "task %s: %s", r.Task, r.Detail)
		assert.True(t, r.PerAgent)
		assert.Equal(t, "agent/"+r.Agent, r.Branch)
		if paths[r.Agent] == nil {
			paths[r.Agent] = map[string]bool{}
		}
		paths[r.Agent][r.Path] = true
		task, err := ws.Tasks().Get(ctx, r.Task)
		require.NoError(t, err)
		assert.Equal(t, workspace.TaskDone, task.Status)
		assert.Equal(t, r.Task+"\n", gitIn(t, repo, "show", "main:"+r.Task+".txt")+"\n", "task %s landed", r.Task)
	}
	for agent, ps := range paths {
		assert.Len(t, ps, 1, "%s used one worktree for all its tasks: %v", agent, ps)
	}
	log := strings.Split(gitIn(t, repo, "log", "--first-parent", "--format=%s", "main"), "\n")
	assert.Len(t, log, tasks+1, "every task merged exactly once")
	for agent := range paths {
		assert.Empty(t, gitIn(t, repo, "rev-list", "main..agent/"+agent), "%s's branch holds nothing main lacks", agent)
	}
}

// TestTaskClaimWorktree claims and starts in one command, in text and in
// JSON, and gives the claim back when the worktree cannot be made.
func TestTaskClaimWorktree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	repo := gitRepo(t, "")
	ws, dsn := newWorkspace(t)
	for _, title := range []string{"a", "b", "c"} {
		_, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: title, Priority: int('z' - title[0])})
		require.NoError(t, err)
	}

	out, err := wsctlCmd(ctx, repo, dsn, "ann", nil, "task", "claim", "--worktree").Output()
	require.NoError(t, err)
	id, path, ok := strings.Cut(strings.TrimSpace(string(out)), "\t")
	require.True(t, ok, "ID<TAB>PATH: %q", out)
	rec, err := ws.Notes().Get(ctx, gitwork.NoteKind, id)
	require.NoError(t, err)
	assert.Contains(t, rec.Body, `"status":"active"`)
	assert.FileExists(t, filepath.Join(path, "shared.txt"))

	out, err = wsctlCmd(ctx, repo, dsn, "bob", nil, "task", "claim", "--worktree", "--per-agent", "--json").Output()
	require.NoError(t, err)
	var got struct {
		Task     workspace.Task   `json:"task"`
		Worktree gitwork.Worktree `json:"worktree"`
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	assert.Equal(t, "b", got.Task.Title)
	assert.Equal(t, "bob", got.Task.Assignee)
	assert.Equal(t, got.Task.ID, got.Worktree.Task)
	assert.Equal(t, "agent/bob", got.Worktree.Branch)
	assert.True(t, got.Worktree.PerAgent)

	// bob's worktree is dirty: the next claim is refused and given back.
	require.NoError(t, os.WriteFile(filepath.Join(got.Worktree.Path, "wip.txt"), []byte("wip\n"), 0o600))
	_, err = ws.Tasks().Update(ctx, workspace.Write{Actor: "lead"}, got.Task.ID, workspace.TaskChange{Status: ptrTo(workspace.TaskCancelled)})
	require.NoError(t, err)
	_, err = wsctlCmd(ctx, repo, dsn, "lead", nil, "work", "gc").Output()
	require.NoError(t, err)
	cmd := wsctlCmd(ctx, repo, dsn, "bob", nil, "task", "claim", "--worktree", "--per-agent")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	require.Error(t, err)
	assert.Equal(t, exitConflict, cmd.ProcessState.ExitCode(), "%s", stderr.String())
	assert.Contains(t, stderr.String(), "wip.txt")
	assert.Contains(t, stderr.String(), "given back")
	page, err := ws.Tasks().List(ctx, workspace.TaskFilter{Status: workspace.TaskPending})
	require.NoError(t, err)
	require.Len(t, page.Tasks, 1)
	assert.Equal(t, "c", page.Tasks[0].Title, "the task is pending again")
}

func ptrTo[T any](v T) *T { return &v }

// TestMCPTaskClaimWorktree: task_claim with worktree: true claims and
// makes the worktree, as task claim --worktree does; a server outside a
// repository refuses such a claim before claiming anything.
func TestMCPTaskClaimWorktree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	repo := gitRepo(t, "")
	dsn, ws := newMCPWorkspace(t)
	for _, title := range []string{"a", "b"} {
		_, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: title})
		require.NoError(t, err)
	}
	call := func(dir string, args map[string]any) (bool, map[string]any, string) {
		cmd := exec.Command(wsctlBinary(t), "--dsn", dsn, "mcp", "--as", "ann")
		cmd.Dir, cmd.Env = dir, mcpEnv()
		c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil)
		cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
		require.NoError(t, err)
		defer cs.Close()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "task_claim", Arguments: args})
		require.NoError(t, err)
		var m map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		require.NoError(t, json.Unmarshal(b, &m))
		text := ""
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				text += tc.Text
			}
		}
		return res.IsError, m, text
	}

	isErr, _, text := call(t.TempDir(), map[string]any{"worktree": true})
	require.True(t, isErr)
	assert.Contains(t, text, "without a git repository")
	isErr, _, text = call(repo, map[string]any{"per_agent": true})
	require.True(t, isErr)
	assert.Contains(t, text, "needs worktree")
	page, err := ws.Tasks().List(ctx, workspace.TaskFilter{Status: workspace.TaskPending})
	require.NoError(t, err)
	assert.Len(t, page.Tasks, 2, "nothing was claimed")

	isErr, got, text := call(repo, map[string]any{"worktree": true, "per_agent": true})
	require.False(t, isErr, text)
	task, _ := got["task"].(map[string]any)
	wt, _ := got["worktree"].(map[string]any)
	require.NotNil(t, task, "%v", got)
	require.NotNil(t, wt, "%v", got)
	assert.Equal(t, "ann", task["assignee"])
	assert.Equal(t, task["id"], wt["task"])
	assert.Equal(t, "agent/ann", wt["branch"])
	path, _ := wt["path"].(string)
	assert.FileExists(t, filepath.Join(path, "shared.txt"))
}

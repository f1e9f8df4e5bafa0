package sqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

// Several processes opening and migrating one fresh file at once: the
// cross-process lock lets exactly one create the schema, and every one of
// them ends up with a usable store.
func TestMigrateUpRacingInSeveralProcesses(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	const n = 4
	startChildren(t, ctx, path, n, func(i int) string {
		if i%2 == 0 {
			return "migrate"
		}
		return "open"
	})()

	v, dirty := schemaVersion(t, path)
	assert.Equal(t, int(sqlite.LatestVersion()), v)
	assert.False(t, dirty)
	ws := openWS(t, "sqlite:"+path)
	page, err := ws.Artifacts().List(ctx, workspace.ArtifactFilter{NamePrefix: "children/"})
	require.NoError(t, err)
	assert.Len(t, page.Artifacts, n)
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(n), head)
}

// startChildren starts n copies of this test binary playing role on path;
// they begin together once the returned function is called, which then
// waits for them all.
func startChildren(t *testing.T, ctx context.Context, path string, n int, role func(i int) string) (run func()) {
	t.Helper()
	goFile := filepath.Join(t.TempDir(), "go")
	exe, err := os.Executable()
	require.NoError(t, err)
	cmds := make([]*exec.Cmd, n)
	outs := make([]strings.Builder, n)
	for i := range cmds {
		cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childRoleEnv+"="+role(i), childPathEnv+"="+path,
			childGoEnv+"="+goFile, fmt.Sprintf("%s=%d", childNameEnv, i))
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		require.NoError(t, cmd.Start())
		cmds[i] = cmd
	}
	return func() {
		t.Helper()
		require.NoError(t, os.WriteFile(goFile, nil, 0o600))
		for i, cmd := range cmds {
			assert.NoError(t, cmd.Wait(), "child %d: %s", i, outs[i].String())
		}
	}
}

// Two processes writing at once get interleaved, gap-free seqs, and a
// subscriber in a third process sees every event exactly once, in order.
func TestProcessesWritingAtOnceShareOneGapFreeLog(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	ws := openWS(t, "sqlite:"+path+"?ws_poll=5ms")
	sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1})
	require.NoError(t, err)
	defer sub.Close()

	const n = 2
	startChildren(t, ctx, path, n, func(int) string { return "write" })()

	byActor := map[string]int{}
	for want := int64(1); want <= n*childWrites; want++ {
		m, err := sub.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, want, m.Event.Seq)
		byActor[m.Event.Actor]++
	}
	assert.Equal(t, map[string]int{"child-0": childWrites, "child-1": childWrites}, byActor)
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(n*childWrites), head)
}

// A process killed with SIGKILL in the middle of writing loses no
// acknowledged write, and the log and the records agree after reopening.
func TestKilledWriterLosesNoAcknowledgedWrite(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	openWS(t, "sqlite:"+path).Close() // create the schema before the child starts
	goFile := filepath.Join(t.TempDir(), "go")
	require.NoError(t, os.WriteFile(goFile, nil, 0o600))
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childRoleEnv+"=write-until-killed", childPathEnv+"="+path, childGoEnv+"="+goFile)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	acked := -1
	lines := bufio.NewScanner(stdout)
	for acked < 30 && lines.Scan() {
		acked, err = strconv.Atoi(lines.Text())
		require.NoError(t, err)
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.GreaterOrEqual(t, acked, 30, "child output ended early: %s", stderr.String())

	var check string
	require.NoError(t, rawDB(t, path).QueryRow(`PRAGMA integrity_check`).Scan(&check))
	assert.Equal(t, "ok", check)

	ws := openWS(t, "sqlite:"+path)
	for i := 0; i <= acked; i++ {
		_, err := ws.Notes().Get(ctx, "decision", fmt.Sprint("k", i))
		require.NoError(t, err, "acknowledged note k%d", i)
	}
	st, err := ws.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(st.Notes), st.Head, "one event per note put, none more, none less")
	page, err := ws.Events().Read(ctx, workspace.EventQuery{Limit: 10000})
	require.NoError(t, err)
	for i, e := range page.Events {
		require.Equal(t, int64(i+1), e.Seq)
	}
}

func TestHandlesOpenedConcurrentlyOnAFreshFileAllWork(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, err := workspace.Open(ctx, "sqlite:"+path)
			if err != nil {
				errs[i] = err
				return
			}
			defer ws.Close()
			_, errs[i] = ws.Tasks().Create(ctx, workspace.Write{Actor: "a"}, workspace.NewTask{Title: fmt.Sprint(i)})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "handle %d", i)
	}
	page, err := openWS(t, "sqlite:"+path).Tasks().List(ctx, workspace.TaskFilter{})
	require.NoError(t, err)
	assert.Len(t, page.Tasks, n)
}

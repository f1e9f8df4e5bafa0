package jsonstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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

	"github.com/agentspace/agentspace/workspace"
)

const crashChildEnv = "JSONSTORE_CRASH_CHILD_DIR"

// crashWorkers is how many goroutines of a crash-test writer share its one
// handle, so that the handle's group commit puts several jobs (some of them
// failing, so rolled back to their savepoint) in each transaction.
const crashWorkers = 4

// crashChild writes from crashWorkers goroutines until killed, printing one
// line per acknowledged write: "ART name version sha", "NOTE key version",
// "TASK id", and "GONE key" for a batch that failed on its condition (its
// friction note KEY must never appear).
func crashChild(dir string) int {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, "json:"+dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	ack := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
	}
	fail := func(what string, err error) {
		fmt.Fprintln(os.Stderr, what+":", err)
		os.Exit(3)
	}
	ack("READY")
	me := strconv.Itoa(os.Getpid())
	var wg sync.WaitGroup
	for g := range crashWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			crashWorker(ctx, ws, me+"-"+strconv.Itoa(g), ack, fail)
		}()
	}
	wg.Wait()
	return 0
}

func crashWorker(ctx context.Context, ws *workspace.Workspace, me string, ack func(string, ...any), fail func(string, error)) {
	w := workspace.Write{Actor: "writer-" + me}
	for j := 0; ; j++ {
		name := fmt.Sprintf("docs/f%d.md", j%7)
		content := []byte(fmt.Sprintf("writer %s write %d\n%s", me, j, strings.Repeat("x", j%300)))
		switch j % 5 {
		case 0, 1:
			a, err := ws.Artifacts().Update(ctx, w, workspace.ByName(name), workspace.ArtifactChange{Content: content})
			if errors.Is(err, workspace.ErrNotFound) {
				a, err = ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: name, Kind: "doc", Content: content})
			}
			if errors.Is(err, workspace.ErrAlreadyExists) {
				continue // another writer created it first
			}
			if err != nil {
				fail("artifact", err)
			}
			ack("ART %s %d %s", a.Name, a.Version, a.SHA256)
		case 2:
			n, err := ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("k%d", j%5), Body: string(content)})
			if err != nil {
				fail("note", err)
			}
			ack("NOTE %s %d", n.Key, n.Version)
		case 3:
			res, err := ws.Commit(ctx, workspace.Batch{Actor: w.Actor, Ops: []workspace.Op{
				workspace.CreateTaskOp{Task: workspace.NewTask{Title: "t" + strconv.Itoa(j)}},
				workspace.PutNoteOp{Note: workspace.NotePut{Kind: "friction", Key: "batch-" + me + "-" + strconv.Itoa(j), Body: "b"}},
			}})
			if err != nil {
				fail("batch", err)
			}
			ack("TASK %s", res.Results[0].Task.ID)
		case 4:
			key := "gone-" + me + "-" + strconv.Itoa(j)
			_, err := ws.Commit(ctx, workspace.Batch{Actor: w.Actor, Ops: []workspace.Op{
				workspace.PutNoteOp{Note: workspace.NotePut{Kind: "friction", Key: key, Body: "never"}},
				workspace.CreateTaskOp{Task: workspace.NewTask{Title: key}},
				workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: "k0", Body: "never"}, Cond: workspace.Cond{IfVersion: 1 << 40}},
			}})
			if !errors.Is(err, workspace.ErrConflict) {
				fail("failing batch", fmt.Errorf("want a conflict, got %v", err))
			}
			ack("GONE %s", key)
		}
	}
}

type acks struct {
	mu    sync.Mutex
	lines []string
}

func (a *acks) add(l string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lines = append(a.lines, l)
}

// startWriter re-executes the test binary as a writer on dir and collects
// its acknowledgements; ready is closed once it has opened the store.
func startWriter(t *testing.T, dir string, got *acks) (*exec.Cmd, <-chan struct{}, <-chan struct{}, *strings.Builder) {
	return startChild(t, crashChildEnv, dir, got)
}

// startChild re-executes the test binary with env set to dir (see TestMain).
func startChild(t *testing.T, env, dir string, got *acks) (*exec.Cmd, <-chan struct{}, <-chan struct{}, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+dir)
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	ready, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		first := true
		for sc.Scan() {
			if sc.Text() == "READY" && first {
				first = false
				close(ready)
				continue
			}
			got.add(sc.Text())
		}
		if first {
			close(ready)
		}
	}()
	return cmd, ready, done, stderr
}

func TestKilledWritersLoseNoAcknowledgedWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	got := &acks{}
	const rounds = 30 // two writers each: 60 kills
	kills, replays, drops := 0, 0, 0
	for round := 0; round < rounds; round++ {
		var cmds []*exec.Cmd
		var dones []<-chan struct{}
		var errs []*strings.Builder
		for w := 0; w < 2; w++ {
			cmd, ready, done, stderr := startWriter(t, dir, got)
			<-ready
			cmds, dones, errs = append(cmds, cmd), append(dones, done), append(errs, stderr)
		}
		time.Sleep(time.Duration(rng.IntN(40_000)) * time.Microsecond)
		for i, cmd := range cmds {
			if round%2 == 1 {
				time.Sleep(time.Duration(rng.IntN(5_000)) * time.Microsecond)
			}
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			<-dones[i]
			err := cmd.Wait()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "writer stderr: %s", errs[i])
			require.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal(), "writer exited on its own: %s", errs[i])
			kills++
			replays += strings.Count(errs[i].String(), "replaying a committed transaction")
			drops += strings.Count(errs[i].String(), "dropping an unacknowledged")
		}
	}
	require.GreaterOrEqual(t, kills, 50)
	t.Logf("%d kills, %d acknowledged writes; recoveries: %d replayed, %d dropped", kills, len(got.lines), replays, drops)
	require.NotEmpty(t, got.lines)
	checkAfterCrashes(t, dir, got.lines)
}

func checkAfterCrashes(t *testing.T, dir string, acked []string) {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, "json:"+dir)
	require.NoError(t, err)
	defer ws.Close()

	gone := 0
	for _, l := range acked {
		f := strings.Fields(l)
		switch f[0] {
		case "ART":
			v, _ := strconv.ParseInt(f[2], 10, 64)
			head, err := ws.Artifacts().Get(ctx, workspace.ByName(f[1]))
			require.NoError(t, err, l)
			a, err := ws.Artifacts().Get(ctx, workspace.ArtifactRef{ID: head.ID, Version: v})
			require.NoError(t, err, l)
			assert.Equal(t, f[3], a.SHA256, l)
		case "NOTE":
			v, _ := strconv.ParseInt(f[2], 10, 64)
			n, err := ws.Notes().Get(ctx, "decision", f[1])
			require.NoError(t, err, l)
			assert.GreaterOrEqual(t, n.Version, v, l)
		case "TASK":
			_, err := ws.Tasks().Get(ctx, f[1])
			assert.NoError(t, err, l)
		case "GONE":
			_, err := ws.Notes().Get(ctx, "friction", f[1])
			assert.ErrorIs(t, err, workspace.ErrNotFound, "a failed batch's write: %s", l)
			gone++
		default:
			t.Fatalf("unknown ack %q", l)
		}
	}
	t.Logf("%d failed batches checked absent", gone)

	// The log is contiguous from 1, and every artifact's head is its last event's version.
	page, err := ws.Events().Read(ctx, workspace.EventQuery{Limit: 10000})
	require.NoError(t, err)
	var all []workspace.Event
	for {
		all = append(all, page.Events...)
		if len(page.Events) < 10000 {
			break
		}
		page, err = ws.Events().Read(ctx, workspace.EventQuery{AfterSeq: page.Next, Limit: 10000})
		require.NoError(t, err)
	}
	last := map[string]workspace.Event{}
	for i, e := range all {
		require.Equal(t, int64(i+1), e.Seq, "the log has a gap")
		if e.Subject.Kind == workspace.SubjectArtifact {
			last[e.Subject.ID] = e
		}
	}
	list, err := ws.Artifacts().List(ctx, workspace.ArtifactFilter{Limit: 1000})
	require.NoError(t, err)
	require.NotEmpty(t, list.Artifacts)
	for _, a := range list.Artifacts {
		assert.Equal(t, a.Version, last[a.ID].Version, "artifact %s head vs its last event", a.Name)
		full, err := ws.Artifacts().Get(ctx, workspace.ByID(a.ID))
		require.NoError(t, err)
		onDisk, err := os.ReadFile(filepath.Join(dir, "artifacts", filepath.FromSlash(a.Name)))
		require.NoError(t, err)
		assert.Equal(t, string(full.Content), string(onDisk), "readable copy of %s", a.Name)
	}
	// No temporary file survived the recoveries.
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".agentspace-tmp-") {
			t.Errorf("stray temp file %s", p)
		}
		return err
	})
	require.NoError(t, err)
}

package conformance

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/wsctltest"
	"github.com/agentspace/agentspace/workspace"
)

// A child process is the test binary run again with -test.run naming the
// root test only and childEnv set to its role; Run then calls runChild
// instead of the suite. Its parameters come in these variables. A child
// opens the store, prints "ready", waits for "go" on its stdin (EOF, as
// when the parent dies, ends it), plays its role and prints what it did,
// one line each, prefixed with childPrefix.
const (
	childDSNEnv      = "AGENTSPACE_CONFORMANCE_DSN"
	childActorEnv    = "AGENTSPACE_CONFORMANCE_ACTOR"
	childCountEnv    = "AGENTSPACE_CONFORMANCE_COUNT"
	childDeadlineEnv = "AGENTSPACE_CONFORMANCE_DEADLINE" // RFC 3339: the child gives up then
	childPrefix      = "agentspace-child:"

	roleIncrement = "increment" // add 1 to artifact "counter" COUNT times, IfVersion with retries
	roleClaim     = "claim"     // claim and complete tasks until none is ready
	roleLock      = "lock"      // COUNT times: wait for the lease on lockedName, add 1 under its fence, release
	roleHold      = "hold"      // take holdResource and a claim, both for COUNT ms, then wait to be killed
)

// The artifacts the children race on: counterName with IfVersion,
// lockedName under its lease.
const (
	counterName  = "counter"
	lockedName   = "locked-counter"
	holdResource = "role:lead"
)

// runChild plays a child process's part and returns; Run returns right
// after, so the child's test passes unless the role failed.
func runChild(t *testing.T) {
	role := childRole()
	deadline, err := time.Parse(time.RFC3339Nano, os.Getenv(childDeadlineEnv))
	if err != nil {
		deadline = time.Now().Add(time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	actor := os.Getenv(childActorEnv)
	count, _ := strconv.Atoi(os.Getenv(childCountEnv))
	ws := open(t, os.Getenv(childDSNEnv))

	say := func(format string, args ...any) { fmt.Printf(childPrefix+" "+format+"\n", args...) }
	say("ready")
	if err := awaitGo(ctx, os.Stdin); err != nil {
		t.Fatalf("child %s: waiting for go: %v", actor, err)
	}
	switch role {
	case roleIncrement:
		conflicts := 0
		for i := range count {
			n, err := incrementOnce(ctx, ws, actor, counterName)
			conflicts += n
			if err != nil {
				t.Fatalf("child %s: increment %d: %v", actor, i, err)
			}
			say("incremented")
		}
		say("conflicts %d", conflicts)
	case roleClaim:
		for {
			task, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: actor})
			if errors.Is(err, workspace.ErrNoTask) {
				break
			}
			if err != nil {
				t.Fatalf("child %s: claim: %v", actor, err)
			}
			say("claimed %s", task.ID)
			if _, err := ws.Tasks().Complete(ctx, workspace.Write{Actor: actor}, task.ID, workspace.TaskResult{Summary: "done by " + actor}); err != nil {
				t.Fatalf("child %s: complete %s: %v", actor, task.ID, err)
			}
		}
	case roleLock:
		for range count {
			lease, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{
				Resource: "artifact:" + lockedName, Owner: actor, TTL: time.Minute, Wait: true,
			})
			if err != nil {
				t.Fatalf("child %s: acquire: %v", actor, err)
			}
			if err := fencedIncrement(ctx, ws, actor, lockedName, lease.Token); err != nil {
				t.Fatalf("child %s: %v", actor, err)
			}
			if err := ws.Locks().Release(ctx, lease); err != nil {
				t.Fatalf("child %s: release token %d: %v", actor, lease.Token, err)
			}
			say("token %d", lease.Token)
		}
	case roleHold:
		ttl := time.Duration(count) * time.Millisecond
		lease, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: holdResource, Owner: actor, TTL: ttl})
		if err != nil {
			t.Fatalf("child %s: acquire: %v", actor, err)
		}
		task, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: actor, Lease: ttl})
		if err != nil {
			t.Fatalf("child %s: claim: %v", actor, err)
		}
		say("holding %d %s", lease.Token, task.ID)
		// Until killed; the end of stdin (a dead parent) or the deadline also ends it.
		eof := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			close(eof)
		}()
		select {
		case <-eof:
		case <-ctx.Done():
		}
		return
	default:
		if !runMessageChild(ctx, t, ws, role, actor, count, say) {
			t.Fatalf("unknown child role %q", role)
		}
	}
	say("finished")
}

// awaitGo reads r until the line "go"; anything else, EOF or ctx's end is an error.
func awaitGo(ctx context.Context, r io.Reader) error {
	line := make(chan error, 1)
	go func() {
		s, err := bufio.NewReader(r).ReadString('\n')
		if err == nil && strings.TrimSpace(s) != "go" {
			err = fmt.Errorf("got %q", s)
		}
		line <- err
	}()
	select {
	case err := <-line:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// child is a running child process seen from the parent.
type child struct {
	name   string
	role   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	ready  chan struct{}
	mu     sync.Mutex
	lines  []string    // what it printed after childPrefix
	said   chan string // the same lines, as they come
	output bytes.Buffer
	done   chan struct{} // closed when its stdout is drained
	err    error         // from Wait, after done
}

// childEnviron is a child test binary's environment: this process's with
// extra added, and the race runtime's sleep at exit (GORACE's
// atexit_sleep_ms, a second by default) off: the cases wait for their
// children to end, one after another, some twenty per run of the suite. A
// race in a child is still reported, and still fails its exit status.
func childEnviron(extra ...string) []string {
	env := append(os.Environ(), extra...)
	return append(env, wsctltest.QuietRaceExit())
}

// startChild starts the test binary as a child playing role.
func startChild(t *testing.T, ctx context.Context, dsn, role, actor string, count int, deadline time.Time) *child {
	t.Helper()
	root, _, _ := strings.Cut(t.Name(), "/")
	cmd := exec.CommandContext(ctx, os.Args[0], // #nosec G204 -- re-runs this test binary itself as a child
		"-test.run=^"+regexp.QuoteMeta(root)+"$", "-test.count=1", "-test.timeout="+time.Until(deadline).Round(time.Second).String())
	cmd.Env = childEnviron(
		childEnv+"="+role,
		childDSNEnv+"="+dsn,
		childActorEnv+"="+actor,
		childCountEnv+"="+strconv.Itoa(count),
		childDeadlineEnv+"="+deadline.UTC().Format(time.RFC3339Nano),
	)
	cmd.WaitDelay = 5 * time.Second
	c := &child{name: actor, role: role, cmd: cmd, ready: make(chan struct{}), done: make(chan struct{}), said: make(chan string, 1000)}
	var err error
	c.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &lockedWriter{c: c}
	require.NoError(t, cmd.Start(), "start child %s", actor)
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		readyOnce := sync.OnceFunc(func() { close(c.ready) })
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			c.output.WriteString(line + "\n")
			if rest, ok := strings.CutPrefix(line, childPrefix+" "); ok {
				if rest == "ready" {
					readyOnce()
				} else {
					c.lines = append(c.lines, rest)
					select {
					case c.said <- rest:
					default:
					}
				}
			}
			c.mu.Unlock()
		}
		c.err = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = c.stdin.Close()
		if c.cmd.Process != nil {
			_ = c.cmd.Process.Kill()
		}
		<-c.done
	})
	return c
}

// lockedWriter collects a child's stderr next to its stdout.
type lockedWriter struct{ c *child }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.c.output.Write(p)
}

func (c *child) describe() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("child %s (%s) output:\n%s", c.name, c.role, c.output.String())
}

// testProcesses: child processes race IfVersion increments on one
// artifact, claims on one task pool and a lease guarding another artifact,
// while the parent follows the log live. No update is lost, no task is
// claimed twice, no token is issued twice, and the parent sees every
// event of the children, once, in order.
func testProcesses(t *testing.T, h Harness) {
	const (
		incrementers = 3
		claimers     = 3
		lockers      = 2
		perChild     = 8
		rounds       = 5
		pool         = 30
	)
	ctx := caseCtx(t, 90*time.Second)
	deadline := time.Now().Add(60 * time.Second)
	dsn, ws := fresh(t, h)
	for _, name := range []string{counterName, lockedName} {
		_, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "setup"},
			workspace.NewArtifact{Name: name, Content: []byte("0")})
		require.NoError(t, err)
	}
	ops := make([]workspace.Op, pool)
	for i := range ops {
		ops[i] = workspace.CreateTaskOp{Task: workspace.NewTask{Title: fmt.Sprintf("job %d", i), Priority: i % 3}}
	}
	res, err := ws.Commit(ctx, workspace.Batch{Actor: "setup", Ops: ops})
	require.NoError(t, err)
	start, err := ws.Events().Head(ctx)
	require.NoError(t, err)

	// Follow the log live while the children write; the channel holds
	// every event the children can write, so the follower never blocks.
	sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: start}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	seen := make(chan workspace.Event, 100_000)
	go func() {
		defer close(seen)
		for {
			m, err := sub.Next(ctx)
			if err != nil {
				return
			}
			if !m.Progress {
				seen <- m.Event
			}
		}
	}()

	var kids []*child
	for i := range incrementers {
		kids = append(kids, startChild(t, ctx, dsn, roleIncrement, fmt.Sprintf("incr-%d", i), perChild, deadline))
	}
	for i := range claimers {
		kids = append(kids, startChild(t, ctx, dsn, roleClaim, fmt.Sprintf("claim-%d", i), 0, deadline))
	}
	for i := range lockers {
		kids = append(kids, startChild(t, ctx, dsn, roleLock, fmt.Sprintf("lock-%d", i), rounds, deadline))
	}
	// Start them together, once every child has the store open.
	for _, c := range kids {
		select {
		case <-c.ready:
		case <-c.done:
			require.Fail(t, "child ended before it was ready", "%v\n%s", c.err, c.describe())
		case <-ctx.Done():
			require.Fail(t, "child never became ready", c.describe())
		}
	}
	for _, c := range kids {
		_, err := io.WriteString(c.stdin, "go\n")
		require.NoError(t, err, "tell %s to go", c.name)
		require.NoError(t, c.stdin.Close())
	}
	for _, c := range kids {
		select {
		case <-c.done:
		case <-ctx.Done():
			require.Fail(t, "child did not finish", c.describe())
		}
		require.NoError(t, c.err, c.describe())
	}

	increments, conflicts := 0, 0
	claimedBy := map[string][]string{}
	tokens := map[int64]string{}
	for _, c := range kids {
		c.mu.Lock()
		lines := c.lines
		c.mu.Unlock()
		require.NotEmpty(t, lines, c.describe())
		assert.Equal(t, "finished", lines[len(lines)-1], c.describe())
		for _, l := range lines {
			switch {
			case l == "incremented":
				increments++
			case strings.HasPrefix(l, "conflicts "):
				n, err := strconv.Atoi(strings.TrimPrefix(l, "conflicts "))
				require.NoError(t, err, l)
				conflicts += n
			case strings.HasPrefix(l, "claimed "):
				id := strings.TrimPrefix(l, "claimed ")
				claimedBy[id] = append(claimedBy[id], c.name)
			case strings.HasPrefix(l, "token "):
				tok, err := strconv.ParseInt(strings.TrimPrefix(l, "token "), 10, 64)
				require.NoError(t, err, l)
				assert.NotContains(t, tokens, tok, "token %d issued to %s and %s", tok, tokens[tok], c.name)
				tokens[tok] = c.name
			}
		}
	}

	assert.Equal(t, incrementers*perChild, increments)
	got, err := ws.Artifacts().Get(ctx, workspace.ByName(counterName))
	require.NoError(t, err)
	assert.Equal(t, int64(1+incrementers*perChild), got.Version, "one version per increment")
	assert.Equal(t, strconv.Itoa(incrementers*perChild), string(got.Content), "no increment was lost")

	assert.Len(t, claimedBy, pool, "every task was claimed")
	for _, r := range res.Results {
		id := r.Task.ID
		by := claimedBy[id]
		assert.Len(t, by, 1, "task %s claimed by %v", r.Task.Title, by)
		task, err := ws.Tasks().Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, workspace.TaskDone, task.Status, "task %s", task.Title)
		assert.Equal(t, 1, task.Attempts, "task %s", task.Title)
		if len(by) == 1 {
			assert.Equal(t, by[0], task.Assignee, "task %s", task.Title)
		}
	}

	assert.Len(t, tokens, lockers*rounds, "one token per hand-over")
	for tok := int64(1); tok <= lockers*rounds; tok++ {
		assert.Contains(t, tokens, tok, "tokens run 1, 2, 3, ...")
	}
	locked, err := ws.Artifacts().Get(ctx, workspace.ByName(lockedName))
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(lockers*rounds), string(locked.Content), "no increment lost under the lease")

	// The parent's subscription saw every child's event, once, in order.
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	log := readAll(t, ws, workspace.EventQuery{AfterSeq: start})
	require.Len(t, log, int(head-start))
	var live []workspace.Event
	for len(live) < len(log) {
		ev, ok := <-seen
		if !ok {
			require.Fail(t, "the subscription ended early", "after %d of %d events: %v", len(live), len(log), sub.Err())
		}
		live = append(live, ev)
	}
	assertSameEvents(t, "parent subscriber", log, live)
	conflictEvents := 0
	for _, ev := range log {
		if ev.Type == workspace.EventConflict {
			conflictEvents++
			assert.Equal(t, counterName, ev.Subject.Name, "seq %d: only the IfVersion writers conflict", ev.Seq)
		}
	}
	assert.Equal(t, conflicts, conflictEvents, "one conflict event per conflict the children met")
}

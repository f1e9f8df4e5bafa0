package conformance

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runReliability runs the linearizability, fault and load cases. In a
// child process started by one of them (relChildEnv set), it plays the
// child's part instead, under the subtest relChildTest that the child's
// -test.run selects: every other case of Run is filtered out there.
func runReliability(t *testing.T, h Harness) {
	if os.Getenv(relChildEnv) != "" {
		t.Run(relChildTest, runRelChild)
		return
	}
	t.Run("ConcurrentHistoryIsLinearizable", func(t *testing.T) {
		// In-process clients on handles with stores of their own, as in
		// separate processes, and on handles sharing one store (the
		// default within a process); child processes in both.
		t.Run("SeparateStores", func(t *testing.T) { testLinearizable(t, private{h}) })
		t.Run("SharedStore", func(t *testing.T) { testLinearizable(t, h) })
	})
	t.Run("LoadLosesNothingAndLeaksNothing", func(t *testing.T) { testLoad(t, h) })
	t.Run("PausedLeaseHolderIsFencedOut", func(t *testing.T) { testPausedLeaseHolder(t, h) })
	t.Run("StoppedAgentIsFencedOut", func(t *testing.T) { testStoppedAgentIsFencedOut(t, h) })
}

// A reliability child is the test binary run again with relChildEnv set to
// its role, the store's DSN in relChildDSNEnv and one role-specific
// argument in relChildArgEnv. It prints what it does, one line each,
// prefixed with relChildPrefix; the parent reads those lines as they come.
const (
	relChildEnv    = "AGENTSPACE_RELIABILITY_CHILD"
	relChildDSNEnv = "AGENTSPACE_RELIABILITY_DSN"
	relChildArgEnv = "AGENTSPACE_RELIABILITY_ARG"
	relChildTest   = "ReliabilityChild"
	relChildPrefix = "agentspace-reliability:"
)

// runRelChild plays the role named in relChildEnv. It is bounded by the
// test binary's -test.timeout, which the parent sets.
func runRelChild(t *testing.T) {
	dsn, arg := os.Getenv(relChildDSNEnv), os.Getenv(relChildArgEnv)
	say := func(format string, args ...any) {
		fmt.Printf(relChildPrefix+" "+format+"\n", args...)
	}
	in := bufio.NewScanner(os.Stdin)
	switch role := os.Getenv(relChildEnv); role {
	case rolePausedHolder:
		pausedHolderChild(t, dsn, arg, in, say)
	case roleStoppedAgent:
		stoppedAgentChild(t, dsn, arg, in, say)
	case roleLoadAgent:
		loadAgentChild(t, dsn, arg, in, say)
	case roleLinClient:
		linClientChild(t, dsn, arg, in, say)
	case roleBatchWriter:
		batchWriterChild(t, dsn, arg, say)
	default:
		t.Fatalf("unknown reliability child role %q", role)
	}
}

// relKid is a running reliability child seen from the parent.
type relKid struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // what it printed after relChildPrefix, in order
	mu     sync.Mutex
	output bytes.Buffer
	done   chan struct{} // closed when it exited and its output is drained
	err    error         // from Wait, after done
}

// startRelChild starts the test binary with -test.run=pattern as a child
// playing role on dsn. The child is killed, if still running, when the test
// ends.
func startRelChild(t testing.TB, ctx context.Context, pattern, role, name, dsn, arg string, timeout time.Duration) *relKid {
	t.Helper()
	// #nosec G204 -- re-executes this test binary with a pattern of our own
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+pattern, "-test.count=1",
		"-test.timeout="+timeout.Round(time.Second).String())
	cmd.Env = childEnviron(relChildEnv+"="+role, relChildDSNEnv+"="+dsn, relChildArgEnv+"="+arg)
	cmd.WaitDelay = 5 * time.Second
	k := &relKid{name: name, cmd: cmd, lines: make(chan string, 1<<16), done: make(chan struct{})}
	var err error
	k.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.output.Write(p)
	})
	require.NoError(t, cmd.Start(), "start child %s", name)
	go func() {
		defer close(k.done)
		defer close(k.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Text()
			k.mu.Lock()
			k.output.WriteString(line + "\n")
			k.mu.Unlock()
			if rest, ok := strings.CutPrefix(line, relChildPrefix+" "); ok {
				k.lines <- rest
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		k.err = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = k.stdin.Close()
		_ = k.cmd.Process.Kill()
		<-k.done
	})
	return k
}

// subtestPattern is the -test.run pattern selecting the reliability child
// subtest under t's root test.
func subtestPattern(t testing.TB) string {
	root, _, _ := strings.Cut(t.Name(), "/")
	return "^" + regexp.QuoteMeta(root) + "$/^" + relChildTest + "$"
}

// next returns the child's next line, or fails the test if the child ends
// or ctx expires first.
func (k *relKid) next(t testing.TB, ctx context.Context) string {
	t.Helper()
	select {
	case line, ok := <-k.lines:
		if !ok {
			<-k.done
			require.FailNow(t, "child ended early", "%s: %v\n%s", k.name, k.err, k.describe())
		}
		return line
	case <-ctx.Done():
		require.FailNow(t, "child did not answer in time", "%s\n%s", k.name, k.describe())
	}
	return ""
}

// expect reads the child's next line and fails unless it starts with prefix;
// it returns the rest.
func (k *relKid) expect(t testing.TB, ctx context.Context, prefix string) string {
	t.Helper()
	line := k.next(t, ctx)
	rest, ok := strings.CutPrefix(line, prefix)
	require.True(t, ok, "child %s said %q, want %q...\n%s", k.name, line, prefix, k.describe())
	return strings.TrimSpace(rest)
}

// send writes one line to the child's stdin.
func (k *relKid) send(t testing.TB, line string) {
	t.Helper()
	_, err := io.WriteString(k.stdin, line+"\n")
	require.NoError(t, err, "tell %s %q", k.name, line)
}

// wait waits for the child to exit and fails unless it exited cleanly.
func (k *relKid) wait(t testing.TB, ctx context.Context) {
	t.Helper()
	select {
	case <-k.done:
	case <-ctx.Done():
		require.FailNow(t, "child did not exit", "%s\n%s", k.name, k.describe())
	}
	require.NoError(t, k.err, "child %s\n%s", k.name, k.describe())
}

func (k *relKid) describe() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return fmt.Sprintf("child %s output:\n%s", k.name, k.output.String())
}

// readLine waits for the next line on in.
func readLine(in *bufio.Scanner) (string, error) {
	if in.Scan() {
		return strings.TrimSpace(in.Text()), nil
	}
	if err := in.Err(); err != nil {
		return "", err
	}
	return "", io.EOF
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

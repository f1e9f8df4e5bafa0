package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// wsctlBinary returns a path that runs this test binary as wsctl (see
// TestMain): a real wsctl process.
func wsctlBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "wsctl")
	require.NoError(t, os.Symlink(self, bin))
	return bin
}

func wsctl(t *testing.T, dsn string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"--dsn", dsn}, args...), strings.NewReader(""), &out, &errb, func(string) string { return "" })
	return out.String(), errb.String(), code
}

// startServe starts `wsctl serve` as a process and returns its base URL.
func startServe(t *testing.T, dsn string, args ...string) (*exec.Cmd, string, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(wsctlBinary(t), append([]string{"--dsn", dsn, "serve"}, args...)...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	logs := &bytes.Buffer{}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`on (http://\S+) for`)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		_, _ = io.Copy(logs, stderr)
	}()
	select {
	case url := <-found:
		return cmd, url, logs
	case <-time.After(30 * time.Second):
		t.Fatalf("wsctl serve did not start: %s", logs)
		return nil, "", nil
	}
}

// TestPythonExampleAgainstWsctlServe runs the Python example client (the
// standard library only) against a real `wsctl serve` process with a
// token made by `wsctl token create`: it claims a task, writes an
// artifact and follows the events until its write comes back. Then
// SIGTERM stops the server cleanly.
func TestPythonExampleAgainstWsctlServe(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	_, errOut, code := wsctl(t, dsn, "init")
	require.Equal(t, 0, code, errOut)
	tok, errOut, code := wsctl(t, dsn, "token", "create", "--actor", "py-agent", "--role", "worker", "--ttl", "1d")
	require.Equal(t, 0, code, errOut)
	tok = strings.TrimSpace(tok)
	require.Regexp(t, `^ast_[a-z2-7]{16}_[a-z2-7]{52}$`, tok)

	ws, err := workspace.Open(context.Background(), dsn)
	require.NoError(t, err)
	task, err := ws.Tasks().Create(context.Background(), workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "say hello"})
	require.NoError(t, err)
	require.NoError(t, ws.Close())

	srv, url, logs := startServe(t, dsn, "--listen", "127.0.0.1:0", "--log-level", "debug")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	py := exec.CommandContext(ctx, python, filepath.Join("..", "..", "examples", "python", "example_agent.py"), "--url", url, "--token", tok)
	out, err := py.CombinedOutput()
	require.NoError(t, err, "%s\nserver:\n%s", out, logs)
	assert.Contains(t, string(out), `"step": "claim", "task": "`+task.ID+`"`)
	assert.Contains(t, string(out), `"step": "done"`)

	require.NoError(t, srv.Process.Signal(syscall.SIGTERM))
	require.NoError(t, srv.Wait())
	assert.Contains(t, logs.String(), "wsctl serve: stopped")
	assert.NotContains(t, logs.String(), tok[21:], "no secret in the server's log")
	assert.Contains(t, logs.String(), `actor=py-agent`)

	ls, errOut, code := wsctl(t, dsn, "token", "ls")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, ls, "py-agent")
	assert.Contains(t, ls, "active")
	assert.NotContains(t, ls, tok[21:])
	_, errOut, code = wsctl(t, dsn, "token", "revoke", tok[4:20])
	require.Equal(t, 0, code, errOut)
	ls, _, _ = wsctl(t, dsn, "token", "ls")
	assert.Contains(t, ls, "revoked")
}

func TestServeRefusesToRunWithoutTokensOffLoopback(t *testing.T) {
	for _, c := range []struct {
		listen   string
		loopback bool
	}{
		{"127.0.0.1:0", true}, {"[::1]:7465", true}, {"localhost:7465", true}, {"unix:/tmp/x.sock", true},
		{"0.0.0.0:7465", false}, {":7465", false}, {"10.0.0.1:7465", false},
	} {
		_, _, loopback, err := listenAddr(c.listen)
		require.NoError(t, err)
		assert.Equal(t, c.loopback, loopback, c.listen)
	}
	_, _, _, err := listenAddr("nonsense")
	assert.Error(t, err)
}

func TestServeOnAUnixSocket(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	_, errOut, code := wsctl(t, dsn, "init")
	require.Equal(t, 0, code, errOut)
	sock := filepath.Join(t.TempDir(), "ws.sock")
	cmd := exec.Command(wsctlBinary(t), "--dsn", dsn, "serve", "--listen", "unix:"+sock)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool { _, err := os.Stat(sock); return err == nil }, 30*time.Second, 20*time.Millisecond)
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "%s", logs.String())
	assert.Contains(t, logs.String(), "WITHOUT requiring tokens")
}

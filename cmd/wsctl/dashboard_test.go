package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDashboardServesOnLoopbackAndPrintsItsURL runs `wsctl dashboard` as
// a process: it prints the URL, serves the board and the API there, and
// stops cleanly on SIGTERM.
func TestDashboardServesOnLoopbackAndPrintsItsURL(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	_, errOut, code := wsctl(t, dsn, "init")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = wsctl(t, dsn, "--as", "lead", "task", "add", "Ship the dashboard")
	require.Equal(t, 0, code, errOut)

	cmd := exec.Command(wsctlBinary(t), "--dsn", dsn, "dashboard", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	var url string
	select {
	case url = <-lines:
	case <-time.After(30 * time.Second):
		t.Fatal("wsctl dashboard printed no URL")
	}
	require.Regexp(t, `^http://127\.0\.0\.1:\d+/$`, url)

	for path, want := range map[string]string{"": "Ship the dashboard", "ui/feed": "task.created", "v1/status": `"head"`} {
		resp, err := http.Get(url + path)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Contains(t, string(b), want, path)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "a clean stop exits 0")
	case <-time.After(20 * time.Second):
		t.Fatal("wsctl dashboard did not stop on SIGTERM")
	}
}

func TestDashboardRefusesAnAddressOffLoopback(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	for _, addr := range []string{"0.0.0.0:0", "unix:" + filepath.Join(t.TempDir(), "s.sock")} {
		_, errOut, code := wsctl(t, dsn, "dashboard", "--listen", addr)
		assert.Equal(t, 2, code, addr)
		assert.True(t, strings.Contains(errOut, "loopback"), errOut)
	}
}

package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// rebind sends one request to base's listener, naming host in the Host
// header and origin (if any) in Origin, as a page whose name was rebound
// to the server's address would; it returns the status and the body.
func rebind(t *testing.T, method, base, path, host, origin, body string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, r)
	require.NoError(t, err)
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), "%s %s", method, path)
	return resp.StatusCode, string(b)
}

// TestServeRefusesRebindingRequests runs `wsctl serve` on loopback with no
// token required and sends it what a DNS-rebinding page sends: a foreign
// Host on every kind of route, and a foreign Origin on a write. Each is a
// typed 403 and nothing is written; the loopback names, the literal
// address and an --allowed-host are served.
func TestServeRefusesRebindingRequests(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	_, errOut, code := wsctl(t, dsn, "init")
	require.Equal(t, 0, code, errOut)
	_, base, _ := startServe(t, dsn, "--listen", "127.0.0.1:0", "--allowed-host", "agentspace.test")
	u, err := url.Parse(base)
	require.NoError(t, err)
	port := u.Port()
	write := `{"name":"pwned.txt","content":"aGk=","actor":"mallory"}`

	for _, path := range []string{"/v1/artifacts", "/v1/status", "/v1/openapi.json", "/healthz", "/metrics", "/", "/ui/feed", "/mcp"} {
		st, body := rebind(t, "GET", base, path, "evil.example:"+port, "", "")
		assert.Equal(t, http.StatusForbidden, st, "GET %s: %s", path, body)
		assert.Contains(t, body, `"code":"forbidden"`, path)
	}
	for _, c := range []struct{ host, origin string }{
		{"evil.example:" + port, "http://evil.example:" + port},
		{"evil.example", ""},
		{"127.0.0.1:" + port, "http://evil.example"},
		{"127.0.0.1:" + port, "http://localhost:3000"},
		{"127.0.0.1:" + port, "null"},
		{"localhost:" + port, "http://127.0.0.1:1"},
	} {
		st, body := rebind(t, "POST", base, "/v1/artifacts", c.host, c.origin, write)
		assert.Equal(t, http.StatusForbidden, st, "%+v: %s", c, body)
	}
	ws, err := workspace.Open(context.Background(), dsn)
	require.NoError(t, err)
	head, err := ws.Events().Head(context.Background())
	require.NoError(t, err)
	require.NoError(t, ws.Close())
	assert.Zero(t, head, "no refused request wrote anything")

	for i, c := range []struct{ host, origin string }{
		{"", ""},
		{"localhost:" + port, "http://localhost:" + port},
		{"[::1]:" + port, ""},
		{"127.0.0.1:" + port, "http://127.0.0.1:" + port},
		{"agentspace.test", "https://agentspace.test"},
	} {
		st, body := rebind(t, "POST", base, "/v1/artifacts", c.host, c.origin, strings.Replace(write, "pwned", "ok-"+string(rune('a'+i)), 1))
		assert.Equal(t, http.StatusCreated, st, "%+v: %s", c, body)
		st, _ = rebind(t, "GET", base, "/ui/feed", c.host, "", "")
		assert.Equal(t, http.StatusOK, st, "%+v", c)
	}
}

// TestDashboardRefusesRebindingRequests runs `wsctl dashboard` and sends
// its pages and its API a rebinding page's Host and Origin.
func TestDashboardRefusesRebindingRequests(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	_, errOut, code := wsctl(t, dsn, "init")
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
	var base string
	select {
	case base = <-lines:
	case <-time.After(30 * time.Second):
		t.Fatal("wsctl dashboard printed no URL")
	}
	base = strings.TrimSuffix(base, "/")
	u, err := url.Parse(base)
	require.NoError(t, err)
	port := u.Port()

	for _, path := range []string{"/", "/ui/feed", "/ui/login", "/ui/stream", "/v1/status"} {
		st, body := rebind(t, "GET", base, path, "evil.example:"+port, "", "")
		assert.Equal(t, http.StatusForbidden, st, "GET %s: %s", path, body)
	}
	st, _ := rebind(t, "POST", base, "/ui/login", "evil.example:"+port, "http://evil.example:"+port, "")
	assert.Equal(t, http.StatusForbidden, st)
	st, _ = rebind(t, "POST", base, "/v1/tasks", "127.0.0.1:"+port, "http://evil.example", `{"title":"x","actor":"mallory"}`)
	assert.Equal(t, http.StatusForbidden, st)
	st, _ = rebind(t, "GET", base, "/", "localhost:"+port, "", "")
	assert.Equal(t, http.StatusOK, st)
}

// TestServeNeverRemovesAFileAtTheSocketPath starts `wsctl serve` on a unix
// socket path that holds a regular file: it refuses, and the file is
// untouched. A stale socket (nothing answers) is replaced.
func TestServeNeverRemovesAFileAtTheSocketPath(t *testing.T) {
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "ws.db")
	_, errOut, code := wsctl(t, dsn, "init")
	require.Equal(t, 0, code, errOut)
	precious := filepath.Join(dir, "precious.txt")
	require.NoError(t, os.WriteFile(precious, []byte("keep me"), 0o600))
	_, errOut, code = wsctl(t, dsn, "serve", "--listen", "unix:"+precious)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "not a socket")
	b, err := os.ReadFile(precious)
	require.NoError(t, err, "the file is still there")
	assert.Equal(t, "keep me", string(b))

	// A socket left by a listener that is gone: removed and served again.
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	require.NoError(t, err)
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())
	l2, err := listenOn("unix", stale)
	require.NoError(t, err, "a stale socket is replaced")
	t.Cleanup(func() { _ = l2.Close() })
	_, err = listenOn("unix", stale)
	assert.ErrorContains(t, err, "listening there already")
}

package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
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

	cmd, url := startDashboard(t, dsn)
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

// startDashboard runs `wsctl dashboard` on a free loopback port with args
// and returns the process and the URL it printed.
func startDashboard(t *testing.T, dsn string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(wsctlBinary(t), append([]string{"--dsn", dsn, "dashboard", "--listen", "127.0.0.1:0"}, args...)...) // #nosec G204 -- the test's own binary
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
	select {
	case url := <-lines:
		return cmd, url
	case <-time.After(30 * time.Second):
		t.Fatal("wsctl dashboard printed no URL")
	}
	return nil, ""
}

// dashRequest sends one request to a dashboard and returns its status
// and body.
func dashRequest(t *testing.T, method, url, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestDashboardIsReadOnlyWithoutAToken runs `wsctl dashboard`: every write
// route of its OpenAPI document, and /mcp, is refused without a token
// with a forbidden problem and writes nothing, whatever actor the request
// names; reads and the event stream are served; a token's request acts as
// its actor.
func TestDashboardIsReadOnlyWithoutAToken(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	_, errOut, code := wsctl(t, dsn, "init")
	require.Equal(t, 0, code, errOut)
	tok, errOut, code := wsctl(t, dsn, "--as", "root", "token", "create", "--actor", "ops", "--role", "admin")
	require.Equal(t, 0, code, errOut)
	tok = strings.TrimSpace(tok)
	_, url := startDashboard(t, dsn)
	base := strings.TrimSuffix(url, "/")

	head := func() string {
		st, body := dashRequest(t, "GET", base+"/v1/events/head", "")
		require.Equal(t, http.StatusOK, st, body)
		return body
	}
	before := head()

	st, body := dashRequest(t, "GET", base+"/v1/openapi.json", "")
	require.Equal(t, http.StatusOK, st, body)
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &doc))
	param := regexp.MustCompile(`\{[^}]+\}`)
	writes := 0
	for path, ops := range doc.Paths {
		for method := range ops {
			m := strings.ToUpper(method)
			if m == "GET" || m == "HEAD" {
				continue
			}
			writes++
			target := base + param.ReplaceAllString(path, "x")
			st, body := dashRequest(t, m, target, `{"name":"docs/x.md","content":"eA==","title":"x","actor":"mallory"}`, "X-Agentspace-Actor", "mallory")
			assert.Equal(t, http.StatusForbidden, st, "%s %s: %s", m, path, body)
			assert.Contains(t, body, `"code":"forbidden"`, "%s %s", m, path)
			assert.Contains(t, body, "read-only without a token", "%s %s", m, path)
		}
	}
	assert.Greater(t, writes, 15, "the document lists the write routes")
	st, body = dashRequest(t, "POST", base+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, "X-Agentspace-Actor", "mallory")
	assert.Equal(t, http.StatusForbidden, st, body)
	assert.Equal(t, before, head(), "nothing was written")

	// The page, the API's reads and the event stream are served.
	for _, path := range []string{"/", "/ui/feed", "/v1/status", "/v1/artifacts", "/v1/tasks"} {
		st, body := dashRequest(t, "GET", base+path, "")
		assert.Equal(t, http.StatusOK, st, "%s: %s", path, body)
	}
	res, err := http.Get(base + "/v1/events?after=0")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	require.NoError(t, err)
	assert.Contains(t, line, "agentspace events after 0")
	_ = res.Body.Close()

	// A token's write acts as its actor.
	st, body = dashRequest(t, "POST", base+"/v1/artifacts", `{"name":"docs/x.md","content":"eA=="}`, "Authorization", "Bearer "+tok)
	require.Equal(t, http.StatusCreated, st, body)
	assert.Contains(t, body, `"created_by":"ops"`)
}

// TestDashboardRequireTokenGuardsEverything runs `wsctl dashboard
// --require-token`: the API and the pages need a token, as under
// `wsctl serve --require-token`.
func TestDashboardRequireTokenGuardsEverything(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	_, errOut, code := wsctl(t, dsn, "init")
	require.Equal(t, 0, code, errOut)
	tok, errOut, code := wsctl(t, dsn, "--as", "root", "token", "create", "--actor", "ops")
	require.Equal(t, 0, code, errOut)
	tok = strings.TrimSpace(tok)
	_, url := startDashboard(t, dsn, "--require-token")
	base := strings.TrimSuffix(url, "/")

	st, body := dashRequest(t, "GET", base+"/v1/status", "")
	assert.Equal(t, http.StatusUnauthorized, st, body)
	st, body = dashRequest(t, "POST", base+"/v1/tasks", `{"title":"x"}`, "X-Agentspace-Actor", "mallory")
	assert.Equal(t, http.StatusUnauthorized, st, body)
	st, _ = dashRequest(t, "GET", base+"/", "")
	assert.Equal(t, http.StatusSeeOther, st, "a page goes to the login form")
	st, body = dashRequest(t, "POST", base+"/v1/tasks", `{"title":"x"}`, "Authorization", "Bearer "+tok)
	require.Equal(t, http.StatusCreated, st, body)
	assert.Contains(t, body, `"created_by":"ops"`)
}

func TestDashboardRefusesAnAddressOffLoopback(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	for _, addr := range []string{"0.0.0.0:0", "unix:" + filepath.Join(t.TempDir(), "s.sock")} {
		_, errOut, code := wsctl(t, dsn, "dashboard", "--listen", addr)
		assert.Equal(t, 2, code, addr)
		assert.True(t, strings.Contains(errOut, "loopback"), errOut)
	}
}

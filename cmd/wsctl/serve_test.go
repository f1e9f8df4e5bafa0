package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/internal/testskip"
	"github.com/agentspace/agentspace/workspace"
)

// wsctlBinary returns a path that runs this test binary as wsctl (see
// TestMain): a real wsctl process.
func wsctlBinary(t testing.TB) string {
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

// serveLog collects a server process's stderr until it closes.
type serveLog struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	done chan struct{}
}

// String is what the server wrote so far.
func (l *serveLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// all waits for the process's stderr to close, then returns all of it.
func (l *serveLog) all(t *testing.T) string {
	t.Helper()
	select {
	case <-l.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the server's stderr did not close")
	}
	return l.String()
}

// startServe starts `wsctl serve` as a process and returns its base URL.
func startServe(t *testing.T, dsn string, args ...string) (*exec.Cmd, string, *serveLog) {
	t.Helper()
	cmd := exec.Command(wsctlBinary(t), append([]string{"--dsn", dsn, "serve"}, args...)...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stderr = pw
	require.NoError(t, cmd.Start())
	pw.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	logs := &serveLog{done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		defer close(logs.done)
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		re := regexp.MustCompile(`on ((?:https?|http\+unix)://\S+) for`)
		for sc.Scan() {
			logs.mu.Lock()
			logs.buf.WriteString(sc.Text() + "\n")
			logs.mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
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
		testskip.Skip(t, "AGENTSPACE_TEST_REQUIRE_PYTHON", "SKIPPING the Python example test: python3 not on PATH")
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
	all := logs.all(t)
	require.NoError(t, srv.Wait())
	assert.Contains(t, all, "wsctl serve: stopped")
	assert.NotContains(t, all, tok[21:], "no secret in the server's log")
	assert.Contains(t, all, `actor=py-agent`)

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

// selfSigned writes a certificate for 127.0.0.1 and its key, in PEM.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "agentspace test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	return certFile, keyFile, pool
}

func TestServeHTTPS(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	_, errOut, code := wsctl(t, dsn, "init")
	require.Equal(t, 0, code, errOut)
	certFile, keyFile, pool := selfSigned(t)
	srv, url, logs := startServe(t, dsn, "--listen", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile)
	require.True(t, strings.HasPrefix(url, "https://"), url)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := client.Get(url + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	require.NoError(t, srv.Process.Signal(syscall.SIGTERM))
	all := logs.all(t)
	require.NoError(t, srv.Wait(), "%s", all)

	_, errOut, code = wsctl(t, dsn, "serve", "--tls-cert", certFile)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--tls-key")
}

func TestTokenTTLTakesDaysAndDurations(t *testing.T) {
	for in, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "12h": 12 * time.Hour, "0": -1, "90s": 90 * time.Second} {
		got, err := parseTTL(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "d", "-1d", "1.5d", "-5m", "soon"} {
		_, err := parseTTL(bad)
		assert.Error(t, err, bad)
	}
}

// TestServeCapsEventStreamsPerToken runs `wsctl serve
// --max-streams-per-token 2`: a token's third event stream is 429
// too_many while its two are open; a bad value is a usage error.
func TestServeCapsEventStreamsPerToken(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	_, errOut, code := wsctl(t, dsn, "init")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = wsctl(t, dsn, "serve", "--max-streams-per-token", "0")
	assert.Equal(t, 2, code, errOut)
	tok, errOut, code := wsctl(t, dsn, "--as", "root", "token", "create", "--actor", "ann")
	require.Equal(t, 0, code, errOut)
	tok = strings.TrimSpace(tok)
	_, url, _ := startServe(t, dsn, "--listen", "127.0.0.1:0", "--max-streams-per-token", "2")

	get := func() *http.Response {
		req, err := http.NewRequest("GET", url+"/v1/events?after=0", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = res.Body.Close() })
		return res
	}
	for range 2 {
		require.Equal(t, http.StatusOK, get().StatusCode)
	}
	res := get()
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"code":"too_many"`)
}

// TestTokenCreateIsRecordedAsTheOperator: `token create --actor shorty`
// is the operator's write (--as, or without it the user running wsctl),
// with a message naming shorty; shorty did nothing. A revocation is the
// operator's too.
func TestTokenCreateIsRecordedAsTheOperator(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	_, errOut, code := wsctl(t, dsn, "init")
	require.Equal(t, 0, code, errOut)
	login, err := user.Current()
	require.NoError(t, err)

	_, errOut, code = wsctl(t, dsn, "--as", "ops", "token", "create", "--actor", "shorty")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = wsctl(t, dsn, "token", "create", "--actor", "tall")
	require.Equal(t, 0, code, errOut)
	out, errOut, code := wsctl(t, dsn, "token", "ls", "--json")
	require.Equal(t, 0, code, errOut)
	var toks []agents.Token
	require.NoError(t, json.Unmarshal([]byte(out), &toks))
	require.Len(t, toks, 2)
	by := map[string]agents.Token{}
	for _, tk := range toks {
		by[tk.Actor] = tk
	}
	assert.Equal(t, "ops", by["shorty"].CreatedBy)
	assert.Equal(t, login.Username, by["tall"].CreatedBy, "without --as: the user running wsctl")
	_, errOut, code = wsctl(t, dsn, "--as", "ops", "token", "revoke", by["shorty"].ID)
	require.Equal(t, 0, code, errOut)

	ws, err := workspace.Open(context.Background(), dsn)
	require.NoError(t, err)
	defer ws.Close()
	page, err := ws.Events().Read(context.Background(), workspace.EventQuery{})
	require.NoError(t, err)
	var got []string
	for _, ev := range page.Events {
		if ev.Subject.Kind == "note" && strings.HasPrefix(ev.Subject.ID, agents.TokenKind+"/") {
			got = append(got, ev.Actor+": "+ev.Message)
		}
	}
	assert.Equal(t, []string{
		"ops: token " + by["shorty"].ID + " created for shorty",
		login.Username + ": token " + by["tall"].ID + " created for tall",
		"ops: token " + by["shorty"].ID + " of shorty revoked",
	}, got)
}

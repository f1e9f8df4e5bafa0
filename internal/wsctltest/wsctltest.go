// Package wsctltest runs the real wsctl program for tests that need it as
// a process of its own (the TypeScript and Python clients' suites, which
// talk to `wsctl serve`): it builds cmd/wsctl once per test process and
// gives wsctl children an environment that the developer's own AGENTSPACE_
// variables cannot leak into. It is for tests only.
//
// The children are built without the race detector unless
// AGENTSPACE_TEST_RACE_CHILDREN=1 (and the test itself has it). The race
// detector sees races within one process, and wsctl's code runs under it
// in the test processes themselves (the CLI's run, the server, MCP and
// every backend are tested in process); what a child adds is its start,
// which the tests pay some three thousand times: 185 ms of CPU for a
// race-built `wsctl version` against 53 ms (2026-12-02, the 2-core VM),
// and every request a race-built server answers costs several times more.
// That put CI over its budget.
//
// A build is kept in the user's cache directory under a key made of the Go
// toolchain and its settings, go.mod and go.sum, and the content of every
// file of this module the build reads (go list names them), so `go test
// ./...` links wsctl once for all the packages that run it, and a rerun
// with nothing changed links it not at all; any change to a source file
// changes the key.
package wsctltest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// Binary returns the path of a wsctl built from this checkout, building it
// (or finding it in the cache) on the first call in the process; a failed
// build fails t with the compiler's output.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { built, buildErr = build() })
	if buildErr != nil {
		t.Fatalf("wsctltest: %v", buildErr)
	}
	return built
}

// Path is Binary for a caller with no testing.TB at hand (a testscript
// Setup): it returns the build's error instead of failing a test.
func Path() (string, error) {
	buildOnce.Do(func() { built, buildErr = build() })
	if buildErr != nil {
		return "", fmt.Errorf("wsctltest: %w", buildErr)
	}
	return built, nil
}

// moduleRoot is the directory of this module's go.mod.
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot tell where the module is")
	}
	// internal/wsctltest/wsctltest.go
	return filepath.Dir(filepath.Dir(filepath.Dir(file))), nil
}

// build links cmd/wsctl into the cache (or a temporary directory where
// there is no cache directory) unless a build under the same key is there.
func build() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	key, err := buildKey(root)
	if err != nil {
		return "", err
	}
	dir, cached := "", false
	if cache, err := os.UserCacheDir(); err == nil {
		dir = filepath.Join(cache, "agentspace-test", "wsctl-"+key)
		bin := filepath.Join(dir, "wsctl")
		if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
			now := time.Now()
			_ = os.Chtimes(dir, now, now) // in use: pruneCache keeps it
			return bin, nil
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			dir = ""
		}
		cached = dir != ""
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "wsctltest-"); err != nil {
			return "", err
		}
	}
	// Link beside the final name and rename: two test processes building
	// at once each rename a whole binary, and neither sees half of one.
	tmp, err := os.CreateTemp(dir, "wsctl-*.tmp")
	if err != nil {
		return "", err
	}
	_ = tmp.Close()
	defer func() { _ = os.Remove(tmp.Name()) }()
	args := append([]string{"build", "-o", tmp.Name()}, childFlags()...)
	cmd := exec.Command("go", append(args, "./cmd/wsctl")...) // #nosec G204 -- fixed arguments: go build [race flags] -o a temporary file
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build wsctl: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "wsctl")
	if err := os.Rename(tmp.Name(), bin); err != nil {
		return "", err
	}
	if cached {
		pruneCache(filepath.Dir(dir), dir)
	}
	return bin, nil
}

// RaceChildrenEnv set to 1 builds the wsctl children with the race
// detector when the test has it.
const RaceChildrenEnv = "AGENTSPACE_TEST_RACE_CHILDREN"

// childRace reports whether the children are built with the race detector.
func childRace() bool { return raceEnabled && os.Getenv(RaceChildrenEnv) == "1" }

// childFlags are the children's build flags: raceFlags or none.
func childFlags() []string {
	if childRace() {
		return raceFlags
	}
	return nil
}

// raceGcflags keeps the race detector off SQLite's C translated to Go
// (modernc.org/...), which it would not see under cgo either and which it
// slows fourfold. The README's test command, the Makefile and .ci/run
// pass it too (TestTheRaceFlagsAreTheREADMEs), so that a race build of
// wsctl shares the packages the test run compiled.
const raceGcflags = "-gcflags=modernc.org/...=-race=false"

// buildKey names a build: the toolchain and its settings, whether the race
// detector is on, go.mod and go.sum (which pin every other module), and
// the content of every file of this module that cmd/wsctl's build reads
// (its packages' Go files and embedded files, as go list names them).
func buildKey(root string) (string, error) {
	h := sha256.New()
	env, err := exec.Command("go", "env", "GOVERSION", "GOFLAGS", "GOOS", "GOARCH", "GOAMD64", "CGO_ENABLED", "GOEXPERIMENT").Output()
	if err != nil {
		return "", fmt.Errorf("go env: %w", err)
	}
	fmt.Fprintf(h, "%s race=%v %q\n", env, childRace(), childFlags())
	list := exec.Command("go", "list", "-deps", "-f",
		`{{if and .Module .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .CgoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}`,
		"./cmd/wsctl")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		return "", fmt.Errorf("go list cmd/wsctl: %w", err)
	}
	files := append(strings.Fields(string(out)), filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum"))
	for _, f := range files {
		b, err := os.ReadFile(f) // #nosec G304 -- files of this module, as go list names them
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(root, f)
		fmt.Fprintf(h, "%s %d\n", rel, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

// pruneCache removes the cache's other builds not used for a day.
func pruneCache(cache, keep string) {
	entries, err := os.ReadDir(cache)
	if err != nil {
		return
	}
	for _, e := range entries {
		path := filepath.Join(cache, e.Name())
		if !e.IsDir() || path == keep || !strings.HasPrefix(e.Name(), "wsctl-") {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > 24*time.Hour {
			_ = os.RemoveAll(path)
		}
	}
}

// Env is the environment of a wsctl child (or of a client that talks to
// one): this process's, without its AGENTSPACE_ variables (but with the
// AGENTSPACE_TEST_ ones, which say what the tests require), with extra
// appended. A race-enabled wsctl sleeps a second at exit by default; Env
// turns that off, as the tests start many.
func Env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GORACE=") && (!strings.HasPrefix(kv, "AGENTSPACE_") || strings.HasPrefix(kv, "AGENTSPACE_TEST_")) {
			env = append(env, kv)
		}
	}
	env = append(env, QuietRaceExit())
	return append(env, extra...)
}

// QuietRaceExit is the GORACE variable for a child process: this
// process's options, and atexit_sleep_ms=0, so that a race-enabled child
// does not sleep a second as it exits. A race in the child is still
// reported, and still fails its exit status.
func QuietRaceExit() string {
	return "GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")
}

// Server is a running `wsctl serve` started by Serve.
type Server struct {
	// URL is where it serves (http://127.0.0.1:PORT).
	URL string

	cmd  *exec.Cmd
	mu   sync.Mutex
	logs bytes.Buffer
}

// Kill ends the server with SIGKILL, as a crash would (no drain, no
// goodbye to its clients), and waits for it to exit. A second Kill (the
// test's cleanup) does nothing.
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// Logs is what the server wrote to stderr so far.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// serving is the line wsctl serve writes once it listens.
var serving = regexp.MustCompile(` on (http://\S+) for `)

// Serve starts `bin --dsn dsn serve --listen 127.0.0.1:0 args...` with
// Env(), waits until it says where it listens, and kills it with
// t.Cleanup. The workspace must exist (wsctl serve does not create one).
func Serve(t testing.TB, bin, dsn string, args ...string) *Server {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--dsn", dsn, "serve", "--listen", "127.0.0.1:0"}, args...)...) // #nosec G204 -- the wsctl Binary built, with the test's arguments
	cmd.Env = Env()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatalf("wsctltest: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("wsctltest: starting wsctl serve: %v", err)
	}
	s := &Server{cmd: cmd}
	t.Cleanup(s.Kill)
	// A failed test shows what the server said (cleanups run last first:
	// this runs before the kill, and the log is the server's up to now).
	t.Cleanup(func() {
		if t.Failed() {
			logs := s.Logs()
			if len(logs) > 8<<10 {
				logs = "..." + logs[len(logs)-8<<10:]
			}
			t.Logf("wsctl serve (%s) said:\n%s", s.URL, logs)
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.mu.Lock()
			s.logs.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if m := serving.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case s.URL = <-found:
	case <-time.After(60 * time.Second):
		t.Fatalf("wsctl serve did not start: %s", s.Logs())
	}
	return s
}

// Init makes dsn's workspace with `bin --dsn dsn init`.
func Init(t testing.TB, bin, dsn string) {
	t.Helper()
	cmd := exec.Command(bin, "--dsn", dsn, "init")
	cmd.Env = Env()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("wsctl init: %v: %s", err, out)
	}
}

// DocScript returns the one ```sh block of docs/shell-agents.md whose first
// line is shebang (as "#!/bin/sh"), verbatim: the scripts the docs offer
// as agents, which tests run as they are. It fails t unless exactly one
// block starts so.
func DocScript(t testing.TB, shebang string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("wsctltest: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "shell-agents.md")) // #nosec G304 -- this module's docs
	if err != nil {
		t.Fatalf("wsctltest: %v", err)
	}
	var (
		script strings.Builder
		in     bool
		found  int
	)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for prev := ""; sc.Scan(); prev = sc.Text() {
		line := sc.Text()
		switch {
		case !in && prev == "```sh" && line == shebang:
			in = true
			found++
			if found == 1 {
				script.WriteString(line + "\n")
			}
		case in && line == "```":
			in = false
		case in && found == 1:
			script.WriteString(line + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("wsctltest: reading docs/shell-agents.md: %v", err)
	}
	if found != 1 {
		t.Fatalf("docs/shell-agents.md must hold exactly one ```sh block starting with %s, not %d", shebang, found)
	}
	return script.String()
}

// Package clients_test runs the TypeScript client's own tests (node
// --test), the official LangGraph checkpoint validation suite and the
// LangGraph team example against a real `wsctl serve`, on SQLite and on
// PostgreSQL. Node and npm are required where AGENTSPACE_TEST_REQUIRE_NODE=1
// (CI); elsewhere their absence skips these tests with one loud line.
package clients_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/internal/testskip"
	"github.com/agentspace/agentspace/internal/wsctltest"
)

// node returns the paths of node and npm, or skips (fails under
// AGENTSPACE_TEST_REQUIRE_NODE=1) without them.
func node(t *testing.T) (string, string) {
	t.Helper()
	n, nerr := exec.LookPath("node")
	p, perr := exec.LookPath("npm")
	if nerr != nil || perr != nil {
		testskip.Skip(t, "AGENTSPACE_TEST_REQUIRE_NODE", "SKIPPING the TypeScript client tests: node or npm not on PATH")
	}
	return n, p
}

func repoDir(t *testing.T, parts ...string) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok)
	return filepath.Join(append([]string{filepath.Dir(file), ".."}, parts...)...)
}

// installMu makes the tests install one npm tree at a time.
var installMu sync.Mutex

// npmCI installs dir's locked dependencies unless they are there
// (.ci/run installs them first; `npm ci` also builds the client).
func npmCI(t *testing.T, npm, dir, probe string) {
	t.Helper()
	installMu.Lock()
	defer installMu.Unlock()
	if _, err := os.Stat(filepath.Join(dir, probe)); err == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "npm ci in %s: %s", dir, out)
}

// server is a running `wsctl serve`.
type server struct {
	*wsctltest.Server
	dsn, bin string
}

// serve initialises dsn's workspace and starts `wsctl serve` on it.
func serve(t *testing.T, dsn string) *server {
	t.Helper()
	bin := wsctltest.Binary(t)
	wsctltest.Init(t, bin, dsn)
	// The suites put TCP proxies (127.0.0.1 on ports of their own) in front
	// of the server, so it must answer to 127.0.0.1 on any port.
	return &server{Server: wsctltest.Serve(t, bin, dsn, "--heartbeat", "200ms", "--allowed-host", "127.0.0.1"), dsn: dsn, bin: bin}
}

// env is the environment of a node process talking to s.
func (s *server) env(actor string) []string {
	return wsctltest.Env("AGENTSPACE_URL="+s.URL, "AGENTSPACE_ACTOR="+actor, "AGENTSPACE_TEST_WSCTL="+s.bin, "AGENTSPACE_TEST_DSN="+s.dsn)
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
	return string(out)
}

var buildOnce sync.Once

// clientDir installs the client's locked dependencies if need be, and
// builds dist/ from src/ once per test run, so the tests run what src says.
func clientDir(t *testing.T, n, npm string) string {
	t.Helper()
	dir := repoDir(t, "clients", "typescript")
	npmCI(t, npm, dir, filepath.Join("node_modules", "typescript", "package.json"))
	var out string
	var err error
	buildOnce.Do(func() {
		cmd := exec.Command(n, filepath.Join("node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json")
		cmd.Dir = dir
		b, e := cmd.CombinedOutput()
		out, err = string(b), e
	})
	require.NoError(t, err, "tsc: %s", out)
	_, err = os.Stat(filepath.Join(dir, "dist", "langgraph", "index.js"))
	require.NoError(t, err, "the client is not built")
	return dir
}

func nodeTests(t *testing.T, s *server) {
	n, npm := node(t)
	dir := clientDir(t, n, npm)
	files, err := filepath.Glob(filepath.Join(dir, "test", "*.test.mjs"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := run(t, dir, s.env("ts-tests"), n, append([]string{"--test", "--test-reporter=spec"}, files...)...)
	assert.Regexp(t, `(?m)^ℹ fail 0$`, out)
	assert.NotRegexp(t, `(?m)^ℹ pass 0$`, out)
}

// TestTypeScriptClientOnSQLite runs the client's node --test suites
// against wsctl serve on a SQLite workspace.
func TestTypeScriptClientOnSQLite(t *testing.T) {
	t.Parallel()
	nodeTests(t, serve(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db")))
}

// TestTypeScriptClientOnPostgres runs them on a PostgreSQL workspace.
func TestTypeScriptClientOnPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	nodeTests(t, serve(t, dsn))
}

// TestLangGraphCheckpointValidationSuite runs the official
// @langchain/langgraph-checkpoint-validation suite, unchanged, against
// AgentspaceSaver (vitest is the suite's own runner).
func TestLangGraphCheckpointValidationSuite(t *testing.T) {
	t.Parallel()
	n, npm := node(t)
	dir := clientDir(t, n, npm)
	s := serve(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	out := run(t, dir, append(s.env("validator"), "NO_COLOR=1"), n, filepath.Join("node_modules", "vitest", "vitest.mjs"), "run", "--config", filepath.Join("validation", "vitest.config.mjs"), "--reporter=dot")
	out = regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(out, "")
	m := regexp.MustCompile(`(?m)^\s*Tests\s+(\d+) passed \((\d+)\)$`).FindStringSubmatch(out)
	require.NotNil(t, m, "every case passes:\n%s", out)
	assert.Equal(t, m[2], m[1], "every case passes")
	assert.NotEqual(t, "0", m[1])
}

// TestOpenAPITypesAreGeneratedFromTheServedDocument regenerates
// src/openapi.ts from the running server's /v1/openapi.json with
// openapi-typescript and fails on any difference.
func TestOpenAPITypesAreGeneratedFromTheServedDocument(t *testing.T) {
	t.Parallel()
	n, npm := node(t)
	dir := clientDir(t, n, npm)
	s := serve(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	resp, err := http.Get(s.URL + "/v1/openapi.json")
	require.NoError(t, err)
	defer resp.Body.Close()
	doc, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	tmp := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "openapi.json"), doc, 0o600))
	gen := filepath.Join(tmp, "openapi.ts")
	run(t, dir, wsctltest.Env(), n, filepath.Join("node_modules", "openapi-typescript", "bin", "cli.js"), filepath.Join(tmp, "openapi.json"), "-o", gen)
	want, err := os.ReadFile(gen)
	require.NoError(t, err)
	have, err := os.ReadFile(filepath.Join(dir, "src", "openapi.ts"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, have), "clients/typescript/src/openapi.ts is stale: regenerate it (see docs/typescript.md)")
}

// TestReadmeSnippetsAreTheTestedExamples checks that README's "From
// TypeScript", docs/langgraph.md's "With LangGraph" and
// docs/typescript.md's "Messages" code blocks are exactly the example
// files, and runs those files against a server.
func TestReadmeSnippetsAreTheTestedExamples(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(repoDir(t, "README.md"))
	require.NoError(t, err)
	n, npm := node(t)
	dir := clientDir(t, n, npm)
	s := serve(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	langgraph, err := os.ReadFile(repoDir(t, "docs", "langgraph.md"))
	require.NoError(t, err)
	tsdoc, err := os.ReadFile(repoDir(t, "docs", "typescript.md"))
	require.NoError(t, err)
	for _, s := range []struct{ doc, text, heading, file string }{
		{"README.md", string(readme), "From TypeScript", "quickstart.mjs"},
		{"docs/langgraph.md", string(langgraph), "With LangGraph", "langgraph.mjs"},
		{"docs/typescript.md", string(tsdoc), "Messages", "messages.mjs"},
	} {
		body, err := os.ReadFile(filepath.Join(dir, "examples", s.file))
		require.NoError(t, err)
		assert.Equal(t, string(body), snippet(t, s.text, s.heading), "%s %q differs from clients/typescript/examples/%s", s.doc, s.heading, s.file)
	}
	out := run(t, dir, s.env("readme"), n, filepath.Join("examples", "quickstart.mjs"))
	assert.Contains(t, out, "conflict: current version is 1")
	assert.Contains(t, out, "artifact.updated")
	out = run(t, dir, s.env("readme"), n, filepath.Join("examples", "langgraph.mjs"))
	assert.Contains(t, out, "[ 'worked' ]")
	out = run(t, dir, s.env("readme"), n, filepath.Join("examples", "messages.mjs"))
	assert.Contains(t, out, "lead asks: rebase: Rebase on main before you push.")
	assert.Contains(t, out, "acked: rebased")
}

// snippet returns the first ```js block after the "## heading" line of a
// document.
func snippet(t *testing.T, readme, heading string) string {
	t.Helper()
	_, rest, ok := strings.Cut(readme, "\n## "+heading+"\n")
	require.True(t, ok, "no ## %s", heading)
	_, rest, ok = strings.Cut(rest, "```js\n")
	require.True(t, ok, "## %s has no ```js block", heading)
	block, _, ok := strings.Cut(rest, "```\n")
	require.True(t, ok)
	return block
}

// scenarioTest runs the shared client scenario (clients/scenario/) through
// the TypeScript client, alone on a fresh workspace: it reads the head.
func scenarioTest(t *testing.T, dsn string) {
	n, npm := node(t)
	dir := clientDir(t, n, npm)
	file := repoDir(t, "clients", "scenario", "scenario.json")
	_, err := os.Stat(file)
	require.NoError(t, err, "the shared scenario file is part of the tree")
	s := serve(t, dsn)
	out := run(t, dir, append(s.env("scenario"), "AGENTSPACE_TEST_SCENARIO="+file), n, "--test", "--test-reporter=spec", filepath.Join("test", "scenario", "scenario.test.mjs"))
	assert.Regexp(t, `(?m)^ℹ fail 0$`, out)
	assert.NotRegexp(t, `(?m)^ℹ pass 0$`, out)
}

// TestTypeScriptScenarioOnSQLite runs the shared scenario on SQLite.
func TestTypeScriptScenarioOnSQLite(t *testing.T) {
	t.Parallel()
	scenarioTest(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
}

// TestTypeScriptScenarioOnPostgres runs the shared scenario on PostgreSQL.
func TestTypeScriptScenarioOnPostgres(t *testing.T) {
	t.Parallel()
	scenarioTest(t, pgtest.NewDSN(t))
}

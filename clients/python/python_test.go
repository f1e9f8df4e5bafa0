// Package pythonclient_test runs the Python client's unittest suite
// against real `wsctl serve` processes, on SQLite and on PostgreSQL, checks
// that the package installs offline with pip, and that README's "From
// Python" snippet is the file the suite runs.
package pythonclient_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/internal/testskip"
	"github.com/agentspace/agentspace/internal/wsctltest"
)

// python returns the python3 to run, 3.10 or newer: missing, the tests
// skip loudly, or fail where AGENTSPACE_TEST_REQUIRE_PYTHON=1 (CI).
func python(t testing.TB) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		testskip.Skip(t, "AGENTSPACE_TEST_REQUIRE_PYTHON", "SKIPPING the Python client tests: python3 not on PATH")
	}
	out, err := exec.Command(py, "-c", "import sys; print(sys.version_info >= (3, 10))").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "True", strings.TrimSpace(string(out)), "the client needs Python 3.10 or newer")
	return py
}

// runSuite runs `python3 -m unittest discover` on the store and returns
// its output; a failing suite fails the test with all of it.
func runSuite(t *testing.T, store string) string {
	py := python(t)
	bin := wsctltest.Binary(t)
	wsctltest.Init(t, bin, store)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "discover", "-s", "tests", "-v")
	cmd.Env = wsctltest.Env(
		"PYTHONPATH=src",
		"PYTHONDONTWRITEBYTECODE=1",
		"AGENTSPACE_TEST_WSCTL="+bin,
		"AGENTSPACE_TEST_STORE="+store,
	)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the Python suite failed:\n%s", out)
	ran := regexp.MustCompile(`(?m)^Ran (\d+) tests? in`).FindStringSubmatch(string(out))
	require.NotNil(t, ran, "%s", out)
	assert.Regexp(t, `(?m)^OK$`, string(out))
	assert.NotContains(t, string(out), "skipped", "no Python test may skip")
	t.Logf("python: ran %s tests in %s", ran[1], time.Since(start).Round(time.Millisecond))
	return string(out)
}

// TestPythonClientOnSQLite runs the Python suite against wsctl serve in
// front of SQLite.
func TestPythonClientOnSQLite(t *testing.T) {
	t.Parallel()
	out := runSuite(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	// The shared scenario ran, every one of its scenarios.
	var doc struct {
		Scenarios []struct{ Name string } `json:"scenarios"`
	}
	b, err := os.ReadFile("../scenario/scenario.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &doc))
	for _, sc := range doc.Scenarios {
		assert.Contains(t, out, sc.Name+" ... ok", "the scenario %q ran and passed", sc.Name)
	}
}

// TestPythonClientOnPostgres runs it in front of PostgreSQL.
func TestPythonClientOnPostgres(t *testing.T) {
	t.Parallel()
	python(t)
	runSuite(t, pgtest.NewDSN(t))
}

// TestPythonClientInstallsOffline installs the package as a user would on
// a machine that reaches no package index: into a venv, with pip, from a
// copy of clients/python, with no setuptools or wheel needed; then the
// installed package (not the source tree) runs the README's snippet
// against a server.
func TestPythonClientInstallsOffline(t *testing.T) {
	t.Parallel()
	py := python(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	copyTree(t, ".", src, func(rel string) bool {
		top, _, _ := strings.Cut(rel, string(filepath.Separator))
		return (rel == "pyproject.toml" || rel == "README.md" || top == "src" || top == "build_backend") && !strings.Contains(rel, "__pycache__")
	})
	venv := filepath.Join(dir, "venv")
	start := time.Now()
	// The venv borrows pip from the interpreter's own site-packages.
	out, err := exec.Command(py, "-m", "venv", "--system-site-packages", "--without-pip", venv).CombinedOutput()
	require.NoError(t, err, "venv: %s", out)
	made := time.Since(start)
	// Plain pip install, build isolation and all: the build needs nothing
	// from an index (pyproject.toml names no build requirement).
	pip := exec.Command(filepath.Join(venv, "bin", "python"), "-m", "pip", "install", "--no-index", "-q", src)
	pip.Env = append(os.Environ(), "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_CACHE_DIR=1", "PYTHONDONTWRITEBYTECODE=1")
	out, err = pip.CombinedOutput()
	require.NoError(t, err, "pip install: %s", out)
	t.Logf("venv in %s, pip install in %s", made.Round(time.Millisecond), (time.Since(start) - made).Round(time.Millisecond))

	vpy := filepath.Join(venv, "bin", "python")
	out, err = exec.Command(vpy, "-c", "import agentspace, pathlib; p = pathlib.Path(agentspace.__file__).parent; print(p); print((p / 'py.typed').exists())").CombinedOutput()
	require.NoError(t, err, "%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 2, "%s", out)
	assert.True(t, strings.HasPrefix(lines[0], venv), "imported from the venv, not the source tree: %s", lines[0])
	assert.Equal(t, "True", lines[1], "py.typed is installed")

	// The installed package runs the README's snippet.
	bin := wsctltest.Binary(t)
	store := "sqlite:" + filepath.Join(dir, "ws.db")
	wsctltest.Init(t, bin, store)
	url := wsctltest.Serve(t, bin, store).URL
	out, err = exec.Command(bin, "--dsn", store, "--as", "lead", "task", "add", "write the plan").CombinedOutput()
	require.NoError(t, err, "%s", out)
	run := exec.Command(vpy, "readme_example.py")
	run.Dir = "examples"
	run.Env = append(os.Environ(), "AGENTSPACE_URL="+url, "AGENTSPACE_TOKEN=", "AGENTSPACE_ACTOR=worker-1", "PYTHONDONTWRITEBYTECODE=1")
	out, err = run.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "worker-1 finished")
}

// TestReadmeFromPythonIsTheTestedFile keeps README's "From Python" snippet
// identical to examples/readme_example.py, which the suite and the install
// test run.
func TestReadmeFromPythonIsTheTestedFile(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	file, err := os.ReadFile("examples/readme_example.py")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)<!-- clients/python/examples/readme_example.py -->\n```python\n(.*?)```\n").FindSubmatch(readme)
	require.NotNil(t, m, "README has the snippet, marked with its file")
	assert.Equal(t, string(file), string(m[1]))
}

// copyTree copies the files under from whose relative path keep accepts.
func copyTree(t *testing.T, from, to string, keep func(string) bool) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil || d.IsDir() || !keep(rel) {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600)
	}))
}

// BenchmarkPythonClient measures the client against bare HTTP calls doing
// the same requests (urllib, a new connection per call as urllib makes
// them, and http.client on one kept-alive connection), for a read and a
// conditional write, and follow's throughput while a writer process
// commits as fast as it can. Run it with -benchtime 1x: each run is a
// whole measurement (bench/bench_client.py).
func BenchmarkPythonClient(b *testing.B) {
	for _, be := range []struct {
		name  string
		store func(b *testing.B) string
	}{
		{"sqlite", func(b *testing.B) string { return "sqlite:" + filepath.Join(b.TempDir(), "ws.db") }},
		{"postgres", func(b *testing.B) string { return pgtest.NewDSN(b) }},
	} {
		b.Run(be.name, func(b *testing.B) {
			py := python(b)
			bin := wsctltest.Binary(b)
			store := be.store(b)
			wsctltest.Init(b, bin, store)
			url := wsctltest.Serve(b, bin, store).URL
			var fig map[string]float64
			for b.Loop() {
				out, err := exec.Command(py, "bench/bench_client.py", "--url", url, "--n", "300", "--seconds", "3").Output()
				require.NoError(b, err, "%s", out)
				require.NoError(b, json.Unmarshal(out, &fig), "%s", out)
			}
			for k, v := range fig {
				b.ReportMetric(v, k)
			}
			b.ReportMetric(fig["read_client_us"]/fig["read_urllib_us"], "read-vs-urllib")
			b.ReportMetric(fig["read_client_us"]/fig["read_httpclient_us"], "read-vs-httpclient")
			b.ReportMetric(fig["write_client_us"]/fig["write_urllib_us"], "write-vs-urllib")
			b.ReportMetric(fig["write_client_us"]/fig["write_httpclient_us"], "write-vs-httpclient")
		})
	}
}

// BenchmarkPythonMessageHandover measures a message's hand-over from the
// sender's send_message call to the recipient's wait returning with it:
// through the inbox stream (SSE), the inbox's long poll, wait_for_work,
// and reading the inbox every second, p50 and p99 in ms
// (bench/bench_messages.py). Run it with -benchtime 1x.
func BenchmarkPythonMessageHandover(b *testing.B) {
	for _, be := range []struct {
		name  string
		store func(b *testing.B) string
	}{
		{"sqlite", func(b *testing.B) string { return "sqlite:" + filepath.Join(b.TempDir(), "ws.db") }},
		{"postgres", func(b *testing.B) string { return pgtest.NewDSN(b) }},
	} {
		b.Run(be.name, func(b *testing.B) {
			py := python(b)
			bin := wsctltest.Binary(b)
			store := be.store(b)
			wsctltest.Init(b, bin, store)
			url := wsctltest.Serve(b, bin, store).URL
			var fig map[string]map[string]float64
			for b.Loop() {
				out, err := exec.Command(py, "bench/bench_messages.py", "--url", url, "--n", "200", "--polled", "30").Output()
				require.NoError(b, err, "%s", out)
				require.NoError(b, json.Unmarshal(out, &fig), "%s", out)
			}
			for way, f := range fig {
				b.ReportMetric(f["p50_ms"], way+"-p50-ms")
				b.ReportMetric(f["p99_ms"], way+"-p99-ms")
			}
		})
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/bench"
	"github.com/agentspace/agentspace/internal/wsctltest"
)

// TestBenchCLIRowTimesEachCommand: wsctl bench --workloads CLI loads a
// store of its own, runs each command of an agent's loop as a wsctl
// process, directly and through a server (--serve tcp), and reports one
// row per command and way, each with a wall time and the process's CPU.
func TestBenchCLIRowTimesEachCommand(t *testing.T) {
	bin := wsctltest.Binary(t)
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	cmd := exec.Command(bin, "--dsn", dsn, "bench", "--workloads", "CLI", "--cli-tasks", "1200", "--cli-runs", "1", "--serve", "tcp", "--json")
	cmd.Env = wsctltest.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())

	var rows []bench.Row
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var r bench.Row
		require.NoError(t, dec.Decode(&r))
		rows = append(rows, r)
	}
	seen := map[string]bool{}
	for _, r := range rows {
		assert.Equal(t, "CLI", r.Workload)
		assert.Equal(t, "sqlite", r.Backend)
		assert.Positive(t, r.P50us, r.Variant)
		seen[r.Variant] = true
	}
	for _, v := range []string{"version", "task add", "task claim", "task done", "artifact put", "task ls --limit 5",
		"task ls --ready --limit 5", "task ls --ready --limit 5 via tcp", "task done via tcp"} {
		assert.True(t, seen[v], "no row for %q", v)
	}
	assert.Len(t, rows, 16)
}

// TestBenchRefusesBadWorkspaces: --workspaces out of range, without
// --processes, above them, or on a store with no sibling workspaces (a
// JSON directory): exit 2 with the reason, before anything is measured.
func TestBenchRefusesBadWorkspaces(t *testing.T) {
	dir := t.TempDir()
	sqlite := "sqlite:" + filepath.Join(dir, "ws.db")
	cases := map[string]struct {
		args []string
		want string
	}{
		"zero":           {[]string{"--dsn", sqlite, "bench", "--serve", "unix", "--processes", "4", "--workspaces", "0"}, "--workspaces: 0 is not a count between 1 and 64"},
		"negative":       {[]string{"--dsn", sqlite, "bench", "--serve", "unix", "--processes", "4", "--workspaces", "-1"}, "--workspaces: -1 is not a count"},
		"too many":       {[]string{"--dsn", sqlite, "bench", "--serve", "unix", "--processes", "200", "--workspaces", "65"}, "--workspaces: 65 is not a count"},
		"no processes":   {[]string{"--dsn", sqlite, "bench", "--serve", "unix", "--workspaces", "2"}, "--workspaces needs --processes"},
		"over processes": {[]string{"--dsn", sqlite, "bench", "--serve", "unix", "--processes", "2", "--workspaces", "4"}, "4 workspaces but 2 processes"},
		"json":           {[]string{"--dsn", "json:" + filepath.Join(dir, "j"), "bench", "--serve", "unix", "--processes", "4", "--workspaces", "2"}, "a json DSN has no sibling workspaces"},
	}
	for name, tc := range cases {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, nil, &stdout, &stderr, func(string) string { return "" })
		assert.Equal(t, exitUsage, code, "%s: %s", name, stderr.String())
		assert.Contains(t, stderr.String(), tc.want, name)
		assert.Empty(t, stdout.String(), name)
	}
	assert.NoFileExists(t, filepath.Join(dir, "ws.db"), "nothing was opened")
}

// TestBenchDocsCLIRendersTheCLIRegionAlone: `bench docs --cli` measures
// the CLI rows at two store sizes, directly and through a server, without
// PostgreSQL, writes their record, and rewrites a doc's cli region from it
// while the regions of a full docs run stay as they were.
func TestBenchDocsCLIRendersTheCLIRegionAlone(t *testing.T) {
	bin := wsctltest.Binary(t)
	dir := t.TempDir()
	doc := filepath.Join(dir, "perf.md")
	require.NoError(t, os.WriteFile(doc, []byte("# P\n\n<!-- bench:begin figures old.json -->\nby hand\n<!-- bench:end figures -->\n\n"+
		"<!-- bench:begin cli old.json -->\n<!-- bench:end cli -->\nAfter.\n"), 0o600))
	recPath := filepath.Join(dir, "cli.json")
	rec := runBenchDocs(t, bin, recPath, "--cli", "--cli-runs", "1", "--tasks", "1100", "--cli-big-tasks", "1300",
		"--dir", dir, "--update", doc)
	require.Len(t, rec.Runs, 2)
	assert.Equal(t, "cli", rec.Runs[0].Name)
	assert.Equal(t, 1100, rec.Runs[0].Tasks)
	assert.Len(t, rec.Runs[0].Rows, 16, "each command directly and via tcp")
	assert.Equal(t, 1300, rec.Runs[1].Tasks)
	assert.Len(t, rec.Runs[1].Rows, 8, "each command directly")
	assert.Contains(t, rec.Command, "--cli ")
	assert.NotContains(t, rec.Command, "--cli true")

	b, err := os.ReadFile(doc) // #nosec G304 -- the test's own file
	require.NoError(t, err)
	regions, err := bench.Regions(string(b))
	require.NoError(t, err)
	require.Len(t, regions, 2)
	assert.Equal(t, "figures", regions[0].Name)
	assert.Equal(t, "old.json", regions[0].Record, "a CLI record does not cover a full run's region")
	assert.Equal(t, "by hand\n", regions[0].Body)
	assert.Equal(t, "cli.json", regions[1].Record)
	want, err := bench.RenderRegion("cli", rec, "cli.json")
	require.NoError(t, err)
	assert.Equal(t, want, regions[1].Body)
	assert.Contains(t, strings.Join(strings.Fields(want), " "), "each command run 1 times as a whole process")
	assert.Contains(t, want, "| `wsctl task ls --ready --limit 5` |")
	assert.Contains(t, want, "| 1100 tasks: p50 | CPU | via tcp: p50 | CPU | 1300 tasks: p50 | CPU |")
	for _, line := range strings.Split(want, "\n") {
		if !strings.HasPrefix(line, "| `wsctl ") {
			continue
		}
		cells := strings.Split(line, " | ")
		require.Len(t, cells, 9, line)
		assert.NotContains(t, cells[1:7], "-", "every command was measured each way: %s", line)
	}
}

// TestBenchGrowthPrintsEachSize: wsctl bench --workloads GROWTH fills a
// store of its own to each of --growth-events and prints a row per
// operation and size, the larger size's with its ratio to the smaller's.
func TestBenchGrowthPrintsEachSize(t *testing.T) {
	bin := wsctltest.Binary(t)
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	cmd := exec.Command(bin, "--dsn", dsn, "bench", "--workloads", "GROWTH", "--growth-events", "400,1500", "--growth-tasks", "200", "--duration", "20ms")
	cmd.Env = wsctltest.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	for _, m := range []string{"W1", "W2", "W5", "board", "events after head-100", "resume from head-1000", "verify", "backup", "export", "gc"} {
		for _, size := range []string{"400", "1.5k"} {
			assert.Contains(t, string(out), m+" at "+size+" events", "no row for %s at %s", m, size)
		}
	}
	assert.Contains(t, string(out), "x the p50 at 400 events")
	assert.Contains(t, string(out), "per million events")
	assert.NoFileExists(t, filepath.Join(filepath.Dir(strings.TrimPrefix(dsn, "sqlite:")), "ws.db"), "the DSN's own store is not touched")
}

// TestBenchDocsGrowthRendersTheGrowthRegionAlone: `bench docs --growth`
// runs GROWTH on each backend at the sizes asked for, writes their record,
// and rewrites a doc's growth region from it, leaving every other region
// as it was; --cli with --growth, or bad sizes, are refused before
// anything runs.
func TestBenchDocsGrowthRendersTheGrowthRegionAlone(t *testing.T) {
	bin := wsctltest.Binary(t)
	pg := pgtest.ServerDSN(t)
	dir := t.TempDir()
	doc := filepath.Join(dir, "perf.md")
	require.NoError(t, os.WriteFile(doc, []byte("# P\n\n<!-- bench:begin cli old.json -->\nclis\n<!-- bench:end cli -->\n\n"+
		"<!-- bench:begin growth old.json -->\n<!-- bench:end growth -->\nAfter.\n"), 0o600))
	recPath := filepath.Join(dir, "growth.json")
	rec := runBenchDocs(t, bin, recPath, "--growth", "--growth-events", "300,900", "--growth-tasks", "100", "--duration", "20ms",
		"--postgres", pg, "--dir", dir, "--update", doc)
	require.Len(t, rec.Runs, 3)
	for i, be := range []string{"sqlite", "postgres", "json"} {
		r := rec.Runs[i]
		assert.Equal(t, "growth "+be, r.Name)
		assert.Equal(t, []int64{300, 900}, r.GrowthEvents, be)
		assert.Equal(t, 100, r.Tasks, be)
		assert.Len(t, r.Rows, 2*10, "%s: six measures and four whole-store operations at each size", be)
	}
	assert.Contains(t, rec.Command, "--growth ")

	b, err := os.ReadFile(doc) // #nosec G304 -- the test's own file
	require.NoError(t, err)
	regions, err := bench.Regions(string(b))
	require.NoError(t, err)
	require.Len(t, regions, 2)
	assert.Equal(t, "clis\n", regions[0].Body, "a growth record does not cover the cli region")
	want, err := bench.RenderRegion("growth", rec, "growth.json")
	require.NoError(t, err)
	assert.Equal(t, want, regions[1].Body)
	for _, line := range strings.Split(want, "\n") {
		if strings.HasPrefix(line, "| SQLite |") || strings.HasPrefix(line, "| PostgreSQL |") || strings.HasPrefix(line, "| JSON |") {
			assert.NotContains(t, strings.Split(line, " | ")[2:], "-", "every operation was measured at each size: %s", line)
		}
	}

	for _, args := range [][]string{
		{"--growth", "--cli", "--postgres", pg},
		{"--growth", "--growth-events", "900,300", "--postgres", pg},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"bench", "docs", "--update", "", "--dir", dir}, args...), nil, &stdout, &stderr, func(string) string { return "" })
		assert.Equal(t, exitUsage, code, "%v: %s", args, stderr.String())
	}
}

// runBenchDocs runs wsctl bench docs with args, its record written to
// recPath, and returns the record it wrote.
func runBenchDocs(t *testing.T, bin, recPath string, args ...string) *bench.Record {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"bench", "docs", "--record", recPath}, args...)...)
	cmd.Env = wsctltest.Env()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	f, err := os.Open(recPath) // #nosec G304 -- the test's own file
	require.NoError(t, err)
	defer f.Close()
	rec, err := bench.ReadRecord(f)
	require.NoError(t, err)
	return rec
}

// TestBenchGrowthRefusesBadSizes: --growth-events that are not counts in
// ascending order are a usage error.
func TestBenchGrowthRefusesBadSizes(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	for _, sizes := range []string{"0", "10000,5000", "ten"} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"--dsn", dsn, "bench", "--workloads", "GROWTH", "--growth-events", sizes}, nil, &stdout, &stderr, func(string) string { return "" })
		assert.Equal(t, exitUsage, code, "%s: %s", sizes, stderr.String())
		assert.Contains(t, stderr.String(), "--growth-events", sizes)
	}
}

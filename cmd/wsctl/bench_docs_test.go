package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/bench"
	"github.com/agentspace/agentspace/internal/wsctltest"
)

// benchDocsRecord writes a small record to path.
func benchDocsRecord(t *testing.T, path string) *bench.Record {
	t.Helper()
	rec := &bench.Record{
		Date: "2026-12-02 10:00", Command: "wsctl bench docs --postgres 'postgres://…'", Duration: "2s",
		Machine: bench.Machine{CPU: "a CPU", Cores: 2, OS: "linux/amd64", Go: "go1.26.8"},
		Runs: []bench.RecordRun{{
			Name: "sqlite", Backend: "sqlite", Workloads: []string{"W1"}, Concurrency: []int{1}, Handles: 4, Artifacts: 10000, Tasks: 10000,
			Rows: []bench.Row{{Workload: "W1", Backend: "sqlite", Concurrency: 1, OpsPerSec: 2702, Ratio: 0.74}},
		}},
	}
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o750))
	var buf bytes.Buffer
	require.NoError(t, bench.WriteRecord(&buf, rec))
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o600))
	return rec
}

// TestBenchDocsFromARecordRewritesTheRegions: `bench docs --from` renders
// each doc's regions from the record, the marker naming the record
// relative to the doc, and leaves the prose around them as it was.
func TestBenchDocsFromARecordRewritesTheRegions(t *testing.T) {
	dir := t.TempDir()
	recPath := filepath.Join(dir, "docs", "bench", "2026-12-02.json")
	rec := benchDocsRecord(t, recPath)
	perf := filepath.Join(dir, "docs", "performance.md")
	readme := filepath.Join(dir, "bench", "README.md")
	require.NoError(t, os.MkdirAll(filepath.Dir(readme), 0o750))
	require.NoError(t, os.WriteFile(perf, []byte("# Performance\n\n<!-- bench:begin figures old.json -->\nby hand\n<!-- bench:end figures -->\n\nAfter.\n"), 0o600))
	require.NoError(t, os.WriteFile(readme, []byte("# Bench\n\n<!-- bench:begin targets old.json -->\n<!-- bench:end targets -->\n"), 0o600))

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"bench", "docs", "--from", recPath, "--update", perf + "," + readme}, nil, &stdout, &stderr, func(string) string { return "" })
	require.Equal(t, exitOK, code, stderr.String())
	assert.Contains(t, stderr.String(), "updated "+perf)
	assert.Contains(t, stderr.String(), "updated "+readme)

	for doc, rel := range map[string]string{perf: "bench/2026-12-02.json", readme: "../docs/bench/2026-12-02.json"} {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		regions, err := bench.Regions(string(b))
		require.NoError(t, err)
		require.Len(t, regions, 1, doc)
		assert.Equal(t, rel, regions[0].Record, doc)
		want, err := bench.RenderRegion(regions[0].Name, rec, rel)
		require.NoError(t, err)
		assert.Equal(t, want, regions[0].Body, doc)
	}
	b, err := os.ReadFile(perf)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "by hand")
	assert.Contains(t, string(b), "\n<!-- bench:end figures -->\n\nAfter.\n")

	// Again: nothing to change.
	stderr.Reset()
	code = run(context.Background(), []string{"bench", "docs", "--from", recPath, "--update", perf}, nil, &stdout, &stderr, func(string) string { return "" })
	require.Equal(t, exitOK, code, stderr.String())
	assert.Contains(t, stderr.String(), perf+": unchanged")
}

// TestBenchDocsRefusesBadInput: a run without a Postgres database, a doc
// without regions or with broken markers, a doc that is not there, a
// record that is not one, and run flags with --from: exit 2, before
// anything is measured or written.
func TestBenchDocsRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.md")
	require.NoError(t, os.WriteFile(good, []byte("<!-- bench:begin figures r.json -->\n<!-- bench:end figures -->\n"), 0o600))
	plain := filepath.Join(dir, "plain.md")
	require.NoError(t, os.WriteFile(plain, []byte("no regions\n"), 0o600))
	broken := filepath.Join(dir, "broken.md")
	require.NoError(t, os.WriteFile(broken, []byte("<!-- bench:begin figures r.json -->\n"), 0o600))
	rec := filepath.Join(dir, "r.json")
	benchDocsRecord(t, rec)
	notRecord := filepath.Join(dir, "not.json")
	require.NoError(t, os.WriteFile(notRecord, []byte(`{"date": 3}`), 0o600))

	cases := map[string]struct {
		args []string
		want string
	}{
		"no postgres":    {[]string{"bench", "docs", "--update", good}, "--postgres: a docs run needs a PostgreSQL database"},
		"no regions":     {[]string{"bench", "docs", "--postgres", "postgres://x/y", "--update", plain}, "no <!-- bench:begin NAME RECORD --> regions"},
		"broken":         {[]string{"bench", "docs", "--postgres", "postgres://x/y", "--update", broken}, `region "figures" is not ended`},
		"missing doc":    {[]string{"bench", "docs", "--postgres", "postgres://x/y", "--update", filepath.Join(dir, "nope.md")}, "nope.md"},
		"not a record":   {[]string{"bench", "docs", "--from", notRecord, "--update", good}, "--from " + notRecord},
		"run flag":       {[]string{"bench", "docs", "--from", rec, "--duration", "1s", "--update", good}, "--from renders a saved record: --duration is for a run"},
		"processes":      {[]string{"bench", "docs", "--postgres", "postgres://x/y", "--processes", "0", "--update", good}, "--processes: 0 is not a count"},
		"rounds":         {[]string{"--dsn", "sqlite:" + filepath.Join(dir, "ws.db"), "bench", "--baseline-binary", rec, "--rounds", "0"}, "--rounds: 0 is not a count"},
		"no such binary": {[]string{"--dsn", "sqlite:" + filepath.Join(dir, "ws.db"), "bench", "--baseline-binary", filepath.Join(dir, "old-wsctl")}, "--baseline-binary:"},
	}
	before, err := os.ReadFile(good)
	require.NoError(t, err)
	for name, tc := range cases {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, nil, &stdout, &stderr, func(string) string { return "" })
		assert.Equal(t, exitUsage, code, "%s: %s", name, stderr.String())
		assert.Contains(t, stderr.String(), tc.want, name)
		assert.Empty(t, stdout.String(), name)
	}
	after, err := os.ReadFile(good)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "nothing was rewritten")
	assert.NoDirExists(t, filepath.Join("docs", "bench", "2026-12-02.json"))
	assert.NoFileExists(t, filepath.Join(dir, "ws.db"), "nothing was opened")
}

// TestBenchBaselineBinaryComparesTwoBuilds: --baseline-binary runs each
// workload on both binaries in turn, each run on a fresh store, and pairs
// their rows round by round (here the same build twice).
func TestBenchBaselineBinaryComparesTwoBuilds(t *testing.T) {
	bin := wsctltest.Binary(t)
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "ws.db")
	cmd := exec.Command(bin, "--dsn", dsn, "bench", "--baseline-binary", bin, "--workloads", "W2,W4", "--rounds", "2",
		"--duration", "80ms", "--concurrency", "2", "--json")
	cmd.Env = wsctltest.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())

	var cs []bench.Comparison
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var c bench.Comparison
		require.NoError(t, dec.Decode(&c))
		cs = append(cs, c)
	}
	seen := map[string]string{}
	for _, c := range cs {
		assert.Equal(t, "sqlite", c.Backend)
		assert.Len(t, c.Old, 2, c.Workload+" "+c.Variant)
		assert.Len(t, c.New, 2, c.Workload+" "+c.Variant)
		seen[c.Workload+" "+c.Variant] = c.Figure
		if c.Figure == "ops/s" {
			assert.Equal(t, 2, c.Concurrency, "--concurrency reached both binaries")
		}
	}
	require.Len(t, seen, 4, "%v", seen)
	assert.Equal(t, "ops/s", seen["W2 "])
	assert.Equal(t, "ops/s", seen["W4 "])
	for _, v := range []string{"W4 handover same handle", "W4 handover other handle"} {
		assert.Contains(t, []string{"p50", "p99"}, seen[v], "a latency row compares its latency: %s", v)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "every run's store is removed")
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"2s":                  "2s",
		"docs/bench/x.json":   "docs/bench/x.json",
		"":                    "''",
		"postgres://h/db?a=b": "'postgres://h/db?a=b'",
		"it's":                `'it'\''s'`,
		"a b":                 "'a b'",
	} {
		assert.Equal(t, want, shellQuote(in), in)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

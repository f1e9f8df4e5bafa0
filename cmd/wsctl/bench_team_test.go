package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBenchTeamRefusesBadFlagsWithAUsageError: a mix it cannot read, both
// --dsn and --server, a kill with one server: exit 2, and no report.
func TestBenchTeamRefusesBadFlagsWithAUsageError(t *testing.T) {
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "ws.db")
	out := filepath.Join(dir, "out")
	for _, args := range [][]string{
		{"--dsn", dsn, "bench", "team", "--out", out, "--mix", "claim=x"},
		{"--dsn", dsn, "bench", "team", "--out", out, "--server", "http://127.0.0.1:1"},
		{"--dsn", dsn, "bench", "team", "--out", out, "--servers", "1", "--kill-server-after", "1s"},
		{"--dsn", dsn, "bench", "team", "--out", out, "--failover-command", "true"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, nil, &stdout, &stderr, func(string) string { return "" })
		assert.Equal(t, exitUsage, code, "%v: %s", args, stderr.String())
		assert.NoFileExists(t, filepath.Join(out, "report.json"))
	}
}

package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeRunsGCOnSchedule starts `wsctl serve --gc-every` as a process
// and waits for its gc to compact the log to the policy and record it.
func TestServeRunsGCOnSchedule(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	_, _, code := wsctl(t, dsn, "init")
	require.Zero(t, code)
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		_, stderr, code := wsctl(t, dsn, "--as", "alice", "note", "put", "decision", k, "--title", k)
		require.Zero(t, code, stderr)
	}
	startServe(t, dsn, "--gc-every", "100ms", "--keep-events", "2")
	var out string
	require.Eventually(t, func() bool {
		out, _, _ = wsctl(t, dsn, "events", "--json", "--after", "3")
		return strings.Contains(out, "workspace.gc")
	}, 30*time.Second, 100*time.Millisecond, "serve's gc never ran")
	assert.Contains(t, out, "wsctl-serve")
	v, _, code := wsctl(t, dsn, "verify")
	assert.Zero(t, code, v)
	assert.Contains(t, v, "events 4-6: 3 links checked")
}

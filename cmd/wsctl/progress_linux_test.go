package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// terminalStderr opens a pseudo-terminal for wsctl's stderr and collects
// what is drawn on it; collected returns it once wsctl is done.
func terminalStderr(t *testing.T) (tty *os.File, collected func() string) {
	t.Helper()
	ptmx, pts := openTerminalPair(t)
	var (
		buf bytes.Buffer
		wg  sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(&buf, ptmx) // ends with EIO once the terminal end is closed
	}()
	return pts, func() string {
		pts.Close()
		wg.Wait()
		return buf.String()
	}
}

func TestExportAndImportDrawAProgressBarOnATerminalOnly(t *testing.T) {
	c := newCLI(t)
	for i := 0; i < 30; i++ {
		c.ok("task", "add", "task")
	}
	archive := filepath.Join(t.TempDir(), "a.ndjson")
	env := map[string]string{"AGENTSPACE_DSN": c.dsn, "AGENTSPACE_ACTOR": "alice"}
	getenv := func(k string) string { return env[k] }

	tty, drawn := terminalStderr(t)
	var out bytes.Buffer
	code := run(context.Background(), []string{"export", "-o", archive}, strings.NewReader(""), &out, tty, getenv)
	require.Equal(t, exitOK, code)
	bar := drawn()
	assert.Contains(t, bar, "wsctl: export")
	assert.Contains(t, bar, "100%")
	assert.Contains(t, bar, "(60/60") // 30 tasks and their 30 events: the estimate was exact
	assert.Contains(t, bar, "records/s")

	env["AGENTSPACE_DSN"] = "sqlite:" + filepath.Join(t.TempDir(), "ws2.db")
	tty, drawn = terminalStderr(t)
	code = run(context.Background(), []string{"import", "-i", archive}, strings.NewReader(""), &out, tty, getenv)
	require.Equal(t, exitOK, code)
	bar = drawn()
	assert.Contains(t, bar, "wsctl: import")
	assert.Contains(t, bar, "100%")
	assert.Contains(t, bar, "B/s")

	// --quiet, or stderr that is not a terminal: nothing.
	tty, drawn = terminalStderr(t)
	code = run(context.Background(), []string{"export", "-q", "-o", archive}, strings.NewReader(""), &out, tty, getenv)
	require.Equal(t, exitOK, code)
	assert.Empty(t, drawn())
	var errb bytes.Buffer
	code = run(context.Background(), []string{"export", "-o", archive}, strings.NewReader(""), &out, &errb, getenv)
	require.Equal(t, exitOK, code)
	assert.Empty(t, errb.String())
}

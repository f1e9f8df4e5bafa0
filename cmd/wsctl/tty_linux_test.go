package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// openTerminal opens a pseudo-terminal and returns its terminal end, as a
// shell gives a command whose stdin is not redirected.
func openTerminal(t *testing.T) *os.File {
	t.Helper()
	_, pts := openTerminalPair(t)
	return pts
}

// openTerminalPair opens a pseudo-terminal: its controlling end and its
// terminal end. Both are closed when the test ends.
func openTerminalPair(t *testing.T) (ptmx, pts *os.File) {
	t.Helper()
	var err error
	ptmx, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { ptmx.Close() })
	fd := int(ptmx.Fd()) // #nosec G115 -- a file descriptor fits in an int
	require.NoError(t, unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	require.NoError(t, err)
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { pts.Close() })
	return ptmx, pts
}

func TestContentFromATerminalIsRefusedWithHowToPipeIt(t *testing.T) {
	c := newCLI(t)
	tty := openTerminal(t)
	require.True(t, isTerminal(tty))
	env := map[string]string{"AGENTSPACE_DSN": c.dsn, "AGENTSPACE_ACTOR": "alice"}
	for _, args := range [][]string{
		{"artifact", "put", "plans/a.md"},
		{"artifact", "put", "plans/a.md", "--file", "-"},
		{"note", "put", "decision", "k", "--body-file", "-"},
		{"import"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, tty, &out, &errb, func(k string) string { return env[k] })
		assert.Equal(t, exitUsage, code, "%v", args)
		assert.Contains(t, errb.String(), "stdin, which is a terminal: ", "%v", args)
		assert.Contains(t, errb.String(), "pipe", "%v", args)
	}
	// Nothing was written.
	assert.Equal(t, "", c.ok("events"))
	// A pipe is fine.
	code, _, errs := c.run("hello\n", "artifact", "put", "plans/a.md")
	assert.Equal(t, exitOK, code, errs)
	assert.True(t, strings.HasPrefix(c.ok("artifact", "get", "plans/a.md"), "hello"))
}

package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cli runs wsctl in-process against dsn as actor; it returns the exit code
// and the two streams.
type cli struct {
	t     *testing.T
	dsn   string
	actor string
}

func newCLI(t *testing.T) cli {
	t.Helper()
	c := cli{t: t, dsn: "sqlite:" + filepath.Join(t.TempDir(), "ws.db"), actor: "alice"}
	c.ok("init")
	return c
}

func (c cli) run(stdin string, args ...string) (code int, stdout, stderr string) {
	c.t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"AGENTSPACE_DSN": c.dsn, "AGENTSPACE_ACTOR": c.actor}
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

// ok runs args and requires exit 0; it returns stdout, trimmed.
func (c cli) ok(args ...string) string {
	c.t.Helper()
	code, out, errs := c.run("", args...)
	require.Equal(c.t, exitOK, code, "wsctl %s: %s", strings.Join(args, " "), errs)
	return strings.TrimSpace(out)
}

// commonPrefix is the longest prefix a and b share.
func commonPrefix(a, b string) string {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return a[:n]
}

func TestTaskIDsResolveByUniquePrefix(t *testing.T) {
	c := newCLI(t)
	first := c.ok("task", "add", "write the API")
	second := c.ok("task", "add", "review the API")
	shared := commonPrefix(first, second)
	unique := first[:len(shared)+1]

	// A unique prefix works wherever an id is taken.
	assert.Regexp(t, `(?m)^title: +write the API$`, c.ok("task", "show", unique))
	assert.Contains(t, c.ok("task", "show", strings.ToUpper(unique)), "write the API")
	third := c.ok("task", "add", "ship it", "--depends-on", second[:len(shared)+1])
	assert.Regexp(t, `(?m)^depends on: +`+second+`$`, c.ok("task", "show", third))
	assert.Equal(t, first, c.ok("task", "claim"))
	c.ok("task", "heartbeat", unique)
	c.ok("task", "done", unique, "--summary", "shipped")
	assert.Regexp(t, `(?m)^status: +done$`, c.ok("task", "show", first))

	// An ambiguous prefix is a usage error listing the candidates.
	if len(shared) >= minTaskPrefix {
		code, _, errs := c.run("", "task", "show", shared)
		assert.Equal(t, exitUsage, code)
		assert.Regexp(t, `is ambiguous: [23] tasks match`, errs)
		assert.Contains(t, errs, first+` "write the API"`)
		assert.Contains(t, errs, second+` "review the API"`)
	}

	// Too short, or matching nothing.
	code, _, errs := c.run("", "task", "show", first[:3])
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errs, "too short")
	code, _, errs = c.run("", "task", "show", "ffffffff")
	assert.Equal(t, exitNotFound, code)
	assert.Contains(t, errs, `task "ffffffff": no task id starts with it`)
}

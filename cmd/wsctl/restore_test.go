package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRestoreSaysWhatItDidNotVerifyAndLeavesTokensOut: an archive holding
// a token record restores without it unless --with-tokens is given, and
// the output says so; an archive stripped of its hashes and marked version
// 2 restores, but the output does not call it verified and says how many
// events nothing checked.
func TestRestoreSaysWhatItDidNotVerifyAndLeavesTokensOut(t *testing.T) {
	dir := t.TempDir()
	src := "sqlite:" + filepath.Join(dir, "src.db")
	_, stderr, code := wsctl(t, src, "init")
	require.Zero(t, code, stderr)
	_, stderr, code = wsctl(t, src, "--as", "alice", "note", "put", "decision", "db", "--title", "DB", "--body", "sqlite")
	require.Zero(t, code, stderr)
	tok, stderr, code := wsctl(t, src, "--as", "root", "token", "create", "--actor", "mallory", "--role", "admin")
	require.Zero(t, code, stderr)
	require.Regexp(t, `^ast_`, tok)
	archive := filepath.Join(dir, "team.ndjson")
	_, stderr, code = wsctl(t, src, "export", "-q", "-o", archive)
	require.Zero(t, code, stderr)

	tokens := func(dsn string) string {
		t.Helper()
		out, stderr, code := wsctl(t, dsn, "token", "ls")
		require.Zero(t, code, stderr)
		return out
	}
	plain := "sqlite:" + filepath.Join(dir, "plain.db")
	out, stderr, code := wsctl(t, plain, "restore", archive)
	require.Zero(t, code, stderr)
	assert.Regexp(t, `(?m)^restored \d+ records from .*team\.ndjson, verified \(head hash [0-9a-f]{64}\)$`, out)
	assert.Contains(t, out, "left out 1 token records (credentials): restore them with --with-tokens")
	assert.NotContains(t, tokens(plain), "mallory", "no token was restored")

	with := "sqlite:" + filepath.Join(dir, "with.db")
	out, stderr, code = wsctl(t, with, "restore", "--with-tokens", archive)
	require.Zero(t, code, stderr)
	assert.NotContains(t, out, "left out")
	assert.Contains(t, tokens(with), "mallory", "asked for, the token is restored")

	imported := "sqlite:" + filepath.Join(dir, "imported.db")
	_, stderr, code = wsctl(t, imported, "import", "-q", "-i", archive)
	require.Zero(t, code, stderr)
	assert.Contains(t, stderr, "left out 1 token records", "import leaves them out too")
	assert.NotContains(t, tokens(imported), "mallory")

	// Edited: marked version 2 and stripped of its hashes.
	data, err := os.ReadFile(archive)
	require.NoError(t, err)
	edited := regexp.MustCompile(`,"(floor_)?hash":"[0-9a-f]+"`).ReplaceAllString(string(data), "")
	edited = strings.Replace(edited, `"version":3}`, `"version":2}`, 1)
	require.NoError(t, os.WriteFile(archive, []byte(edited), 0o600))
	v2 := "sqlite:" + filepath.Join(dir, "v2.db")
	out, stderr, code = wsctl(t, v2, "restore", archive)
	require.Zero(t, code, stderr)
	assert.NotContains(t, out, ", verified", "nothing checked the log: it is not called verified")
	assert.Regexp(t, `(?m)^restored \d+ records from .*, not verified against its chain`, out)
	assert.Regexp(t, `(?m)^(\d+) of (\d+) events came without their hash`, out)
	m := regexp.MustCompile(`(\d+) of (\d+) events`).FindStringSubmatch(out)
	require.Len(t, m, 3)
	assert.Equal(t, m[1], m[2], "every event")
}

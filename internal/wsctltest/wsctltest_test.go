package wsctltest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Env drops the developer's AGENTSPACE_ variables, keeps the tests' own,
// keeps GORACE's options and adds atexit_sleep_ms=0, and appends extra last.
func TestEnvKeepsTheTestsVariablesOnly(t *testing.T) {
	// Values no other variable of the machine's holds by chance (a host
	// may well name its container "secret-..."): the assertion is about
	// these variables, not about a word.
	const token = "wsctltest-token-4f1c9a"
	t.Setenv("AGENTSPACE_TOKEN", token)
	t.Setenv("AGENTSPACE_DSN", "sqlite:/elsewhere-4f1c9a.db")
	t.Setenv("AGENTSPACE_TEST_REQUIRE_NODE", "1")
	t.Setenv("GORACE", "halt_on_error=1")
	env := Env("AGENTSPACE_DSN=sqlite:/here.db")
	joined := "\n" + strings.Join(env, "\n") + "\n"
	assert.NotContains(t, joined, "\nAGENTSPACE_TOKEN=")
	assert.NotContains(t, joined, token)
	assert.NotContains(t, joined, "/elsewhere-4f1c9a.db")
	assert.Contains(t, joined, "\nAGENTSPACE_TEST_REQUIRE_NODE=1\n")
	assert.Contains(t, joined, "\nGORACE=halt_on_error=1 atexit_sleep_ms=0\n")
	assert.Equal(t, "AGENTSPACE_DSN=sqlite:/here.db", env[len(env)-1])
}

// docs/shell-agents.md holds one of each agent script, verbatim from its shebang.
func TestDocScriptFindsEachAgent(t *testing.T) {
	for _, shebang := range []string{"#!/bin/sh", "#!/usr/bin/env sh"} {
		s := DocScript(t, shebang)
		require.True(t, strings.HasPrefix(s, shebang+"\n"), "%q", s)
		assert.Contains(t, s, "wsctl")
		assert.NotContains(t, s, "```")
	}
}

// The build key is the same for the same checkout: test processes that
// build from one checkout find each other's build.
func TestBuildKeyIsStable(t *testing.T) {
	root, err := moduleRoot()
	require.NoError(t, err)
	a, err := buildKey(root)
	require.NoError(t, err)
	b, err := buildKey(root)
	require.NoError(t, err)
	assert.Equal(t, a, b)
	assert.Len(t, a, 24)
}

// Path hands out the build Binary does (one per process, from the cache
// the other packages' tests share), and it is wsctl.
func TestPathIsTheBinary(t *testing.T) {
	p, err := Path()
	require.NoError(t, err)
	assert.Equal(t, Binary(t), p)
	cmd := exec.Command(p, "version")
	cmd.Env = Env()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "wsctl")
}

// TestTheRaceFlagsAreTheREADMEs: the README's test command, the Makefile's
// and .ci/run's pass the race build's gcflags this package builds wsctl
// with, written once here.
func TestTheRaceFlagsAreTheREADMEs(t *testing.T) {
	quoted := strings.Replace(raceGcflags, "=", "='", 1) + "'"
	for _, f := range []string{"README.md", "Makefile", ".ci/run"} {
		b, err := os.ReadFile(filepath.Join("..", "..", f))
		require.NoError(t, err)
		assert.Contains(t, string(b), "go test -race "+quoted+" -count=1", f)
	}
}

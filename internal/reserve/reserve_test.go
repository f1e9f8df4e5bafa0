package reserve_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/agents"
	_ "github.com/agentspace/agentspace/backend/sqlite"
	_ "github.com/agentspace/agentspace/gitwork" // owners of reserved kinds
	"github.com/agentspace/agentspace/internal/reserve"
	_ "github.com/agentspace/agentspace/shadow"
	"github.com/agentspace/agentspace/workspace"
)

// TestEveryDeclaredKindIsOwned: with every owner linked (as here), each
// declared kind's key was taken (Own panics on one taken twice), and
// the change set's reader of artifacts is shadow's, not the stand-in.
func TestEveryDeclaredKindIsOwned(t *testing.T) {
	kinds := reserve.Kinds()
	for _, k := range []string{"pin", "msg", "pause", "token", "worktree", "shadow", "changeset"} {
		assert.Contains(t, kinds, k)
	}
	e, ok := reserve.Lookup("changeset")
	require.True(t, ok)
	names, err := e.Artifacts(`{"name":"s","staged":[{"op":"create","name":"a.txt"}]}`)
	require.NoError(t, err)
	assert.Equal(t, []string{"a.txt"}, names)
}

// TestAProgramThatLinksOnlyABackendCannotReadTokens builds a program that
// imports only the user API and the SQLite backend, and points it at a
// store holding a token: it may neither read nor list the token note,
// nor plant a token or a worktree record, although it links neither the
// server nor gitwork.
func TestAProgramThatLinksOnlyABackendCannotReadTokens(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "ws.db")
	ws, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	_, tok, err := agents.NewTokens(ws).Create(ctx, agents.TokenRequest{Actor: "alice"})
	require.NoError(t, err)
	require.NoError(t, ws.Close())

	bin := filepath.Join(dir, "onlybackend")
	build := exec.Command("go", "build", "-o", bin, "./testdata/onlybackend") // #nosec G204 -- fixed arguments
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps, err := exec.Command("go", "list", "-deps", "./testdata/onlybackend").Output()
	require.NoError(t, err)
	for _, owner := range []string{"/server", "/gitwork", "/shadow"} {
		for _, d := range strings.Fields(string(deps)) {
			assert.False(t, strings.HasSuffix(d, "agentspace"+owner), "the program links %s", d)
		}
	}
	out, err = exec.Command(bin, dsn, tok.ID).CombinedOutput() // #nosec G204 -- the program this test built
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "get token: forbidden\nlist token: forbidden\nput token: forbidden\nput worktree: forbidden\n", string(out))
}

// TestDeclaredKindsAreWellFormed: the declared kinds, which init takes
// without compiling the pattern Register checks, have its shape.
func TestDeclaredKindsAreWellFormed(t *testing.T) {
	re := regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	for _, k := range reserve.Kinds() {
		assert.Regexp(t, re, k)
	}
}

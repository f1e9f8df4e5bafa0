package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// testMustExistFindsNoWorkspaceAndCreatesNone: a handle asked to open only
// an existing store (Options.MustExist) on a store never opened gets
// *NoWorkspaceError and leaves nothing that counts as a workspace (a
// second try fails alike); once the store has been created, the same
// open succeeds and reads what was written.
func testMustExistFindsNoWorkspaceAndCreatesNone(t *testing.T, h Harness) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := h.NewDSN(t)
	for range 2 {
		ws, err := workspace.Open(ctx, dsn, workspace.Options{MustExist: true, Private: true})
		if ws != nil {
			_ = ws.Close()
		}
		RequireNoWorkspace(t, err)
	}

	created, err := workspace.Open(ctx, dsn, workspace.Options{Private: true})
	require.NoError(t, err)
	_, err = created.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "decision", Key: "k"})
	require.NoError(t, err)
	require.NoError(t, created.Close())

	ws, err := workspace.Open(ctx, dsn, workspace.Options{MustExist: true, Private: true})
	require.NoError(t, err)
	defer ws.Close()
	_, err = ws.Notes().Get(ctx, "decision", "k")
	assert.NoError(t, err)
}

// RequireNoWorkspace asserts that err says there is no workspace, as the
// typed *workspace.NoWorkspaceError naming where it looked and why: the
// check every backend's must-exist tests share.
func RequireNoWorkspace(t testing.TB, err error) {
	t.Helper()
	require.ErrorIs(t, err, workspace.ErrNoWorkspace)
	var nw *workspace.NoWorkspaceError
	require.ErrorAs(t, err, &nw)
	assert.NotEmpty(t, nw.Where)
	assert.NotEmpty(t, nw.Reason)
}

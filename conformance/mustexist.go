package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
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

// testProbeAndOpenExistingAgree: the driver contract's must-exist pair,
// below the engine. On a store never created, the driver's Probe refuses
// with *NoWorkspaceError, and where the driver is a
// driver.ExistingOpener, OpenExisting refuses with the same error text;
// neither creates anything (Probe refuses again after both). Once a
// handle has created the store and written to it, Probe accepts, and
// OpenExisting opens a store on which the engine reads what was written.
func testProbeAndOpenExistingAgree(t *testing.T, h Harness) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := h.NewDSN(t)
	p, err := driver.ParseDSN(dsn)
	require.NoError(t, err)
	d, err := engine.DriverOf(p)
	require.NoError(t, err, "the conformance suite's stores are opened through a driver of engine.Backend's")
	eo, opener := d.(driver.ExistingOpener)

	probeErr := d.Probe(ctx, p.Config)
	RequireNoWorkspace(t, probeErr)
	if opener {
		st, err := eo.OpenExisting(ctx, p.Config)
		if st != nil {
			_ = st.Close()
		}
		assert.Nil(t, st, "a refusal comes with no store")
		RequireNoWorkspace(t, err)
		assert.Equal(t, probeErr.Error(), err.Error(), "OpenExisting refuses what Probe refuses, with the same error")
	}
	RequireNoWorkspace(t, d.Probe(ctx, p.Config))

	created, err := workspace.Open(ctx, dsn, workspace.Options{Private: true})
	require.NoError(t, err)
	_, err = created.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "decision", Key: "probe", Body: "there"})
	require.NoError(t, err)
	require.NoError(t, created.Close())

	require.NoError(t, d.Probe(ctx, p.Config))
	if !opener {
		return
	}
	st, err := eo.OpenExisting(ctx, p.Config)
	require.NoError(t, err)
	ws := engine.New(st, workspace.Options{Private: true})
	defer ws.Close()
	n, err := ws.Notes().Get(ctx, "decision", "probe")
	require.NoError(t, err)
	assert.Equal(t, "there", n.Body)
}

package workspace_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// noProbeDriver cannot tell whether a store exists; opening through it
// would create one, so a must-exist open must not reach it.
type noProbeDriver struct{ opens *atomic.Int64 }

func (d noProbeDriver) Open(context.Context, workspace.Config) (workspace.Store, error) {
	d.opens.Add(1)
	return nil, workspace.ErrClosed
}

func (noProbeDriver) Params() []string { return nil }

var noProbeOpens atomic.Int64

func init() { workspace.Register("noprobe", noProbeDriver{opens: &noProbeOpens}) }

func TestMustExistRefusesADriverThatCannotProbe(t *testing.T) {
	before := noProbeOpens.Load()
	_, err := workspace.Open(context.Background(), "noprobe:x", workspace.Options{MustExist: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot tell whether a workspace exists")
	assert.NotErrorIs(t, err, workspace.ErrNoWorkspace)
	assert.Equal(t, before, noProbeOpens.Load(), "the driver's Open was called")
}

func TestNoWorkspaceErrorMatchesItsSentinel(t *testing.T) {
	err := error(&workspace.NoWorkspaceError{Where: "/x/ws.db", Reason: "the file does not exist"})
	assert.ErrorIs(t, err, workspace.ErrNoWorkspace)
	assert.Equal(t, "no workspace at /x/ws.db: the file does not exist", err.Error())
}

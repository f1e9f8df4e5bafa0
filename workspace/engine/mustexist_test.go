package engine_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

// absentDriver names stores that do not exist: its Probe says so, and its
// Open, which would create one, must not be reached by a must-exist open.
type absentDriver struct{ opens *atomic.Int64 }

func (d absentDriver) Open(context.Context, driver.Config) (driver.Store, error) {
	d.opens.Add(1)
	return nil, workspace.ErrClosed
}

func (absentDriver) Probe(_ context.Context, cfg driver.Config) error {
	return &workspace.NoWorkspaceError{Where: cfg.Target, Reason: "nothing is ever there"}
}

func (absentDriver) Params() []string { return nil }

var absentOpens atomic.Int64

func init() { driver.Register("absent", engine.Backend(absentDriver{opens: &absentOpens})) }

// TestMustExistProbesBeforeItOpens: a must-exist open asks the driver's
// Probe first and returns its refusal as is, on a shared core and on a
// private one, and never calls the driver's Open.
func TestMustExistProbesBeforeItOpens(t *testing.T) {
	before := absentOpens.Load()
	for _, private := range []bool{false, true} {
		_, err := workspace.Open(context.Background(), "absent:x", workspace.Options{MustExist: true, Private: private})
		require.ErrorIs(t, err, workspace.ErrNoWorkspace)
		var nw *workspace.NoWorkspaceError
		require.ErrorAs(t, err, &nw)
		assert.Equal(t, "x", nw.Where)
	}
	assert.Equal(t, before, absentOpens.Load(), "the driver's Open was called")
}

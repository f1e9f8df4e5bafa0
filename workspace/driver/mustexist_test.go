package driver_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// noProbeDriver cannot tell whether a store exists; opening through it
// would create one, so a must-exist open must not reach it.
type noProbeDriver struct{ opens *atomic.Int64 }

func (d noProbeDriver) Open(context.Context, driver.Config) (driver.Store, error) {
	d.opens.Add(1)
	return nil, workspace.ErrClosed
}

func (noProbeDriver) Params() []string { return nil }

var noProbeOpens atomic.Int64

func init() { driver.Register("noprobe", noProbeDriver{opens: &noProbeOpens}) }

func TestMustExistRefusesADriverThatCannotProbe(t *testing.T) {
	before := noProbeOpens.Load()
	_, err := workspace.Open(context.Background(), "noprobe:x", workspace.Options{MustExist: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot tell whether a workspace exists")
	assert.NotErrorIs(t, err, workspace.ErrNoWorkspace)
	assert.Equal(t, before, noProbeOpens.Load(), "the driver's Open was called")
}

package wsconn_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/wsconn"
	"github.com/agentspace/agentspace/workspace"
)

// fakeConn is a Conn that answers Status and nothing else.
type fakeConn struct{ wsconn.Conn }

func (fakeConn) Status(context.Context) (workspace.Status, error) {
	return workspace.Status{Head: 7}, nil
}

// TestWrapAndOfRoundTrip: the workspace Wrap makes calls its connection,
// and Of gives that connection back; a nil workspace has none.
func TestWrapAndOfRoundTrip(t *testing.T) {
	c := fakeConn{}
	ws := wsconn.Wrap(c)
	st, err := ws.Status(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(7), st.Head)
	assert.Equal(t, wsconn.Conn(c), wsconn.Of(ws))
	assert.Nil(t, wsconn.Of(nil))
}

// TestNewSubscriptionDelivers: a subscription made through the seam
// delivers what its run sends, in order, and ends with ErrClosed when run
// returns nil.
func TestNewSubscriptionDelivers(t *testing.T) {
	ctx := context.Background()
	sub := wsconn.NewSubscription(ctx, 1, func(ctx context.Context, send func(workspace.Message) bool) error {
		for seq := int64(1); seq <= 3; seq++ {
			if !send(workspace.Message{Event: workspace.Event{Seq: seq}}) {
				return ctx.Err()
			}
		}
		return nil
	})
	defer sub.Close()
	for seq := int64(1); seq <= 3; seq++ {
		m, err := sub.Next(ctx)
		require.NoError(t, err)
		assert.Equal(t, seq, m.Event.Seq)
	}
	_, err := sub.Next(ctx)
	assert.ErrorIs(t, err, workspace.ErrClosed)
}

// TestOpenWithoutARegistryRefuses: this test binary links no backend and
// so no registry (nothing called Serve): Open and OpenMigrator refuse
// every DSN with a typed error that names an import.
func TestOpenWithoutARegistryRefuses(t *testing.T) {
	_, err := workspace.Open(context.Background(), "sqlite:x.db")
	require.ErrorIs(t, err, workspace.ErrInvalid)
	assert.Contains(t, err.Error(), "backend/sqlite")
	_, err = workspace.OpenMigrator(context.Background(), "sqlite:x.db")
	require.ErrorIs(t, err, workspace.ErrInvalid)
}

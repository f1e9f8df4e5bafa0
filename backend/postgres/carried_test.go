package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

// viewCounter is a store that counts its read transactions.
type viewCounter struct {
	*store
	views atomic.Int64
}

func (v *viewCounter) View(ctx context.Context, fn func(tx driver.ReadTx) error) error {
	v.views.Add(1)
	return v.store.View(ctx, fn)
}

// A subscriber on a handle of another store gets a writer's events from
// the NOTIFY payloads, without reading the log for each of them; an event
// too large for a payload is read, and nothing is missed or repeated.
func TestSubscriberOnAnotherStoreTakesEventsFromNotifications(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.NewDSN(t)
	writer, err := workspace.Open(ctx, dsn, workspace.Options{Private: true})
	require.NoError(t, err)
	defer writer.Close()

	p, err := driver.ParseDSN(dsn)
	require.NoError(t, err)
	p.Config.Logger, p.Config.PollInterval = slog.Default(), workspace.DefaultPollInterval
	st, err := engine.OpenStore(ctx, p)
	require.NoError(t, err)
	counted := &viewCounter{store: st.(*store)}
	reader := engine.New(counted, workspace.Options{})
	defer reader.Close()

	sub, err := reader.Events().Subscribe(ctx, workspace.SubscribeRequest{})
	require.NoError(t, err)
	defer sub.Close()
	next := func() workspace.Event {
		t.Helper()
		for {
			m, err := sub.Next(ctx)
			require.NoError(t, err)
			if !m.Progress {
				return m.Event
			}
		}
	}

	const writes = 40
	before := counted.views.Load()
	for i := range writes {
		msg := ""
		if i == writes/2 {
			msg = fmt.Sprintf("%08000d", i) // too large for a payload
		}
		_, err := writer.Commit(ctx, workspace.Batch{Actor: "writer", Ops: []workspace.Op{workspace.PutNoteOp{
			Note: workspace.NotePut{Kind: "decision", Key: fmt.Sprint("k", i), Body: "b"}, Cond: workspace.Cond{Message: msg}}}})
		require.NoError(t, err)
		ev := next()
		assert.Equal(t, int64(i+1), ev.Seq, "events in order, none missed")
		assert.Equal(t, fmt.Sprint("k", i), ev.Subject.Name)
		assert.Equal(t, msg, ev.Message)
	}
	views := counted.views.Load() - before
	t.Logf("%d read transactions for %d events", views, writes)
	assert.Less(t, views, int64(writes/4), "events come from the notifications, not from reads of the log")

	// What the subscriber got is what the log holds.
	page, err := writer.Events().Read(ctx, workspace.EventQuery{Limit: writes})
	require.NoError(t, err)
	sub2, err := reader.Events().Subscribe(ctx, workspace.SubscribeRequest{})
	require.NoError(t, err)
	defer sub2.Close()
	for _, want := range page.Events {
		m, err := sub2.Next(ctx)
		require.NoError(t, err)
		assert.Equal(t, want, m.Event)
	}
}

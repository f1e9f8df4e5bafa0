package workspace

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewSubscriptionDeliversInOrderAndReportsRunsError(t *testing.T) {
	ctx := context.Background()
	stop := errors.New("source gone")
	s := newSubscription(ctx, 0, func(_ context.Context, send func(Message) bool) error {
		for seq := int64(1); seq <= 3; seq++ {
			if !send(Message{Event: Event{Seq: seq}, Head: 3}) {
				return nil
			}
		}
		return stop
	})
	for seq := int64(1); seq <= 3; seq++ {
		m, err := s.Next(ctx)
		require.NoError(t, err)
		assert.Equal(t, seq, m.Event.Seq)
	}
	_, err := s.Next(ctx)
	assert.ErrorIs(t, err, stop)
	assert.ErrorIs(t, s.Err(), stop)
	assert.NoError(t, s.Close())
}

func TestNewSubscriptionHoldsTheBufferAskedFor(t *testing.T) {
	for _, c := range []struct{ ask, want int }{{0, subscriptionBuffer}, {-1, subscriptionBuffer}, {1, 1}, {4, 4}, {1 << 30, maxSubscriptionBuffer}} {
		s := newSubscription(context.Background(), c.ask, func(ctx context.Context, _ func(Message) bool) error {
			<-ctx.Done()
			return nil
		})
		assert.Equal(t, c.want, cap(s.C()), "asked for %d", c.ask)
		require.NoError(t, s.Close())
	}
}

func TestNewSubscriptionReportsANilEndAsClosed(t *testing.T) {
	s := newSubscription(context.Background(), 0, func(context.Context, func(Message) bool) error { return nil })
	_, ok := <-s.C()
	assert.False(t, ok)
	assert.ErrorIs(t, s.Err(), ErrClosed)
}

func TestSubscriptionCloseCancelsRunAndWaitsForIt(t *testing.T) {
	returned := false
	s := newSubscription(context.Background(), 0, func(ctx context.Context, send func(Message) bool) error {
		for send(Message{Progress: true}) {
		}
		returned = true
		return ctx.Err()
	})
	assert.Nil(t, s.Err(), "Err is nil while the stream runs")
	require.NoError(t, s.Close())
	assert.True(t, returned, "Close returned before run did")
	assert.ErrorIs(t, s.Err(), context.Canceled)
}

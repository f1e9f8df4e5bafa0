package workspace

import (
	"context"
)

// Message is one item of a subscription's stream: an event, or (Progress
// set) a heartbeat saying every event up to Head has been delivered or did
// not match, so a consumer may checkpoint Head.
type Message struct {
	Event    Event
	Progress bool
	Head     int64
}

// Subscription is a live, gap-free stream of events. It holds at most one
// page of events in memory: a slow consumer makes it fall behind and read
// the log, never drop an event, never slow a writer.
type Subscription struct {
	ch     chan Message
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// subscriptionBuffer is how many messages a subscription's channel holds
// ahead of its consumer unless SubscribeRequest.Buffer says otherwise.
// Every idle subscription keeps this buffer, 152 bytes a message: 16 of
// them let a consumer take a backlog in runs of 16 for 2.4 KiB. A
// consumer that holds many idle subscriptions and takes what waits
// without blocking (which also takes a message its sender is blocked on)
// loses nothing by asking for 1.
//
// Invariant: the buffer only decouples the feeding goroutine from the
// consumer; send blocks while it is full, so a smaller one delays a sender,
// never drops or reorders a message.
const subscriptionBuffer = 16

// maxSubscriptionBuffer bounds SubscribeRequest.Buffer: a buffer is
// allocated whole, and a larger one would only hold more memory.
const maxSubscriptionBuffer = 1024

// newSubscription starts a stream fed by run, holding buffer messages
// ahead of its consumer (subscriptionBuffer when buffer < 1), for the
// code behind Events.Subscribe (the engine's handle, the HTTP client),
// which reach it through internal/wsconn.
// run is called once, in the subscription's own goroutine, with a context
// that ends when ctx does or Close is called; it sends each message with
// send, which blocks while the consumer is behind and reports false once
// that context has ended (then run should return). run returns why the
// stream ended, and that is what Err reports (a nil error as ErrClosed).
func newSubscription(ctx context.Context, buffer int, run func(ctx context.Context, send func(Message) bool) error) *Subscription {
	if buffer < 1 {
		buffer = subscriptionBuffer
	}
	buffer = min(buffer, maxSubscriptionBuffer)
	ctx, cancel := context.WithCancel(ctx)
	s := &Subscription{ch: make(chan Message, buffer), cancel: cancel, done: make(chan struct{})}
	send := func(m Message) bool {
		select {
		case s.ch <- m:
			return true
		case <-ctx.Done():
			return false
		}
	}
	go func() {
		// done closes before ch, so whoever sees ch closed finds Err set.
		defer close(s.ch)
		defer close(s.done)
		defer cancel()
		err := run(ctx, send)
		if err == nil {
			err = ErrClosed
		}
		s.err = err
	}()
	return s
}

// C returns the stream's channel; it is closed when the stream ends, after
// which Err says why.
func (s *Subscription) C() <-chan Message { return s.ch }

// Next returns the next message, or the error that ended the stream.
func (s *Subscription) Next(ctx context.Context) (Message, error) {
	select {
	case m, ok := <-s.ch:
		if !ok {
			return Message{}, s.Err()
		}
		return m, nil
	case <-ctx.Done():
		return Message{}, ctx.Err()
	}
}

// Err returns why the stream ended (nil while it runs): the context's error,
// ErrClosed, or a *CompactedError.
func (s *Subscription) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Close ends the stream and waits for its goroutine.
func (s *Subscription) Close() error {
	s.cancel()
	<-s.done
	return nil
}

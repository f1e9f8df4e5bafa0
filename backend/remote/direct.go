package remote

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// directTransport is the round tripper for a server on a unix socket. It
// writes a request and reads its answer on the calling goroutine, over a
// connection it keeps idle between calls.
//
// Why: net/http's Transport hands each request to a writing and a reading
// goroutine per connection and the answer back over channels, so one call
// wakes three goroutines, and each wake starts a spinning thread looking
// for work. A client process that makes one call at a time and waits for a
// group commit spent about 40% of its CPU there (docs/performance.md).
//
// Invariant: a connection is in idle only between round trips, with
// nothing unread in its buffer and no deadline set; a call that ends any
// other way (an error, a body closed before its end, a cancelled context,
// an answer that says Connection: close) closes it. A request is sent
// again on a new connection only when it is safe to (see replayable) and
// the reused connection failed before any answer came.
//
// Only plain HTTP/1.1 to a unix socket goes this way: no proxy can stand
// between, and the server is ours. TLS, TCP and event streams keep
// net/http's Transport.
type directTransport struct {
	dial func(ctx context.Context) (net.Conn, error)
	// idleFor drops connections idle longer than this; the server's own
	// idle timeout (2 minutes in wsctl serve) is longer.
	idleFor time.Duration

	mu     sync.Mutex
	idle   []*directConn
	closed bool
}

type directConn struct {
	c    net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	idle time.Time // when it was put back
}

// maxIdleDirect caps the idle pool; more connections than this are
// closed when their call ends.
const maxIdleDirect = 64

func (t *directTransport) get(ctx context.Context) (*directConn, bool, error) {
	now := time.Now()
	t.mu.Lock()
	for len(t.idle) > 0 {
		dc := t.idle[len(t.idle)-1]
		t.idle = t.idle[:len(t.idle)-1]
		if now.Sub(dc.idle) > t.idleFor {
			t.mu.Unlock()
			_ = dc.c.Close()
			t.mu.Lock()
			continue
		}
		t.mu.Unlock()
		if !peerOpen(dc.c) {
			_ = dc.c.Close()
			t.mu.Lock()
			continue
		}
		return dc, true, nil
	}
	t.mu.Unlock()
	c, err := t.dial(ctx)
	if err != nil {
		return nil, false, err
	}
	return &directConn{c: c, br: bufio.NewReaderSize(c, 16<<10), bw: bufio.NewWriterSize(c, 8<<10)}, false, nil
}

func (t *directTransport) put(dc *directConn) {
	if dc.br.Buffered() > 0 {
		_ = dc.c.Close()
		return
	}
	dc.idle = time.Now()
	t.mu.Lock()
	if t.closed || len(t.idle) >= maxIdleDirect {
		t.mu.Unlock()
		_ = dc.c.Close()
		return
	}
	t.idle = append(t.idle, dc)
	t.mu.Unlock()
}

// CloseIdleConnections closes the idle pool, and every connection put
// back after, for good.
func (t *directTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle, t.closed = nil, true
	t.mu.Unlock()
	for _, dc := range idle {
		_ = dc.c.Close()
	}
}

// RoundTrip implements http.RoundTripper.
func (t *directTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	for {
		resp, retry, err := t.roundTrip(req)
		if !retry {
			if err != nil && req.Body != nil {
				_ = req.Body.Close()
			}
			return resp, err
		}
		// The reused connection was already closed by the server (idle
		// timeout, a drain): nothing of this request was read. Go again
		// on a fresh one, with the body rewound.
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req.Body = body
		}
	}
}

// roundTrip makes one attempt; retry says the request may be sent again.
func (t *directTransport) roundTrip(req *http.Request) (*http.Response, bool, error) {
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	dc, reused, err := t.get(ctx)
	if err != nil {
		return nil, false, err
	}
	// A cancelled context interrupts a blocked read or write at once.
	cut := context.AfterFunc(ctx, func() { _ = dc.c.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error, answered bool) (*http.Response, bool, error) {
		cut()
		_ = dc.c.Close()
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		return nil, reused && !answered && replayable(req), err
	}
	if err := req.Write(dc.bw); err != nil {
		return fail(err, false)
	}
	if err := dc.bw.Flush(); err != nil {
		return fail(err, false)
	}
	resp, err := http.ReadResponse(dc.br, req)
	if err != nil {
		// Bytes of an answer read before the error mean the server saw
		// the request.
		return fail(err, dc.br.Buffered() > 0)
	}
	resp.Body = &directBody{t: t, dc: dc, body: resp.Body, ctx: ctx, cut: cut, keep: !resp.Close}
	return resp, false, nil
}

// replayable is net/http's rule: a request may be sent twice when its
// method is idempotent or it carries an idempotency key, and its body can
// be had again.
func replayable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, ok := req.Header["Idempotency-Key"]
	return ok
}

// directBody is an answer's body; at its end the connection goes back to
// the pool.
type directBody struct {
	t    *directTransport
	dc   *directConn
	body io.ReadCloser
	ctx  context.Context
	cut  func() bool
	keep bool // the server keeps the connection open

	mu   sync.Mutex
	done bool
}

func (b *directBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.finish(true)
	} else if err != nil {
		if b.ctx.Err() != nil {
			err = b.ctx.Err()
		}
		b.finish(false)
	}
	return n, err
}

// Close ends the call. What is left of a body (a JSON decoder stops
// before the final newline) is read off, up to maxDrain, so that the
// connection can be kept; a body longer than that takes its connection
// with it.
func (b *directBody) Close() error {
	b.mu.Lock()
	done := b.done
	b.mu.Unlock()
	if done {
		return nil
	}
	n, err := io.CopyN(io.Discard, b.body, maxDrain+1)
	b.finish(n <= maxDrain && err == io.EOF)
	return nil
}

// maxDrain is the most of an unread body Close reads to keep a connection.
const maxDrain = 64 << 10

func (b *directBody) finish(atEnd bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	b.done = true
	// cut reports false when the context's deadline has already been
	// set on the connection: it cannot be trusted again.
	if b.cut() && atEnd && b.keep {
		b.t.put(b.dc)
		return
	}
	_ = b.dc.c.Close()
}

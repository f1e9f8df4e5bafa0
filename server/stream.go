package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// An event stream over HTTP/1.x takes its connection over from net/http
// (http.Hijacker) once its request has passed every check and its
// subscription is open, and writes the response itself: the status line,
// the headers net/http would write, then the records as chunks. The
// handler then returns, so net/http's goroutines for the connection (the
// one serving it and its background reader) end with their buffers, and
// an idle stream holds one goroutine of its own, parked on its
// subscription, and no buffer: a burst of records is assembled in a
// pooled buffer and written at once. docs/performance.md gives what an
// idle stream costs.
//
// A writer that cannot be taken over (HTTP/2, a test recorder) keeps the
// stream on the handler's goroutine, written through the ResponseWriter.
// Both write the same records in the same order.

// streamDrainGrace is how long a stream may take to write its last
// records once Drain has begun: a client that does not read them by then
// loses them and resumes with Last-Event-ID.
const streamDrainGrace = time.Second

// streamBurst is the most a stream assembles before writing it out.
const streamBurst = 16 << 10

// streamBuffer is the messages a stream's subscription holds ahead of
// it: one, since every idle stream keeps its buffer, and burst takes
// what waits behind it either way.
const streamBuffer = 1

// chunkRoom is the room kept ahead of a burst for its chunk header: up to
// eight hex digits and CRLF.
const chunkRoom = 10

// stream is one open event stream.
type stream struct {
	s   *Server
	ctx context.Context
	sub *workspace.Subscription
	// release lets go of what ctx holds (nil: nothing).
	release func()
	bound   bool // token-bound: an event waits for the revocation watcher
	// token is the public id of the token whose count of open streams
	// this stream holds a place in ("": none).
	token string

	// Taken over: the connection, and whether the body is chunked
	// (HTTP/1.1) rather than ended by closing (HTTP/1.0).
	conn    net.Conn
	chunked bool
	// Otherwise: the ResponseWriter and its controller.
	w  http.ResponseWriter
	rc *http.ResponseController

	// buf is the burst being assembled, from chunkRoom on; nil between
	// bursts, so an idle stream holds none.
	buf *[]byte

	// record, when set (the inbox stream's), makes an event's record
	// data: ok false leaves the event out, and an error ends the stream
	// with inboxEnd's record. Nil: the event's JSON (the event stream).
	record func(ctx context.Context, ev workspace.Event) (data []byte, ok bool, err error)
}

// canTakeOver reports whether r's stream can take its connection over:
// an HTTP/1.x GET (net/http answers a HEAD without a body) whose writer,
// or one it wraps, is an http.Hijacker.
func canTakeOver(w http.ResponseWriter, r *http.Request) bool {
	if r.ProtoMajor != 1 || r.Method != http.MethodGet {
		return false
	}
	for {
		switch t := w.(type) {
		case http.Hijacker:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return false
		}
	}
}

// streamContext returns the context of a stream that will take its
// connection over: the request's principal for the workspace's checks,
// ended by Drain and, for a token-bound request, by the token's
// revocation or expiry; not by the handler's return, which the stream
// outlives. Its subscription ends with it, and so does the stream.
//
// The stream binds itself to its token anew while the middleware's
// binding still holds: a revocation the watcher examined before the new
// binding cancelled the request's context, which is checked after it, and
// one examined after cancels the new binding (see revoker).
func (s *Server) streamContext(r *http.Request) (ctx context.Context, release func(), err error) {
	p := principalFrom(r.Context())
	ctx = workspace.WithPrincipal(s.drain, p.workspacePrincipal())
	if !p.bound() {
		return ctx, nil, nil
	}
	if ctx, release, err = s.revoke.bind(ctx, p.token); err != nil {
		return nil, nil, err
	}
	ctx, release = untilExpiry(ctx, release, agents.Token{ExpiresAt: p.expires})
	if err := tokenEnded(r.Context()); err != nil {
		release()
		return nil, nil, err
	}
	return ctx, release, nil
}

// takeOver takes the connection of w from net/http and writes the
// response's head and first; false when it cannot (nothing is written
// then, and the stream is to be written through w). An error is the
// first write's: the stream is to end.
func (st *stream) takeOver(w http.ResponseWriter, r *http.Request, first []byte) (bool, error) {
	if !st.s.streams.add(st) {
		return false, nil
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		st.s.streams.remove(st)
		return false, nil
	}
	// What the client sent past its request (nothing, from an HTTP
	// client) stays unread in the hijacked reader; the reader and writer
	// are dropped, so the stream keeps no buffer of net/http's.
	st.s.streams.attach(st, conn, r.ProtoAtLeast(1, 1))
	var b bytes.Buffer
	if st.chunked {
		b.WriteString("HTTP/1.1 200 OK\r\n")
	} else {
		b.WriteString("HTTP/1.0 200 OK\r\n")
	}
	// The headers net/http would write: the handler's, sorted, then Date
	// and the framing.
	_ = w.Header().Write(&b)
	b.WriteString("Date: ")
	b.WriteString(time.Now().UTC().Format(http.TimeFormat))
	if st.chunked {
		b.WriteString("\r\nTransfer-Encoding: chunked")
	}
	// The connection ends with the stream: no client is to reuse it.
	b.WriteString("\r\nConnection: close\r\n\r\n")
	if st.chunked {
		b.WriteString(strconv.FormatInt(int64(len(first)), 16))
		b.WriteString("\r\n")
		b.Write(first)
		b.WriteString("\r\n")
	} else {
		b.Write(first)
	}
	st.deadline()
	_, err = conn.Write(b.Bytes())
	return true, err
}

// run sends the stream's messages until it ends, then closes it. The
// subscription's channel closes when the stream's context ends (Drain,
// the token, the client of a stream written through w) or the
// subscription fails, so it is all run waits on. The frame kept while
// the stream idles is this loop's, with the work in helpers, so that the
// parked goroutine's stack stays small.
func (st *stream) run() {
	defer st.close()
	ch := st.sub.C()
	for {
		m, ok := <-ch
		if !ok {
			st.end(st.sub.Err())
			return
		}
		if !st.burst(&m) {
			return
		}
	}
}

// burst writes m and the messages waiting behind it, then returns to
// wait: false when the stream has ended. Invariant: each message is
// written whole, after every message before it; what is assembled goes
// out when nothing more is waiting (a live event at once) or streamBurst
// is reached (a backlog in large writes). Taking what waits without
// blocking also takes a message its sender is blocked on, so the bursts
// do not depend on the subscription's buffer.
//
//go:noinline
func (st *stream) burst(m *workspace.Message) bool {
	ch := st.sub.C()
	for {
		if !st.add(m) {
			return false
		}
		if st.buf != nil && len(*st.buf) >= streamBurst && !st.flush(false) {
			return false
		}
		select {
		case next, ok := <-ch:
			if !ok {
				st.end(st.sub.Err())
				return false
			}
			*m = next
		default:
			return st.buf == nil || st.flush(false)
		}
	}
}

// add appends one message to the burst: an event, or a heartbeat. False
// when the stream is to end.
func (st *stream) add(m *workspace.Message) bool {
	if m.Progress && st.conn != nil && peerGone(st.conn) {
		return false
	}
	if !m.Progress && st.bound && st.s.revoke.waitPast(st.ctx, m.Event.Seq) != nil {
		// The token ended before this event: the subscription ends (its
		// context is the token's), and end writes why.
		return true
	}
	var (
		ev  []byte
		err error
	)
	if !m.Progress {
		if st.record == nil {
			// The event's own MarshalJSON, not json.Marshal of it, which
			// would scan its bytes again to check and compact them: they
			// are json.Marshal's already, compact with HTML escaped (the
			// invariant jsonFormat's selfEncoded keeps).
			ev, err = m.Event.MarshalJSON()
		} else {
			var ok bool
			ev, ok, err = st.record(st.ctx, m.Event)
			if err != nil {
				// The inbox stream ends on a failed read, saying why.
				st.end(err)
				return false
			}
			if !ok {
				return true
			}
		}
		if err != nil {
			return false
		}
	}
	st.begin()
	b := *st.buf
	if m.Progress {
		b = append(b, ": heartbeat\nid: "...)
		b = strconv.AppendInt(b, m.Head, 10)
		b = append(b, "\n\n"...)
	} else {
		b = append(b, "id: "...)
		b = strconv.AppendInt(b, m.Event.Seq, 10)
		b = append(b, "\ndata: "...)
		b = append(b, ev...)
		b = append(b, "\n\n"...)
		st.s.metrics.events.Inc()
	}
	*st.buf = b
	return true
}

// end writes why the stream ended, where the client is to be told, and
// ends the body.
//
//go:noinline
func (st *stream) end(err error) {
	st.begin()
	b := *st.buf
	if st.record != nil {
		*st.buf = st.s.inboxEnd(st.ctx, b, err)
		st.flush(true)
		return
	}
	var ce *workspace.CompactedError
	if e := tokenEnded(st.ctx); e != nil {
		err = e
	}
	switch {
	case errors.As(err, &ce), errors.Is(err, wire.ErrUnauthorized), errors.Is(err, workspace.ErrRewound):
		p, _ := wire.ProblemOf(err)
		j, _ := json.Marshal(p)
		b = append(b, "event: error\ndata: "...)
		b = append(b, j...)
		b = append(b, "\n\n"...)
	case st.s.drain.Err() != nil:
		b = append(b, ": the server is shutting down; reconnect with Last-Event-ID\n\n"...)
	}
	*st.buf = b
	st.flush(true)
}

// begin starts a burst, if none is under way.
func (st *stream) begin() {
	if st.buf == nil {
		st.buf = st.s.streams.buffer()
	}
}

// flush writes the burst and gives its buffer back; last ends a chunked
// body. False when the write failed.
func (st *stream) flush(last bool) bool {
	b := *st.buf
	defer func() {
		*st.buf = b
		st.s.streams.recycle(st.buf)
		st.buf = nil
	}()
	if st.conn == nil {
		_ = st.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if len(b) > chunkRoom {
			if _, err := st.w.Write(b[chunkRoom:]); err != nil {
				return false
			}
		}
		return st.rc.Flush() == nil
	}
	start := chunkRoom
	if st.chunked {
		if n := len(b) - chunkRoom; n > 0 {
			var hex [8]byte
			h := strconv.AppendInt(hex[:0], int64(n), 16)
			start = chunkRoom - len(h) - 2
			copy(b[start:], h)
			b[chunkRoom-2], b[chunkRoom-1] = '\r', '\n'
			b = append(b, "\r\n"...)
		}
		if last {
			b = append(b, "0\r\n\r\n"...)
		}
	}
	if len(b) == start {
		return true
	}
	st.deadline()
	_, err := st.conn.Write(b[start:])
	return err == nil
}

// deadline bounds the next write to the connection: streamWriteTimeout,
// or streamDrainGrace once Drain has begun. Invariant: Drain cancels
// Server.drain before it shortens the streams' deadlines
// (streamSet.drain), so whichever of the two sets a deadline last, a
// write during a drain ends within the grace.
func (st *stream) deadline() {
	_ = st.conn.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if st.s.drain.Err() != nil {
		_ = st.conn.SetWriteDeadline(time.Now().Add(streamDrainGrace))
	}
}

// close lets go of what the stream holds; a taken-over stream closes its
// connection and then no longer holds up Drain.
func (st *stream) close() {
	st.s.metrics.streams.Dec()
	st.s.perToken.leave(st.token)
	_ = st.sub.Close()
	if st.release != nil {
		st.release()
	}
	if st.conn != nil {
		_ = st.conn.Close()
		st.s.streams.remove(st)
	}
}

// streamSet holds the taken-over streams, which http.Server.Shutdown does
// not track, so that Drain can end them; it also pools the buffers of the
// streams' bursts. The zero value is ready.
type streamSet struct {
	mu       sync.Mutex
	live     map[*stream]struct{}
	draining bool
	idle     chan struct{} // made by drain; closed when live empties
	bufs     sync.Pool     // *[]byte
}

// add holds st; false once draining.
func (ss *streamSet) add(st *stream) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.draining {
		return false
	}
	if ss.live == nil {
		ss.live = map[*stream]struct{}{}
	}
	ss.live[st] = struct{}{}
	return true
}

// attach records st's connection, where drain reads it.
func (ss *streamSet) attach(st *stream, conn net.Conn, chunked bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	st.conn, st.chunked = conn, chunked
}

// remove lets st go.
func (ss *streamSet) remove(st *stream) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.live, st)
	if len(ss.live) == 0 && ss.idle != nil {
		close(ss.idle)
		ss.idle = nil
	}
}

// drain refuses new streams, bounds the writes of those held to
// streamDrainGrace and waits for them to close. The caller has cancelled
// Server.drain, which ends each one's context.
func (ss *streamSet) drain() {
	ss.mu.Lock()
	ss.draining = true
	if len(ss.live) == 0 {
		ss.mu.Unlock()
		return
	}
	for st := range ss.live {
		if st.conn != nil {
			_ = st.conn.SetWriteDeadline(time.Now().Add(streamDrainGrace))
		}
	}
	ss.idle = make(chan struct{})
	idle := ss.idle
	ss.mu.Unlock()
	<-idle
}

// buffer returns an empty burst, chunkRoom long.
func (ss *streamSet) buffer() *[]byte {
	if b, ok := ss.bufs.Get().(*[]byte); ok {
		*b = (*b)[:chunkRoom]
		return b
	}
	b := make([]byte, chunkRoom, 4<<10)
	return &b
}

// recycle gives a burst's buffer back to the pool, unless a large backlog
// grew it.
func (ss *streamSet) recycle(b *[]byte) {
	if cap(*b) <= 4*streamBurst {
		ss.bufs.Put(b)
	}
}

// tokenStreams counts each token's open event streams, so that one token
// cannot hold the server's memory and file descriptors with streams. The
// count is this server's: it bounds what this process spends. The zero
// value is ready.
type tokenStreams struct {
	mu   sync.Mutex
	open map[string]int // by token id; a token with none has no entry
}

// enter takes a place for a stream of token id: false when it already
// has max open.
func (ts *tokenStreams) enter(id string, max int) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.open[id] >= max {
		return false
	}
	if ts.open == nil {
		ts.open = map[string]int{}
	}
	ts.open[id]++
	return true
}

// leave gives back a place enter took ("": none was taken).
func (ts *tokenStreams) leave(id string) {
	if id == "" {
		return
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.open[id]--; ts.open[id] <= 0 {
		delete(ts.open, id)
	}
}

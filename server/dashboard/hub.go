package dashboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// The stream's event names: each names the views it refreshes.
const (
	streamTasks     = "tasks"
	streamLocks     = "locks"
	streamEvents    = "events"
	streamArtifacts = "artifacts"
	streamNotes     = "notes"
	streamAgents    = "agents"
	streamMessages  = "messages"
)

// views is a set of stream names, as bits.
type views uint8

var streamNames = []string{streamTasks, streamLocks, streamEvents, streamArtifacts, streamNotes, streamAgents, streamMessages}

const allViews views = 1<<7 - 1

func bit(name string) views {
	for i, n := range streamNames {
		if n == name {
			return 1 << i
		}
	}
	return 0
}

// touches is the set of views an event may change.
func touches(e workspace.Event) views {
	v := bit(streamEvents)
	switch e.Subject.Kind {
	case workspace.SubjectTask:
		v |= bit(streamTasks) | bit(streamAgents)
	case workspace.SubjectLock:
		v |= bit(streamLocks) | bit(streamAgents)
	case workspace.SubjectArtifact:
		v |= bit(streamArtifacts)
	case workspace.SubjectNote:
		v |= bit(streamNotes)
	case workspace.SubjectMessage:
		v |= bit(streamMessages)
	case workspace.SubjectActor:
		// A pause or resume: the agent's state and its pause message.
		v |= bit(streamMessages) | bit(streamAgents)
	}
	return v
}

// hub fans one event subscription out to every open page. It runs while
// at least one page is connected.
//
// Invariant: a client registered with cursor c is marked dirty for every
// view touched by an event with seq > c. On registration it is marked
// for every view if the hub has already passed c (it may have missed
// something); after that, each event the subscription delivers marks it,
// and the subscription is gap-free from where it started, which is at or
// below every registered cursor or followed by such a mark.
type hub struct {
	ws     *workspace.Workspace
	log    *slog.Logger
	redact func(error) error

	mu      sync.Mutex
	clients map[*client]struct{}
	seen    int64 // the last seq the running subscription has dispatched
	run     *run  // nil while no page is connected
	closed  bool
	wg      sync.WaitGroup
}

type run struct {
	cancel context.CancelFunc
}

// client is one open page's stream.
type client struct {
	wake  chan struct{} // cap 1: set when dirty gains a view
	dirty views
	seq   int64 // the newest seq dirty covers
	gone  chan struct{}
}

func newHub(ws *workspace.Workspace, log *slog.Logger, redact func(error) error) *hub {
	return &hub{ws: ws, log: log, redact: redact, clients: map[*client]struct{}{}}
}

var errClosed = errors.New("dashboard closed")

// register adds a page whose view reflects every event up to after.
func (h *hub) register(after int64) (*client, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errClosed
	}
	c := &client{wake: make(chan struct{}, 1), gone: make(chan struct{}), seq: after}
	h.clients[c] = struct{}{}
	if h.run == nil {
		ctx, cancel := context.WithCancel(context.Background())
		r := &run{cancel: cancel}
		h.run, h.seen = r, after
		h.wg.Add(1)
		go h.follow(ctx, r, after)
	} else if h.seen > after {
		c.mark(allViews, h.seen)
	}
	return c, nil
}

func (h *hub) unregister(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, c)
	if len(h.clients) == 0 && h.run != nil {
		h.run.cancel()
		h.run = nil
	}
}

// take returns and clears c's dirty views.
func (h *hub) take(c *client) (views, int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := c.dirty
	c.dirty = 0
	return v, c.seq
}

func (c *client) mark(v views, seq int64) {
	c.dirty |= v
	c.seq = max(c.seq, seq)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// dispatch marks every client with v, if r is still the hub's run.
func (h *hub) dispatch(r *run, v views, seq int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.run != r {
		return
	}
	h.seen = max(h.seen, seq)
	if v == 0 {
		return
	}
	for c := range h.clients {
		c.mark(v, seq)
	}
}

// follow runs the subscription for r until its context ends. After an
// error (compaction, a store that went away) it marks every view and
// starts again from the head, a second later.
func (h *hub) follow(ctx context.Context, r *run, after int64) {
	defer h.wg.Done()
	for ctx.Err() == nil {
		err := h.subscribe(ctx, r, after)
		if ctx.Err() != nil {
			return
		}
		h.log.Warn("agentspace dashboard: the event stream ended; starting again", "err", h.redact(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		head, herr := h.ws.Events().Head(ctx)
		if herr != nil {
			continue
		}
		h.dispatch(r, allViews, head)
		after = head
	}
}

func (h *hub) subscribe(ctx context.Context, r *run, after int64) error {
	sub, err := h.ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: after}})
	if err != nil {
		return err
	}
	defer sub.Close()
	for {
		m, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		var v views
		seq := m.Head
		if !m.Progress {
			v, seq = touches(m.Event), m.Event.Seq
		}
		// Take what else is waiting, so a burst is one dispatch.
	more:
		for range 1024 {
			select {
			case m, ok := <-sub.C():
				if !ok {
					break more
				}
				if m.Progress {
					seq = max(seq, m.Head)
				} else {
					v |= touches(m.Event)
					seq = max(seq, m.Event.Seq)
				}
			default:
				break more
			}
		}
		h.dispatch(r, v, seq)
	}
}

// close ends every stream and the subscription, and waits for it.
func (h *hub) close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		for c := range h.clients {
			close(c.gone)
		}
		if h.run != nil {
			h.run.cancel()
			h.run = nil
		}
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// stream tells one page which views changed, as Server-Sent Events named
// by view, at most once per Coalesce interval. The page's after= (or the
// browser's Last-Event-ID on reconnect) is the seq its content reflects.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request) {
	_, r, ok := h.reader(w, r, false)
	if !ok {
		return
	}
	var after int64
	for _, s := range []string{r.URL.Query().Get("after"), r.Header.Get("Last-Event-ID")} {
		if s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			h.fail(w, r, http.StatusBadRequest, "after: not a seq")
			return
		}
		after = max(after, n)
	}
	c, err := h.hub.register(after)
	if err != nil {
		h.fail(w, r, http.StatusServiceUnavailable, "the dashboard is shutting down")
		return
	}
	defer h.hub.unregister(c)

	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(format string, args ...any) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(": agentspace dashboard after %d\nretry: 1000\n\n", after) {
		return
	}
	beat := time.NewTicker(h.opts.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.gone:
			return
		case <-beat.C:
			if !send(": heartbeat\n\n") {
				return
			}
			continue
		case <-c.wake:
		}
		v, seq := h.hub.take(c)
		var msg []byte
		for i, name := range streamNames {
			if v&(1<<i) != 0 {
				msg = fmt.Appendf(msg, "id: %d\nevent: %s\ndata: %d\n\n", seq, name, seq)
			}
		}
		if len(msg) > 0 && !send("%s", msg) {
			return
		}
		// Coalesce: whatever changes meanwhile goes out in the next message.
		t := time.NewTimer(h.opts.Coalesce)
		select {
		case <-r.Context().Done():
			t.Stop()
			return
		case <-c.gone:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

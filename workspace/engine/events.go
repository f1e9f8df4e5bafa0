package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentspace/agentspace/internal/wsconn"

	"github.com/agentspace/agentspace/policy"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// hub tracks the store's head for the handles of one core and wakes
// whoever waits for a change: subscriptions, lock and claim waiters. The
// core's own commits bump it at once; other stores' commits (other
// processes, private handles) are seen by the watcher, from the store's
// notifications or by polling while anyone waits.
type hub struct {
	h       *core
	changes <-chan struct{}
	heads   func() int64             // set when the store's notifications carry the seq
	wake    func()                   // set when the store listens only while someone waits
	carried func() []workspace.Event // set when they may carry the events too
	restart func() int64             // set when the store counts its notifications' restarts
	early   bool                     // set when they may come before the change can be read
	mu      sync.Mutex
	head    int64
	ch      chan struct{} // closed when head advances
	// recent holds this handle's latest committed events, seqs contiguous
	// and ending at the last one it committed (at most 2*recentEvents).
	// While the head is that last seq, a subscriber whose cursor is
	// inside recent has every event it is missing here.
	recent []workspace.Event
	// restarts is the store's count of notification restarts the hub
	// last took in (see Notifications.Restarts).
	restarts int64
	interest atomic.Int64
	// settledReads and ownReads count the watcher's reads that waited for
	// an early store's notifications to settle, and for the changes most
	// likely the core's own to pause (for the tests).
	settledReads atomic.Int64
	ownReads     atomic.Int64
	// changesTaken counts the store's notifications the watcher has
	// taken and dealt with (for the tests).
	changesTaken atomic.Int64
	kick         chan struct{}
	ctx          context.Context
	cancel       context.CancelFunc
	wg           sync.WaitGroup
}

func newHub(h *core) *hub {
	ctx, cancel := context.WithCancel(context.Background())
	b := &hub{h: h, ch: make(chan struct{}), kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
	// A store that listens only while someone waits learns who does from
	// interest.
	if nt, ok := h.st.(driver.Notifier); ok {
		n := nt.Notify(func() bool { return b.interest.Load() > 0 })
		if n.Changes != nil {
			b.changes, b.wake, b.heads = n.Changes, n.Wake, n.Head
			if n.Head != nil {
				b.carried, b.restart = n.Events, n.Restarts
			}
			b.early = n.Early && n.Head == nil
		}
	}
	b.wg.Add(1)
	go b.watchLoop()
	return b
}

func (b *hub) close() {
	b.cancel()
	b.wg.Wait()
	// A group a writer runs alone ends before the store closes, and the
	// turn is kept: no group runs on a closed store.
	b.h.writers.turn.Lock()
}

// bump records that the head reached seq, waking waiters if it advanced,
// and reports whether it did.
func (b *hub) bump(seq int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bumpLocked(seq)
}

func (b *hub) bumpLocked(seq int64) bool {
	if seq <= b.head {
		return false
	}
	b.head = seq
	close(b.ch)
	b.ch = make(chan struct{})
	return true
}

// recentEvents is how many of a handle's own events the hub keeps for its
// subscribers (between this and twice as many).
const recentEvents = 1024

// publish records events this handle just committed (numbered, in seq
// order) and bumps the head to the last.
func (b *hub) publish(evs []workspace.Event) {
	if len(evs) == 0 {
		return
	}
	b.h.own.publish(time.Now())
	b.h.pauses.clearOn(evs)
	b.mu.Lock()
	defer b.mu.Unlock()
	if evs[0].Seq <= b.head {
		// A commit of this handle's own got a seq the hub had seen: the
		// log was rewound under it (see rewoundLocked).
		b.rewoundLocked()
		return
	}
	b.rememberLocked(evs)
	b.bumpLocked(evs[len(evs)-1].Seq)
}

// rememberLocked adds committed events, in seq order, to recent: those
// that continue it are appended; one that is past a gap starts it again
// (the events in the gap are only in the log); older ones are known.
func (b *hub) rememberLocked(evs []workspace.Event) {
	for _, e := range evs {
		n := len(b.recent)
		switch {
		case n > 0 && e.Seq <= b.recent[n-1].Seq:
			continue
		case n > 0 && e.Seq == b.recent[n-1].Seq+1:
			b.recent = append(b.recent, e)
		default:
			b.recent = append(b.recent[:0], e)
		}
	}
	// Trimmed in place: every reader copies what it takes under b.mu, so
	// the array is the hub's alone, and keeping it spares a new one (200
	// bytes per event) each time it fills.
	if n := len(b.recent); n > 2*recentEvents {
		b.recent = b.recent[:copy(b.recent, b.recent[n-recentEvents:])]
	}
}

// learn takes in what the store's notifications said: the events they
// carried, then the head they announced.
func (b *hub) learn() (head int64) {
	var evs []workspace.Event
	if b.carried != nil {
		evs = b.carried()
	}
	if b.heads != nil {
		head = b.heads()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.restart != nil {
		// Read after what it counts: what was taken may be from before a
		// restart, of a server that is gone. Drop it all and read the log.
		if n := b.restart(); n != b.restarts {
			b.restarts = n
			b.recent = nil
			return 0
		}
	}
	b.rememberLocked(evs)
	if n := len(evs); n > 0 {
		head = max(head, evs[n-1].Seq)
	}
	if head > 0 {
		b.bumpLocked(head)
	}
	return head
}

// fromRecent serves the page after q.AfterSeq from memory, when the hub
// holds every event up to its head past the cursor; it reports whether it
// could. The page is what readPage would return from the log; at is the
// event at its Next.
func (b *hub) fromRecent(q workspace.EventQuery) (page workspace.EventPage, at workspace.Event, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.recent)
	if n == 0 {
		return workspace.EventPage{}, at, false
	}
	first, last := b.recent[0].Seq, b.recent[n-1].Seq
	if b.head != last || q.AfterSeq < first-1 || q.AfterSeq > last {
		return workspace.EventPage{}, at, false
	}
	page = workspace.EventPage{Head: last, Next: last}
	for _, e := range b.recent[q.AfterSeq+1-first:] {
		if !q.Matches(e) {
			continue
		}
		page.Events = append(page.Events, e)
		if len(page.Events) == q.Limit {
			page.Next = e.Seq
			break
		}
	}
	return page, b.recent[page.Next-first], true
}

// watch returns a channel closed at the next advance of the head.
func (b *hub) watch() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

// wait blocks until wake is closed, deadline passes (if set), ctx ends or
// closed (the waiting handle's) is closed. Only ctx and close are errors.
func (b *hub) wait(ctx context.Context, closed <-chan struct{}, wake <-chan struct{}, deadline time.Time) error {
	if b.interest.Add(1) == 1 {
		select {
		case b.kick <- struct{}{}:
		default:
		}
		if b.wake != nil {
			b.wake()
		}
	}
	defer b.interest.Add(-1)
	var timer <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(max(time.Until(deadline), 0) + time.Millisecond)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-wake:
	case <-timer:
	case <-ctx.Done():
		return ctx.Err()
	case <-closed:
		return workspace.ErrClosed
	}
	return nil
}

const subscribePage = 256

type events struct{ h *handle }

func checkQuery(q *workspace.EventQuery, forRead bool) error {
	if q.AfterSeq < 0 {
		return invalid("after seq", "%d is negative", q.AfterSeq)
	}
	for _, t := range q.Types {
		if err := checkKey("type", t, workspace.MaxKindLen); err != nil {
			return err
		}
	}
	if err := checkText("actor", q.Actor, workspace.MaxActorLen); err != nil {
		return err
	}
	if err := checkText("subject kind", q.SubjectKind, workspace.MaxKindLen); err != nil {
		return err
	}
	if err := checkText("subject id", q.SubjectID, workspace.MaxNameLen+workspace.MaxKeyLen); err != nil {
		return err
	}
	if err := checkLine("subject name", q.SubjectName, workspace.MaxNameLen); err != nil {
		return err
	}
	// Stores keep event times in microseconds: so do the bounds, so that
	// every store and the in-memory filter agree on the edges.
	q.Since, q.Until = q.Since.Truncate(time.Microsecond), q.Until.Truncate(time.Microsecond)
	if !q.Since.IsZero() && !q.Until.IsZero() && q.Until.Before(q.Since) {
		return invalid("until", "is before since")
	}
	if forRead {
		n, err := checkLimit("limit", q.Limit, 10000)
		if err != nil {
			return err
		}
		q.Limit = n
	}
	return nil
}

func (e events) Read(ctx context.Context, q workspace.EventQuery) (workspace.EventPage, error) {
	if err := checkQuery(&q, true); err != nil {
		return workspace.EventPage{}, err
	}
	keep, err := e.h.eventFilter(ctx)
	if err != nil {
		return workspace.EventPage{}, err
	}
	var page workspace.EventPage
	err = e.h.view(ctx, "events.read", func(tx driver.ReadTx) error {
		var err error
		page, err = readPage(ctx, tx, q)
		return err
	})
	// Next stays the unfiltered page's: a left-out event's seq advances
	// the cursor, and a page may hold fewer than Limit with more to follow.
	page.Events = filterEvents(page.Events, keep)
	return page, err
}

// readPage reads one page after q.AfterSeq, checking the floor, and says
// where the next page starts.
func readPage(ctx context.Context, tx driver.ReadTx, q workspace.EventQuery) (workspace.EventPage, error) {
	floor, err := tx.Floor(ctx)
	if err != nil {
		return workspace.EventPage{}, err
	}
	if q.AfterSeq < floor-1 { // not AfterSeq+1: it overflows at MaxInt64
		return workspace.EventPage{}, &workspace.CompactedError{Requested: q.AfterSeq, Floor: floor}
	}
	head, err := tx.Head(ctx)
	if err != nil {
		return workspace.EventPage{}, err
	}
	evs, err := tx.Events(ctx, q)
	if err != nil {
		return workspace.EventPage{}, err
	}
	page := workspace.EventPage{Events: evs, Head: head, Next: max(q.AfterSeq, head)}
	if len(evs) == q.Limit {
		page.Next = evs[len(evs)-1].Seq
	}
	return page, nil
}

func (e events) Head(ctx context.Context) (int64, error) {
	var head int64
	err := e.h.view(ctx, "events.head", func(tx driver.ReadTx) error {
		var err error
		head, err = tx.Head(ctx)
		return err
	})
	return head, err
}

func (e events) Compact(ctx context.Context, floor int64) error {
	if floor < 1 {
		return invalid("floor", "%d: the floor is a seq, at least 1", floor)
	}
	if err := e.h.alive(); err != nil {
		return err
	}
	if err := e.h.allowAdmin(ctx, policy.AdminCompact); err != nil {
		return err
	}
	err := e.h.st.Update(ctx, func(tx driver.Tx) error {
		head, err := tx.Head(ctx)
		if err != nil {
			return err
		}
		if floor > head+1 {
			return invalid("floor", "%d is past the head (%d)", floor, head)
		}
		cur, err := tx.Floor(ctx)
		if err != nil || floor <= cur {
			return err
		}
		return tx.CompactEvents(ctx, floor)
	})
	return wrapErr("events.compact", err)
}

func (e events) Subscribe(ctx context.Context, r workspace.SubscribeRequest) (*workspace.Subscription, error) {
	q := r.Query
	if err := checkQuery(&q, false); err != nil {
		return nil, err
	}
	q.Limit = subscribePage
	hb := r.Heartbeat
	if hb == 0 {
		hb = workspace.DefaultHeartbeat
	}
	// Fail fast on a compacted start rather than from the goroutine.
	if err := e.h.view(ctx, "events.subscribe", func(tx driver.ReadTx) error {
		floor, err := tx.Floor(ctx)
		if err == nil && q.AfterSeq < floor-1 {
			err = &workspace.CompactedError{Requested: q.AfterSeq, Floor: floor}
		}
		return err
	}); err != nil {
		return nil, err
	}
	h := e.h
	h.subs.Add(1)
	return subscription(ctx, r.Buffer, func(ctx context.Context, send func(workspace.Message) bool) error {
		defer h.subs.Done()
		// The stream also ends when the subscribing handle closes.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(h.ctx, cancel)()
		return h.hub.follow(&follower{ctx: ctx, closed: h.ctx.Done(), send: send, q: q, hb: hb,
			filter: func() (func(workspace.Event) bool, error) { return h.eventFilter(ctx) }})
	}), nil
}

// follower is one subscription's state as follow runs it: on the heap,
// so that the frames a subscription keeps while it waits stay small (a
// parked goroutine's stack shrinks only while it uses under a quarter of
// it, and one that read a page from the store has grown).
type follower struct {
	ctx    context.Context
	closed <-chan struct{} // the subscribing handle's
	send   func(workspace.Message) bool
	q      workspace.EventQuery
	hb     time.Duration
	filter func() (func(workspace.Event) bool, error)

	lastSent time.Time
	backoff  time.Duration
	// mark checks that the log still holds what was delivered (see logMark).
	mark logMark
}

// follow is a subscription's run: read a page from the log after the
// cursor, send it, and when caught up wait for the head to move. f.closed
// is the subscribing handle's: the subscription ends when it closes. It
// returns why the stream ended: ErrClosed, a *CompactedError or f.ctx's
// error. The page work is step's, so that what a waiting subscription
// keeps on its stack is this loop and wait (see follower).
//
// f.filter gives, for each page, the events the subscriber may read (nil:
// all): it is asked again per page, so a policy change binds a running
// stream too. A left-out event is not sent, but the cursor moves past it
// (a progress message's head says how far), so a stream resumed after the
// last seq it got reads the left-out ones again and leaves them out again.
func (b *hub) follow(f *follower) error {
	f.lastSent = time.Now()
	f.backoff = 10 * time.Millisecond
	for {
		wake, deadline, more, err := b.step(f)
		if !more {
			return f.end(err)
		}
		if err := b.wait(f.ctx, f.closed, wake, deadline); err != nil {
			return f.end(nil)
		}
	}
}

// end is why the stream ended, given err (nil: the context's end).
func (f *follower) end(err error) error {
	select {
	case <-f.closed:
		return workspace.ErrClosed
	default:
	}
	if err != nil {
		return err
	}
	return f.ctx.Err()
}

// step reads and sends what follows the cursor, and says what to wait for
// next: a channel closed when the head moves (nil: only the deadline) and
// the deadline (zero: none). It reports false when the stream is to end,
// with the error that ends it (nil: the context's end).
//
//go:noinline
func (b *hub) step(f *follower) (<-chan struct{}, time.Time, bool, error) {
	q := &f.q
	for {
		wake := b.watch()
		page, at, ok := b.fromRecent(*q)
		keep, err := f.filter()
		if err == nil && ok && page.Next > q.AfterSeq {
			f.mark = markOf(at)
		}
		if err == nil && !ok {
			err = b.h.st.View(f.ctx, func(tx driver.ReadTx) error {
				var err error
				if page, err = readPage(f.ctx, tx, *q); err != nil {
					return err
				}
				m, err := f.mark.check(f.ctx, tx, q.AfterSeq, page)
				if err == nil {
					f.mark = m
				}
				return err
			})
		}
		if err != nil {
			var ce *workspace.CompactedError
			if errors.As(err, &ce) || errors.Is(err, workspace.ErrRewound) {
				return nil, time.Time{}, false, err
			}
			if f.ctx.Err() != nil {
				return nil, time.Time{}, false, nil
			}
			// A store that is down (a restarting server) is retried: the
			// cursor is kept, so nothing is missed when it comes back.
			b.h.opts.Logger.Warn("agentspace: subscription read failed; retrying", "after", q.AfterSeq, "err", err)
			deadline := time.Now().Add(f.backoff)
			f.backoff = min(f.backoff*2, time.Second)
			return nil, deadline, true, nil
		}
		f.backoff = 10 * time.Millisecond
		for _, ev := range page.Events {
			if keep != nil && !keep(ev) {
				continue
			}
			if !f.send(workspace.Message{Event: ev, Head: page.Head}) {
				return nil, time.Time{}, false, nil
			}
			f.lastSent = time.Now()
		}
		q.AfterSeq = page.Next
		b.bump(page.Head)
		if len(page.Events) == q.Limit {
			continue
		}
		if f.hb > 0 && time.Since(f.lastSent) >= f.hb {
			if !f.send(workspace.Message{Progress: true, Head: q.AfterSeq}) {
				return nil, time.Time{}, false, nil
			}
			f.lastSent = time.Now()
		}
		var deadline time.Time
		if f.hb > 0 {
			deadline = f.lastSent.Add(f.hb)
		}
		return wake, deadline, true, nil
	}
}

func (h *handle) Status(ctx context.Context) (workspace.Status, error) {
	// The counts are numbers, and tasks and locks have no read right; the
	// recent events leave out what the principal may not read.
	keep, err := h.eventFilter(ctx)
	if err != nil {
		return workspace.Status{}, err
	}
	var st workspace.Status
	err = h.view(ctx, "status", func(tx driver.ReadTx) error {
		var err error
		if st.Head, err = tx.Head(ctx); err != nil {
			return err
		}
		if st.Floor, err = tx.Floor(ctx); err != nil {
			return err
		}
		c, err := tx.Counts(ctx)
		if err != nil {
			return err
		}
		st.Artifacts, st.Notes, st.Tasks = c.Artifacts, c.Notes, c.Tasks
		if st.Tasks == nil {
			st.Tasks = map[workspace.TaskStatus]int{}
		}
		active, err := tx.ListTasks(ctx, workspace.TaskFilter{Status: workspace.TaskInProgress, Limit: maxPageLimit})
		if err != nil {
			return err
		}
		for _, t := range active {
			if t.LeaseExpiresAt.IsZero() || t.LeaseExpiresAt.After(tx.Now()) {
				st.ActiveTasks = append(st.ActiveTasks, t)
			}
		}
		if st.Locks, err = tx.ListLeases(ctx, tx.Now()); err != nil {
			return err
		}
		after := max(st.Head-20, st.Floor-1, 0)
		st.RecentEvents, err = tx.Events(ctx, workspace.EventQuery{AfterSeq: after, Limit: 20})
		st.RecentEvents = filterEvents(st.RecentEvents, keep)
		return err
	})
	if err != nil {
		return workspace.Status{}, err
	}
	return st, nil
}

// subscription starts the *workspace.Subscription run feeds, holding
// buffer messages ahead of its consumer (SubscribeRequest.Buffer).
func subscription(ctx context.Context, buffer int, run func(context.Context, func(workspace.Message) bool) error) *workspace.Subscription {
	return wsconn.NewSubscription(ctx, buffer, run)
}

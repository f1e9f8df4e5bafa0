package engine

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// The watch loop: how a core learns of other stores' commits (other
// processes, private handles) and wakes its waiters. Its own commits bump
// the hub at once (publish); the loop reads the store's head when a
// watchPlan says a read is due and bumps the hub to what it finds.

// watchPlan decides when the watch loop reads the store's head. The loop
// tells it what happens, with the time it happened, and reads when a read
// is due; the plan holds no clock and starts nothing, so that its tests can
// drive every order of its inputs at times of their choosing.
//
// The invariant that makes every commit reach a waiter:
//
//	while a notification is pending, a read is due, at most
//	max(poll, ownMax) from now; the loop reads when it is due if anyone
//	waits, and at once if anyone starts waiting after it was due.
//
// A notification that carries no seq is pending until a read that starts
// tail or more after it. It may come before the commit it announces can
// be read (a file watch sees SQLite's WAL frames before the commit's fsync
// ends), and two commits may share one notification, so no single read
// settles it, not even one that finds the head moved. A notification of
// a store whose notifications follow their commits (a head notifier's
// reconnect) is pending until the next read starts. Past tail, the
// safety tick reads, as it does for a notification that never came.
//
// The heuristics that the measured figures need choose when the read is
// due, never whether: the changes most likely the core's own commits are
// read once they pause (ownPause, at most ownMax after the first); an
// early store's change after a quiet spell is read once the notifications
// have settled (settleDelay, at most maxSettle after the first); reads
// that find nothing look again at growing steps, from a millisecond (or,
// after a settled read that found nothing, the finer fineStep, slept in
// the kernel by the napper) up to poll; a read that found the head moved
// looks again after poll.
type watchPlan struct {
	notifies bool          // the store notifies; else it is polled
	early    bool          // its notifications may come before their commit is readable
	poll     time.Duration // the longest step between reads while one is pending
	tail     time.Duration // how long a notification without a seq stays pending
	fineStep time.Duration // the first look-again after a settled read (early stores)
	fine     bool          // the look-agains follow a settled read that found nothing

	due    time.Time // the next read; zero: none
	ladder bool      // due is a look-again's
	step   time.Duration
	// last is when the latest notification without a seq came; confirm
	// is set while a notification that follows its commit waits for a
	// read.
	last    time.Time
	confirm bool
	// heard is when the latest notification taken while someone waited
	// came: quiet spells are timed from it.
	heard time.Time
	// ownFirst and settleFirst are when the first change put off as the
	// core's own, or settling, came since the last read (zero: none).
	ownFirst    time.Time
	settleFirst time.Time
}

// Sub-millisecond steps of the plan: see nap for why the loop sleeps in the
// kernel for them.
const (
	// settleDelay is how long an early store's notifications must be
	// quiet before the change is read: about the fsync that follows a
	// commit's last WAL frame.
	settleDelay = 150 * time.Microsecond
	// maxSettle bounds the wait from the first notification, so that a
	// stream of writes does not hold the read off.
	maxSettle = time.Millisecond
	// quietSpell is how long an early store's notifications must have
	// been quiet for the next to wait to settle; one that comes sooner is
	// read at once. Settling every notification, or those after 300 µs
	// of quiet, made W1 at c=16 on four stores of one file 6-10% slower
	// (bench/README).
	quietSpell = time.Millisecond
	// ownPause is how long the changes most likely a core's own commits
	// must pause before they are read; ownMax bounds the wait from the
	// first. Reading one for each of a writer's commits, when it has a
	// subscriber, cost it 8-13% of its rate (W1 at c=1 on SQLite, six
	// interleaved pairs): see bench/README.
	ownPause = time.Millisecond
	ownMax   = 5 * time.Millisecond
)

// newWatchPlan returns the plan for a store that notifies (or not), whose
// notifications may come early, read while it is pending at most poll
// apart; a notification stays pending for tail.
func newWatchPlan(notifies, early bool, poll, tail time.Duration) *watchPlan {
	p := &watchPlan{notifies: notifies, early: early, poll: poll, tail: tail, fineStep: min(2*settleDelay, poll)}
	return p
}

// pending reports whether a notification is pending at now.
func (p *watchPlan) pending(now time.Time) bool {
	return p.confirm || (!p.last.IsZero() && now.Sub(p.last) < p.tail)
}

// setDue makes the next read due at t, or sooner if it already is.
func (p *watchPlan) setDue(t time.Time) {
	if p.due.IsZero() || t.Before(p.due) {
		p.due, p.ladder = t, false
	}
}

// notified takes in a notification that carries no seq, at now. own says
// the core is writing or has just published (ownCommits.likely); wrote
// says it ended a transaction within quietSpell; waiting, that someone
// waits. A quiet spell is timed from the last notification taken while
// someone waited: the tail of a commit's notifications that lands while
// its waiters read what it woke them for does not break it.
func (p *watchPlan) notified(now time.Time, own, wrote, waiting bool) {
	quiet := now.Sub(p.heard) >= quietSpell && !wrote
	p.last, p.step = now, 0
	if waiting {
		p.heard = now
	}
	switch {
	case own:
		// A look-again due meanwhile waits with it; a settling read does not.
		if p.ownFirst.IsZero() {
			p.ownFirst = now
		}
		d := minTime(now.Add(ownPause), p.ownFirst.Add(ownMax))
		if p.settleFirst.IsZero() {
			p.due, p.ladder = d, false
		} else {
			p.setDue(d)
		}
	case p.early && (quiet || !p.settleFirst.IsZero()):
		// Only a change after a quiet spell waits to settle (and those
		// that come while it does): in a stream of commits from other
		// stores reading at once keeps up, and settling them all made
		// those stores' writers slower (see quietSpell). A change just
		// after this core wrote is read at once, which keeps its waiters
		// from competing with a late read.
		if p.settleFirst.IsZero() {
			p.settleFirst = now
		}
		d := minTime(now.Add(settleDelay), p.settleFirst.Add(maxSettle))
		if p.ownFirst.IsZero() {
			p.due, p.ladder = d, false
		} else {
			p.setDue(d)
		}
	default:
		p.setDue(now)
	}
}

// notifiedAfter takes in a notification, from a store whose
// notifications follow their commits, that did not say how far the log
// goes (a reconnect: what was committed meanwhile must be read).
func (p *watchPlan) notifiedAfter(now time.Time) {
	p.confirm = true
	p.setDue(now)
}

// kicked takes in that someone started waiting. A read due while nobody
// waited is due still; a polled store is read at once.
func (p *watchPlan) kicked(now time.Time) {
	if !p.notifies {
		p.setDue(now)
	}
}

// ticked takes in the safety tick: a read now.
func (p *watchPlan) ticked(now time.Time) { p.setDue(now) }

// precise reports whether the due read is one that a millisecond late
// would cost a waiter: a settling change's, or a look-again just after a
// settled read. Others wait on a runtime timer rather than hold a thread
// in nap while the core's writers run.
func (p *watchPlan) precise() bool {
	return !p.settleFirst.IsZero() || (p.ladder && p.fine)
}

// ready reports whether the read is due at now. A look-again that falls
// while the core's own commits are likely landing (own) is put off with
// them.
func (p *watchPlan) ready(now time.Time, own bool) bool {
	if p.due.IsZero() || now.Before(p.due) {
		return false
	}
	if p.ladder && own {
		p.ownFirst = now
		p.due, p.ladder = now.Add(ownPause), false
		return false
	}
	return true
}

// read takes in a read of the head that started at start and whether it
// moved the hub's head, and schedules the next: a look-again while a
// notification is pending, none otherwise. A read that failed counts as
// one that found nothing new.
func (p *watchPlan) read(start time.Time, moved bool) {
	settled := !p.settleFirst.IsZero()
	p.ownFirst, p.settleFirst, p.confirm = time.Time{}, time.Time{}, false
	p.due, p.ladder = time.Time{}, false
	if !p.pending(start) {
		p.step = 0
		return
	}
	switch {
	case moved:
		// The commit it was woken for is in. Another that shared its
		// notification may not be yet, but that is rare: look again
		// within a poll interval, not at once, which would take a read
		// snapshot while the store's next commit is most likely under way.
		// (A read of changes put off as the core's own finds nothing
		// moved as a rule, and looks again soon: another store's commit
		// that came just after the core's is among them.)
		p.step, p.fine = p.poll, false
	case settled:
		// A settled read that found nothing is most likely just ahead of
		// its commit's fsync: look again soon (fineStep, doubling while
		// under a millisecond).
		p.fine = true
		p.step = min(max(2*p.step, p.fineStep), p.poll)
	default:
		// A millisecond is soon enough, and a runtime timer can keep it.
		if p.step >= time.Millisecond {
			p.fine = false
		}
		p.step = min(max(2*p.step, min(time.Millisecond, p.poll)), p.poll)
	}
	p.due, p.ladder = start.Add(p.step), true
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// ownCommits is what a core records of its own transactions, for its
// watcher to tell their notifications from other stores': a watched store
// also announces the core's own commits, which publish has told its
// waiters of already. Times are kept as durations since clockBase.
type ownCommits struct {
	// ended is when the core's last transaction ended, or writingNow while
	// one runs.
	ended atomic.Int64
	// published is when the core last published a commit of its own.
	published atomic.Int64
}

// writingNow is ownCommits.ended while a transaction runs: later than any time.
const writingNow = 1<<63 - 1

func (o *ownCommits) begin()              { o.ended.Store(writingNow) }
func (o *ownCommits) end(t time.Time)     { o.ended.Store(int64(t.Sub(clockBase))) }
func (o *ownCommits) publish(t time.Time) { o.published.Store(int64(t.Sub(clockBase))) }

// likely reports whether a change the store announces at now is most
// likely the core's own commit: it came while the core was writing, or
// within ownPause of its last publish.
func (o *ownCommits) likely(now time.Time) bool {
	return o.ended.Load() == writingNow ||
		now.Sub(clockBase)-time.Duration(o.published.Load()) < ownPause
}

// wroteWithin reports whether the core was writing at now or ended a
// transaction less than d before.
func (o *ownCommits) wroteWithin(now time.Time, d time.Duration) bool {
	return now.Sub(clockBase)-time.Duration(o.ended.Load()) < d
}

// napUnder is the wait under which the loop sleeps in the kernel (nap)
// for a precise read, rather than on a runtime timer, which may fire a
// millisecond late.
const napUnder = time.Millisecond

func (b *hub) watchLoop() {
	defer b.wg.Done()
	poll := b.h.opts.PollInterval
	tick := poll
	if b.changes != nil {
		// Notifications carry the news; the tick only guards against a lost one.
		tick = max(poll*20, time.Second)
	}
	p := newWatchPlan(b.changes != nil, b.early, poll, tick)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	// armed is the due the timer is set for (zero: none): it is set again
	// only when the due moves, as most inputs (the core's own commits'
	// notifications, kicks) leave it where it is.
	var armed time.Time
	n := newNapper(&b.wg)
	// A notification that only says "something changed" is left in its
	// channel while nobody waits: nothing would read for it, and taking
	// each one costs an idle process a wake-up per write of every other
	// (16 processes holding a SQLite store open made its writer 7× slower).
	// The first waiter's kick brings the loop back to take it, and a read
	// follows as for any notification; a file watch stops reading events
	// meanwhile (dirwatch). Notifications that carry heads or events
	// (Postgres) are taken always.
	deferrable := b.heads == nil && b.carried == nil
	for {
		var ticks, alarm <-chan time.Time
		var napped <-chan struct{}
		changes := b.changes
		if deferrable && b.interest.Load() == 0 {
			changes = nil
		}
		if b.interest.Load() > 0 {
			ticks = ticker.C
			if !p.due.IsZero() {
				switch wait := time.Until(p.due); {
				case wait <= 0:
				case wait < napUnder && p.precise():
					napped = n.until(p.due)
				default:
					if !p.due.Equal(armed) {
						timer.Reset(wait)
						armed = p.due
					}
					alarm = timer.C
				}
			}
		}
		if napped != nil || alarm != nil || p.due.IsZero() || b.interest.Load() == 0 {
			select {
			case <-b.ctx.Done():
				return
			case <-b.kick:
				p.kicked(time.Now())
			case <-changes:
				b.changed(p)
			case <-alarm:
				armed = time.Time{}
			case <-napped:
				n.woke()
			case <-ticks:
				p.ticked(time.Now())
			}
		}
		if b.interest.Load() == 0 {
			continue
		}
		if now := time.Now(); p.ready(now, b.h.own.likely(now)) {
			b.readHead(p, now)
		}
	}
}

// napper sleeps in the kernel (nap) on a goroutine of its own for the
// loop's sub-millisecond waits, so that the loop goes on taking
// notifications meanwhile (they may move the read: an early store's
// settles once its notifications are quiet). One sleeper at a time: the
// loop asks again only once it has taken the wake-up.
type napper struct {
	wg       *sync.WaitGroup
	c        chan struct{}
	due      atomic.Int64 // when to wake, as time since clockBase
	sleeping bool         // the loop's: a sleeper is out and not yet taken
}

func newNapper(wg *sync.WaitGroup) *napper {
	return &napper{wg: wg, c: make(chan struct{}, 1)}
}

// until returns the channel that wakes at due. A sleeper already out
// takes the new due when its nap ends: a due moved later is kept, one
// moved sooner is a little late.
func (n *napper) until(due time.Time) <-chan struct{} {
	n.due.Store(int64(due.Sub(clockBase)))
	if !n.sleeping {
		n.sleeping = true
		n.wg.Add(1)
		go n.sleep()
	}
	return n.c
}

// woke notes the wake-up taken.
func (n *napper) woke() { n.sleeping = false }

func (n *napper) sleep() {
	defer n.wg.Done()
	for {
		wait := time.Duration(n.due.Load()) - time.Since(clockBase)
		if wait <= 0 {
			break
		}
		nap(wait)
	}
	n.c <- struct{}{}
}

// changed takes in a notification of the store.
func (b *hub) changed(p *watchPlan) {
	defer b.changesTaken.Add(1)
	// A notification that says how far the log goes needs no read: the
	// waiters it wakes read what is new. Below the head it is the core's
	// own commit or one it has seen.
	if b.heads != nil {
		if b.learn() > 0 {
			return
		}
		p.notifiedAfter(time.Now())
		return
	}
	now := time.Now()
	p.notified(now, b.h.own.likely(now), b.h.own.wroteWithin(now, quietSpell), b.interest.Load() > 0)
}

// readHead reads the store's head, bumps the hub to it, and tells p.
func (b *hub) readHead(p *watchPlan, start time.Time) {
	switch {
	case !p.settleFirst.IsZero():
		b.settledReads.Add(1)
	case !p.ownFirst.IsZero():
		b.ownReads.Add(1)
	}
	b.mu.Lock()
	seen := b.head
	b.mu.Unlock()
	var head int64
	err := b.h.st.View(b.ctx, func(tx driver.ReadTx) error {
		var err error
		head, err = tx.Head(b.ctx)
		return err
	})
	if err != nil && b.ctx.Err() == nil {
		b.h.opts.Logger.Debug("agentspace: reading the event head failed", "err", err)
	}
	p.read(start, err == nil && b.sawHead(head, seen))
}

// Rewinds. A store's event log may lose its tail: a database failed over
// to an asynchronous replica that had not received the last commits. The
// head then goes back, and the seqs past it are handed out again, to
// other events. The hub and each subscription notice it, so that a
// follower never takes a second event for a seq it was delivered (see
// logMark); they end with workspace.ErrRewound.

// rewoundLocked takes in that the store's log went back below what the
// hub had seen: it forgets the events it kept, whose seqs the log may
// now give to others, and wakes every waiter, so that subscriptions read
// the log and find out. The head stays: it only ever goes up.
func (b *hub) rewoundLocked() {
	b.recent = nil
	close(b.ch)
	b.ch = make(chan struct{})
}

// sawHead takes in a head read from the store in a read that began when
// the hub's head was seen: a head below that means the log was rewound
// (the hub's head may have moved on meanwhile, by commits the read did
// not see). It reports whether the head advanced.
func (b *hub) sawHead(head, seen int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if head < seen {
		b.h.opts.Logger.Warn("agentspace: the event log's head went back: the store lost events it had acknowledged (a failover to a replica behind?)",
			"head", head, "seen", seen)
		b.rewoundLocked()
		return false
	}
	return b.bumpLocked(head)
}

// logMark is what a subscription knows of the log at its cursor: the
// event at seq, by its stored hash or, where it was served from memory,
// by its canonical body. Each read from the store that moves the cursor
// first checks that the event at the mark is still the one it was
// (check), so a follower that saw seq N and the log then lost it finds
// out instead of being delivered a different event N, or N+1 of another
// history. A mark of seq 0 checks nothing.
type logMark struct {
	seq  int64
	hash []byte
	body []byte
}

// markOf is the mark of an event delivered from memory.
func markOf(e workspace.Event) logMark { return logMark{seq: e.Seq, body: driver.ChainBody(e)} }

// errRewound is the error of a rewind a subscription found.
func errRewound(format string, args ...any) error {
	return fmt.Errorf("events: %w: "+format, append([]any{workspace.ErrRewound}, args...)...)
}

// check verifies, in the read that got page for the cursor after, that
// the log still holds what the subscription was delivered, and returns
// the mark at the page's end.
func (m logMark) check(ctx context.Context, tx driver.ReadTx, after int64, page workspace.EventPage) (logMark, error) {
	if page.Head < after {
		if m.seq == 0 {
			// Nothing delivered yet: the cursor is the caller's (a
			// resumed stream's Last-Event-ID), past anything this log
			// holds.
			return m, errRewound("seq %d is past the log's head %d: the log lost its tail since, or is another log; re-read the state, then resume from the head (after=%d), or read the whole log again (after=0)", after, page.Head, page.Head)
		}
		return m, errRewound("the log's head is %d, but seq %d was delivered", page.Head, after)
	}
	cr := tx
	if page.Next == m.seq {
		return m, nil
	}
	if m.seq > 0 {
		at, err := chainAt(ctx, cr, m.seq)
		if err != nil {
			return m, err
		}
		switch {
		case at == nil:
			// Gone: compacted (readPage checked the floor against the
			// cursor, not the mark), or lost.
			floor, err := tx.Floor(ctx)
			if err != nil {
				return m, err
			}
			if floor <= m.seq {
				return m, errRewound("seq %d, delivered, is no longer in the log", m.seq)
			}
		case m.hash != nil && at.Hash != nil && !bytes.Equal(m.hash, at.Hash),
			(m.hash == nil || at.Hash == nil) && !bytes.Equal(m.body, driver.ChainBody(at.Event)):
			return m, errRewound("the log holds another event at seq %d than the one delivered", m.seq)
		}
	}
	if n := len(page.Events); n > 0 && page.Events[n-1].Seq == page.Next {
		return markOf(page.Events[n-1]), nil
	}
	if page.Next == 0 {
		return logMark{}, nil
	}
	at, err := chainAt(ctx, cr, page.Next)
	if err != nil || at == nil {
		// Below the floor or not there: nothing to mark.
		return logMark{}, err
	}
	return logMark{seq: at.Event.Seq, hash: at.Hash, body: driver.ChainBody(at.Event)}, nil
}

// chainAt reads the event numbered seq with its hash, or nil when the
// log does not hold it.
func chainAt(ctx context.Context, cr driver.ReadTx, seq int64) (*driver.ChainedEvent, error) {
	evs, err := cr.ChainEvents(ctx, seq-1, 1)
	if err != nil || len(evs) == 0 || evs[0].Event.Seq != seq {
		return nil, err
	}
	return &evs[0], nil
}

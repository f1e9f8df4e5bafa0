package driver

import (
	"sync/atomic"
	"time"
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
// that find nothing look again at growing steps, from firstStep up to
// poll.
type watchPlan struct {
	notifies  bool          // the store notifies; else it is polled
	early     bool          // its notifications may come before their commit is readable
	poll      time.Duration // the longest step between reads while one is pending
	tail      time.Duration // how long a notification without a seq stays pending
	firstStep time.Duration // the look-agains' first step

	due    time.Time // the next read; zero: none
	ladder bool      // due is a look-again's
	step   time.Duration
	// last is when the latest notification without a seq came; confirm
	// is set while a notification that follows its commit waits for a
	// read.
	last    time.Time
	confirm bool
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
	p := &watchPlan{notifies: notifies, early: early, poll: poll, tail: tail, firstStep: time.Millisecond}
	if early {
		p.firstStep = 2 * settleDelay
	}
	p.firstStep = min(p.firstStep, poll)
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
// says it ended a transaction within quietSpell.
func (p *watchPlan) notified(now time.Time, own, wrote bool) {
	quiet := now.Sub(p.last) >= quietSpell && !wrote
	p.last, p.step = now, 0
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
	p.ownFirst, p.settleFirst, p.confirm = time.Time{}, time.Time{}, false
	p.due, p.ladder = time.Time{}, false
	if !p.pending(start) {
		p.step = 0
		return
	}
	if moved {
		p.step = 0
	}
	p.step = min(max(2*p.step, p.firstStep), p.poll)
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
// rather than on a runtime timer, which may fire a millisecond late.
const napUnder = time.Millisecond

func (b *hub) watchLoop() {
	defer b.wg.Done()
	poll := b.h.opts.PollInterval
	tick := poll
	if b.changes != nil {
		// Notifications carry the news; the tick only guards against a lost one.
		tick = max(poll*20, time.Second)
	}
	early := false
	if en, ok := b.h.st.(EarlyNotifier); ok && b.changes != nil && b.heads == nil {
		early = en.NotifiesEarly()
	}
	p := newWatchPlan(b.changes != nil, early, poll, tick)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		var ticks, alarm <-chan time.Time
		reached := false
		if b.interest.Load() > 0 {
			ticks = ticker.C
			if !p.due.IsZero() {
				switch wait := time.Until(p.due); {
				case wait <= 0:
					reached = true
				case wait < napUnder:
					nap(wait)
					reached = true
				default:
					timer.Reset(wait)
					alarm = timer.C
				}
			}
		}
		if reached {
			if b.ctx.Err() != nil {
				return
			}
		} else {
			select {
			case <-b.ctx.Done():
				return
			case <-b.kick:
				p.kicked(time.Now())
			case <-b.changes:
				b.changed(p)
			case <-alarm:
			case <-ticks:
				p.ticked(time.Now())
			}
			timer.Stop()
		}
		if b.interest.Load() == 0 {
			continue
		}
		if now := time.Now(); p.ready(now, b.h.own.likely(now)) {
			b.readHead(p, now)
		}
	}
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
	p.notified(now, b.h.own.likely(now), b.h.own.wroteWithin(now, quietSpell))
}

// readHead reads the store's head, bumps the hub to it, and tells p.
func (b *hub) readHead(p *watchPlan, start time.Time) {
	switch {
	case !p.settleFirst.IsZero():
		b.settledReads.Add(1)
	case !p.ownFirst.IsZero():
		b.ownReads.Add(1)
	}
	var head int64
	err := b.h.st.View(b.ctx, func(tx ReadTx) error {
		var err error
		head, err = tx.Head(b.ctx)
		return err
	})
	if err != nil && b.ctx.Err() == nil {
		b.h.opts.Logger.Debug("agentspace: reading the event head failed", "err", err)
	}
	p.read(start, err == nil && b.bump(head))
}

package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// watchSim plays the watch loop against a store on a controlled clock: it
// feeds a watchPlan the inputs the loop would (notifications, kicks, the
// safety tick), reads when the plan says so, as the loop does, and tracks
// which commits the hub has seen. Commits are serialised, as a store's
// writers are: one becomes readable no sooner than the one before it.
type watchSim struct {
	t       *testing.T
	p       *watchPlan
	heads   bool // the store's notifications carry the seq (Postgres)
	now     time.Time
	tick    time.Duration
	nextTck time.Time
	waiting bool
	// visible[i] is when commit i+1 becomes readable.
	visible []time.Time
	hub     int64 // the hub's head; raise it with seen
	// notifiedAt[i] is when commit i+1 was announced, seenAt[i] when the
	// hub reached it; waits are the times waiting changed, and to what.
	notifiedAt []time.Time
	seenAt     []time.Time
	waits      []simWait
	// notified is the highest seq the store's notifications announced
	// (heads only); a reconnect resets it.
	notified  int64
	published time.Time // the core's last publish (zero: none)
	lockFree  time.Time // when the last commit asked for is readable
	pendings  []simEvent
	reads     int
	log       []string
}

type simWait struct {
	at time.Time
	on bool
}

// seen raises the hub's head to seq.
func (s *watchSim) seen(seq int64) {
	for s.hub < seq {
		s.hub++
		s.seenAt = append(s.seenAt, s.now)
	}
}

type simEvent struct {
	at time.Time
	do func()
}

var simStart = time.Unix(1_000_000, 0)

func newWatchSim(t *testing.T, heads, early bool) *watchSim {
	const poll = 50 * time.Millisecond
	tick := time.Second
	s := &watchSim{t: t, heads: heads, now: simStart, tick: tick, nextTck: simStart.Add(tick)}
	s.p = newWatchPlan(true, early && !heads, poll, tick)
	return s
}

func (s *watchSim) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf("%8v ", s.now.Sub(simStart))+fmt.Sprintf(format, args...))
}

// storeHead is the head a read at now finds.
func (s *watchSim) storeHead() int64 {
	var n int64
	for i, v := range s.visible {
		if v.After(s.now) {
			break
		}
		n = int64(i + 1)
	}
	return n
}

// own reports what ownCommits.likely would.
func (s *watchSim) own() bool {
	return !s.published.IsZero() && s.now.Sub(s.published) < ownPause
}

// at schedules do at t.
func (s *watchSim) at(t time.Time, do func()) {
	s.pendings = append(s.pendings, simEvent{t, do})
	slices.SortStableFunc(s.pendings, func(a, b simEvent) int { return a.at.Compare(b.at) })
}

// commit schedules a commit of another store, asked for at t: it takes
// the store's write lock once the commit before it is readable, is
// announced then (its WAL frames are written) and is readable lag later.
func (s *watchSim) commit(t time.Time, lag time.Duration) {
	s.at(t, func() {
		start := maxTime(s.now, s.lockFree)
		s.lockFree = start.Add(lag)
		s.at(start, func() {
			v := s.now.Add(lag)
			s.visible = append(s.visible, v)
			s.notifiedAt = append(s.notifiedAt, s.now)
			seq := int64(len(s.visible))
			s.logf("commit %d by another store, readable at %v", seq, v.Sub(simStart))
			if s.heads {
				// A head notifier's NOTIFY is sent once the commit is readable.
				s.at(v, func() { s.notified = max(s.notified, seq); s.change() })
				return
			}
			s.change()
		})
	})
}

// ownCommit schedules a commit of the core's own, asked for at t: once
// it has the write lock it is readable, published and announced.
func (s *watchSim) ownCommit(t time.Time) {
	s.at(t, func() {
		start := maxTime(s.now, s.lockFree)
		s.lockFree = start
		s.at(start, func() {
			s.visible = append(s.visible, s.now)
			s.notifiedAt = append(s.notifiedAt, s.now)
			seq := int64(len(s.visible))
			s.logf("own commit %d published", seq)
			s.seen(seq)
			s.published = s.now
			if s.heads {
				s.notified = max(s.notified, seq)
			}
			s.change()
		})
	})
}

// change is the loop taking a notification (b.changed).
func (s *watchSim) change() {
	if s.heads {
		if s.notified > 0 {
			s.seen(s.notified)
			s.logf("notified head %d", s.notified)
			return
		}
		s.logf("notified with no head")
		s.p.notifiedAfter(s.now)
		return
	}
	own := s.own()
	s.logf("notified (own %v)", own)
	s.p.notified(s.now, own, own, s.waiting)
}

// reconnect is a head notifier's listener coming back: what it missed
// is not known.
func (s *watchSim) reconnect(t time.Time) {
	s.at(t, func() {
		s.notified = 0
		s.logf("listener reconnected")
		s.change()
	})
}

func (s *watchSim) setWaiting(t time.Time, w bool) {
	s.at(t, func() {
		s.logf("waiting %v", w)
		if w && !s.waiting {
			s.waiting = true
			s.p.kicked(s.now)
		}
		s.waiting = w
		s.waits = append(s.waits, simWait{s.now, w})
	})
}

// check asserts the invariant after an input.
func (s *watchSim) check() {
	s.t.Helper()
	if !s.p.pending(s.now) {
		return
	}
	bound := max(s.p.poll, ownMax)
	if s.p.due.IsZero() || s.p.due.After(s.now.Add(bound)) {
		s.t.Fatalf("pending with due %v at %v (bound %v)\n%s", s.p.due.Sub(simStart), s.now.Sub(simStart), bound, strings.Join(s.log, "\n"))
	}
}

// run plays the schedule until end, as the loop would.
func (s *watchSim) run(end time.Time) {
	s.t.Helper()
	for {
		next, kind := end, "end"
		if len(s.pendings) > 0 && s.pendings[0].at.Before(next) {
			next, kind = s.pendings[0].at, "event"
		}
		if s.waiting {
			if s.nextTck.Before(next) {
				next, kind = s.nextTck, "tick"
			}
			if !s.p.due.IsZero() && !s.p.due.After(next) {
				next, kind = maxTime(s.p.due, s.now), "due"
			}
		}
		s.now = maxTime(s.now, next)
		switch kind {
		case "end":
			return
		case "event":
			e := s.pendings[0]
			s.pendings = s.pendings[1:]
			e.do()
		case "tick":
			s.nextTck = s.nextTck.Add(s.tick)
			s.p.ticked(s.now)
		}
		for s.now.Before(s.nextTck.Add(-s.tick)) {
			s.nextTck = s.nextTck.Add(s.tick)
		}
		s.check()
		if s.waiting && s.p.ready(s.now, s.own()) {
			s.reads++
			head := s.storeHead()
			moved := head > s.hub
			s.seen(head)
			s.logf("read head %d", head)
			s.p.read(s.now, moved)
			s.check()
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// simInput is one input of the table: it schedules itself at t.
type simInput struct {
	name string
	add  func(s *watchSim, t time.Time)
}

func permutations(in []simInput) [][]simInput {
	if len(in) <= 1 {
		return [][]simInput{slices.Clone(in)}
	}
	var out [][]simInput
	for i := range in {
		rest := append(slices.Clone(in[:i]), in[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]simInput{in[i]}, p...))
		}
	}
	return out
}

// TestWatchPlanDeliversEveryCommitInEveryOrderOfItsInputs plays every
// order of the inputs that decide the watch loop's reads, at several
// spacings, on an early store (SQLite's file watch), a store whose
// notifications are not early (json's), and a head notifier (Postgres),
// and checks the invariant after every input and that each commit reaches
// the hub within the bound once it is readable and someone waits.
func TestWatchPlanDeliversEveryCommitInEveryOrderOfItsInputs(t *testing.T) {
	stores := []struct {
		name         string
		heads, early bool
		inputs       []simInput
	}{
		{name: "early", early: true, inputs: earlyInputs()},
		{name: "plain", inputs: earlyInputs()},
		{name: "heads", heads: true, inputs: headInputs()},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			orders := permutations(st.inputs)
			for _, gap := range []time.Duration{0, 200 * time.Microsecond, 700 * time.Microsecond, 3 * time.Millisecond, 40 * time.Millisecond} {
				for _, order := range orders {
					s := newWatchSim(t, st.heads, st.early)
					at := simStart.Add(time.Millisecond)
					// Someone waits at the start; each order's inputs may
					// change that, and someone waits again at the end.
					s.setWaiting(simStart, true)
					var names []string
					for _, in := range order {
						in.add(s, at)
						names = append(names, in.name)
						at = at.Add(gap)
					}
					s.setWaiting(at, true)
					end := at.Add(3 * time.Second)
					s.run(end)
					// Every commit readable by then, with someone waiting,
					// was seen within the bound.
					if want := s.storeHead(); s.hub != want {
						t.Fatalf("gap %v, order %v: hub at %d, store at %d\n%s", gap, names, s.hub, want, strings.Join(s.log, "\n"))
					}
					checkLatency(t, s, names, gap)
				}
			}
		})
	}
}

// checkLatency checks each commit against the bound: seen within
// max(poll, ownMax) of when it was readable and someone waited, or within
// the tick when it became readable tail or more after its notification.
func checkLatency(t *testing.T, s *watchSim, names []string, gap time.Duration) {
	t.Helper()
	for i, v := range s.visible {
		from := s.waitingFrom(v)
		bound := max(s.p.poll, ownMax)
		if v.Sub(s.notifiedAt[i]) >= s.p.tail {
			bound = s.tick
		}
		if late := s.seenAt[i].Sub(from); late > bound {
			t.Fatalf("gap %v, order %v: commit %d seen %v after it was readable with someone waiting (bound %v)\n%s",
				gap, names, i+1, late, bound, strings.Join(s.log, "\n"))
		}
	}
}

// waitingFrom is the first time at or after t when someone waited.
func (s *watchSim) waitingFrom(t time.Time) time.Time {
	on := false
	for _, w := range s.waits {
		if w.at.After(t) {
			if !on && w.on {
				return w.at
			}
		}
		if !w.at.After(t) {
			on = w.on
		}
		if on && !w.at.Before(t) {
			return t
		}
	}
	if on {
		return t
	}
	return s.now
}

func earlyInputs() []simInput {
	return []simInput{
		{"change while nobody waits", func(s *watchSim, t time.Time) {
			s.setWaiting(t, false)
			s.commit(t, 2*time.Millisecond)
		}},
		{"kick", func(s *watchSim, t time.Time) { s.setWaiting(t, true) }},
		{"own commit put off", func(s *watchSim, t time.Time) { s.ownCommit(t) }},
		{"settle in progress", func(s *watchSim, t time.Time) { s.commit(t, 100*time.Microsecond) }},
		{"commit visible late", func(s *watchSim, t time.Time) { s.commit(t, 30*time.Millisecond) }},
		{"commit visible after the ladder", func(s *watchSim, t time.Time) { s.commit(t, 400*time.Millisecond) }},
	}
}

func headInputs() []simInput {
	return []simInput{
		{"change while nobody waits", func(s *watchSim, t time.Time) {
			s.setWaiting(t, false)
			s.commit(t, 0)
		}},
		{"kick", func(s *watchSim, t time.Time) { s.setWaiting(t, true) }},
		{"own commit", func(s *watchSim, t time.Time) { s.ownCommit(t) }},
		{"reconnect", func(s *watchSim, t time.Time) { s.reconnect(t) }},
		{"commit while disconnected", func(s *watchSim, t time.Time) {
			// A commit whose NOTIFY the listener missed, then the reconnect.
			s.at(t, func() {
				s.lockFree = maxTime(s.lockFree, s.now)
				s.visible = append(s.visible, s.now)
				s.notifiedAt = append(s.notifiedAt, s.now.Add(time.Millisecond))
				s.logf("commit %d by another store, NOTIFY lost", len(s.visible))
			})
			s.reconnect(t.Add(time.Millisecond))
		}},
		{"NOTIFY at or below own seq", func(s *watchSim, t time.Time) {
			s.at(t, func() { s.change() })
		}},
	}
}

// TestWatchPlanOwnStreamDoesNotHoldOffAnotherStoresCommit: a commit of
// another store announced within ownPause of the core's own is put off
// with them, yet seen soon: one that lands inside a long stream of the
// core's own commits is below the next of them in the log (its publish
// wakes the waiters, who read it), and one just after the last is read
// once the stream has paused for ownPause.
func TestWatchPlanOwnStreamDoesNotHoldOffAnotherStoresCommit(t *testing.T) {
	for _, early := range []bool{true, false} {
		s := newWatchSim(t, false, early)
		s.setWaiting(simStart, true)
		for i := range 400 {
			s.ownCommit(simStart.Add(time.Duration(i) * 500 * time.Microsecond))
		}
		s.commit(simStart.Add(10*time.Millisecond+100*time.Microsecond), 100*time.Microsecond)
		s.commit(simStart.Add(200*time.Millisecond), 100*time.Microsecond)
		s.run(simStart.Add(3 * time.Second))
		for _, seq := range []int{22, 402} { // after 21 own commits, and after the last
			late := s.seenAt[seq-1].Sub(s.visible[seq-1])
			if late > ownPause+time.Millisecond {
				t.Fatalf("early %v: the other store's commit %d was seen %v after it was readable\n%s", early, seq, late, strings.Join(s.log, "\n"))
			}
		}
	}
}

// TestWatchPlanHeadNotifierReadsNothingForNotificationsItKnows: a
// head notifier's notifications of the core's own commits, or of seqs at
// or below the hub's head, wake nobody and read nothing.
func TestWatchPlanHeadNotifierReadsNothingForNotificationsItKnows(t *testing.T) {
	s := newWatchSim(t, true, false)
	s.setWaiting(simStart, true)
	for i := range 50 {
		at := simStart.Add(time.Duration(i) * time.Millisecond)
		s.ownCommit(at)
		s.at(at.Add(300*time.Microsecond), s.change) // a NOTIFY at or below the head
	}
	s.commit(simStart.Add(60*time.Millisecond), 0)
	s.run(simStart.Add(3 * time.Second))
	if s.reads != 2 { // the safety ticks at 1 s and 2 s
		t.Fatalf("%d reads, want the 2 safety ticks\n%s", s.reads, strings.Join(s.log, "\n"))
	}
	if s.hub != 51 {
		t.Fatalf("hub at %d, want 51", s.hub)
	}
}

// TestWatchPlanReadsABoundedNumberOfTimesAfterANotification: a
// notification costs the look-agains of its ladder and the polls of its
// tail, and no more: the reads a burst of notifications costs a watcher.
func TestWatchPlanReadsABoundedNumberOfTimesAfterANotification(t *testing.T) {
	s := newWatchSim(t, false, true)
	s.setWaiting(simStart, true)
	s.commit(simStart, 100*time.Microsecond)
	s.run(simStart.Add(s.tick - time.Millisecond))
	// 1 settled read, the ladder (1 ms doubling to 50 ms: 7 steps),
	// then a read each 50 ms until the tail ends (1 s).
	if s.reads < 10 || s.reads > 30 {
		t.Fatalf("%d reads after one notification\n%s", s.reads, strings.Join(s.log, "\n"))
	}
}

// TestWatchPlanCommitPutOffWithOwnIsSeenSoonWhateverThePoll: another
// store's commit announced just after the core's own is put off with it,
// and may not be readable when that read runs; the look-agains that
// follow start at a millisecond whatever the poll interval, so it is seen
// within ownMax and a few milliseconds, not a poll interval (a minute
// here, as in the wake tests).
func TestWatchPlanCommitPutOffWithOwnIsSeenSoonWhateverThePoll(t *testing.T) {
	for _, early := range []bool{true, false} {
		for _, lag := range []time.Duration{100 * time.Microsecond, 2 * time.Millisecond, 10 * time.Millisecond} {
			s := newWatchSim(t, false, early)
			s.tick = 20 * time.Minute
			s.nextTck = simStart.Add(s.tick)
			s.p = newWatchPlan(true, early, time.Minute, s.tick)
			s.setWaiting(simStart, true)
			s.ownCommit(simStart.Add(time.Millisecond))
			s.commit(simStart.Add(time.Millisecond+100*time.Microsecond), lag)
			s.run(simStart.Add(2 * time.Minute))
			if late := s.seenAt[1].Sub(s.visible[1]); late > ownMax+4*time.Millisecond {
				t.Fatalf("early %v, lag %v: the other store's commit was seen %v after it was readable\n%s", early, lag, late, strings.Join(s.log, "\n"))
			}
		}
	}
}

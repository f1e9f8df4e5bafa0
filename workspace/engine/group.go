package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// Group commit. Every write of a handle goes through one committer
// goroutine as a job. The committer takes every job that is waiting and runs
// them in one store transaction, so N concurrent writers share one commit
// (one fsync, one NOTIFY) while each job keeps its own conditions, its own
// result and its own error: a job that must be undone makes the group run
// again with a savepoint per job (see errIsolate). A store whose Tx cannot
// take savepoints gets one job per transaction. A writer that would be a
// group of one anyway runs its job itself (runAlone); the turn mutex keeps
// it and the committer from running two groups at once. On a store that
// takes them (LateJoiner), jobs queued while a group's jobs run join it
// before it commits (lateJoin), rather than wait out its commit.

// maxGroup bounds how many jobs share one transaction. A group that runs
// again with a savepoint per job opens as many subtransactions, and a
// Postgres backend caches 64 of them (PGPROC_MAX_CACHED_SUBXIDS): one more
// overflows the cache and slows every snapshot on the server while the
// transaction lasts. Groups of 64 already share a commit among enough
// writers that a larger one would save next to nothing.
const maxGroup = 64

// Whether the store's transactions take savepoints, learnt from the first one.
const (
	savepointsUnknown = iota
	savepointsYes
	savepointsNo
)

// job is one unit of work for the committer: a batch, or a single write
// that is not a batch op (a claim, a lease).
type job struct {
	ctx     context.Context
	actor   string
	idemKey string // scoped to the actor: see idemScope
	// fingerprint identifies the request, so a key reused for another
	// request is refused rather than answered with the wrong result.
	fingerprint string
	prune       bool
	// hints are the records the job's ops read first, in op order.
	hints []driver.ReadHint
	// apply runs the job's writes on x and records its results in the job.
	apply func(ctx context.Context, x *exec) error
	// authorize, when set, checks the job's ops against the policy on x
	// without writing: a replay of an idempotent request is checked again.
	authorize func(ctx context.Context, x *exec) error

	// Set by the committer before done is closed.
	res      workspace.BatchResult
	events   []workspace.Event
	conflict *workspace.ConflictError
	refused  refusal
	message  string
	err      error
	done     chan struct{}
}

func (j *job) reset() {
	j.res, j.events, j.conflict, j.message, j.err = workspace.BatchResult{}, nil, nil, "", nil
	j.refused = refusal{}
}

// submit runs j alone or hands it to the committer, and waits for its
// outcome, which is always definite: a job whose ctx ends before its
// transaction starts is not run; once started, the transaction is
// cancelled only if every caller in its group has given up, and the caller
// gets what really happened.
func (h *handle) submit(ctx context.Context, j *job) error {
	if err := h.alive(); err != nil {
		return err
	}
	j.ctx = ctx
	j.done = make(chan struct{})
	if ran, err := h.runAlone(j); ran {
		return err
	}
	h.writers.queued.Add(1)
	select {
	case h.jobs <- j:
	case <-ctx.Done():
		h.writers.queued.Add(-1)
		return ctx.Err()
	case <-h.ctx.Done():
		h.writers.queued.Add(-1)
		return workspace.ErrClosed
	}
	<-j.done
	return j.err
}

// runAlone runs j on the caller's goroutine, sparing it the hand-over to
// the committer and back, when j would be a group of one anyway: the last
// transaction saw no other writer, none is queued, and no group is being
// gathered or run. It reports whether it ran j.
func (h *handle) runAlone(j *job) (bool, error) {
	if !h.writers.tryAlone() {
		return false, nil
	}
	defer h.writers.turn.Unlock()
	if h.hub.ctx.Err() != nil {
		return true, workspace.ErrClosed
	}
	// Writers that came meanwhile wait for the committer, and the next
	// writer joins them: runCounted counts them.
	answer(h.runCounted(h.hub.ctx, &gathering{jobs: []*job{j}}))
	return true, j.err
}

// runCounted runs jobs' transaction, the turn held, and leaves for the
// next group how long it took and how many writers it saw: its jobs (and a
// carried one) and those queued behind it, counted before they are
// answered so that none of them, back already, counts twice. It returns
// the jobs to answer.
func (h *core) runCounted(ctx context.Context, g *gathering) []*job {
	start := time.Now()
	h.own.begin()
	// A transaction under way when the core closes finishes (close waits
	// for the turn), so its writers get its real outcome, not the
	// cancellation's: it ends early only when they have all given up.
	done := h.runGroup(context.WithoutCancel(ctx), g)
	end := time.Now()
	h.own.end(end)
	n := len(g.jobs)
	if g.carry != nil {
		n++
	}
	h.writers.ran(n, end.Sub(start))
	h.stats.ran(len(g.jobs), end.Sub(start))
	return done
}

// commitCounters count a core's groups since it opened: what
// CommitStats reports. A group is added once it has run (its gathering
// once it is closed); a reader loads the counters one by one, so a group
// that ends meanwhile may be in some and not yet in the others.
type commitCounters struct {
	groups, writes, running, gathering atomic.Int64
}

// ran counts a group of n jobs whose transactions took d.
func (c *commitCounters) ran(n int, d time.Duration) {
	c.groups.Add(1)
	c.writes.Add(int64(n))
	c.running.Add(int64(d))
}

// CommitStats reports the group commit's counters of the store this
// handle writes to, shared by the handles that share it.
func (h *handle) CommitStats() workspace.CommitStats {
	s := &h.stats
	return workspace.CommitStats{
		Groups:    s.groups.Load(),
		Writes:    s.writes.Load(),
		Running:   time.Duration(s.running.Load()),
		Gathering: time.Duration(s.gathering.Load()),
	}
}

// writers is the group commit's account of a core's writers: what
// decides whether a writer runs its job itself and how long the committer
// waits for more. Each fact keeps one rule:
//
//   - queued counts the writers that are handing a job to the committer
//     and whose job it has not yet taken with the turn held: a writer
//     counts itself before it sends and uncounts itself if it gives up;
//     the committer uncounts a job only once it holds the turn. So no
//     writer runs alone ahead of a queued one.
//   - turn is held by whoever gathers and runs a group (the committer, or
//     a writer running its job alone): one transaction at a time; the
//     hub's close takes it for good.
//   - expect and lastRun describe the last transaction, written with the
//     turn held and before its writers are answered: expect counts its
//     jobs (and a job it carried) and those queued behind it, so none of
//     them, back already, counts twice; lastRun is how long it took.
type writers struct {
	queued  atomic.Int64
	turn    sync.Mutex
	expect  atomic.Int64
	lastRun time.Duration // guarded by turn
}

// tryAlone takes the turn for a writer to run its job itself, when the
// job would be a group of one anyway: the last transaction saw no other
// writer, none is queued, and no group is being gathered or run. It
// reports whether the caller now holds the turn.
func (w *writers) tryAlone() bool {
	return w.expect.Load() <= 1 && w.queued.Load() == 0 && w.turn.TryLock()
}

// ran records the transaction that just ran, the turn held: it had n jobs
// (a carried one counted) and took d.
func (w *writers) ran(n int, d time.Duration) {
	w.lastRun = d
	w.expect.Store(int64(n) + w.queued.Load())
}

// waitFor is how long the committer, holding the turn, waits for the
// writers it expects (at most limit and half the last transaction's
// time), and how many it expects.
func (w *writers) waitFor(limit time.Duration) (wait time.Duration, expect int) {
	return min(limit, w.lastRun/2), int(w.expect.Load())
}

// clockBase is the process's start on the monotonic clock: times kept in
// atomics are durations since it.
var clockBase = time.Now()

// answer tells the jobs' writers their outcome.
func answer(jobs []*job) {
	for _, j := range jobs {
		close(j.done)
	}
}

// committer runs until the handle closes, then fails what is still queued.
//
// It starts a transaction with every job that is waiting, and then, when
// the last transaction saw more writers than it has (the jobs it ran and
// those that queued behind it), waits for them a little: their writers
// were answered a moment ago and are coming back. The wait ends when as
// many jobs are in hand, and lasts at most Options.GroupWait and half the
// last transaction's time, so that a writer that does not come back costs
// the others at most half a transaction, once (the next group expects one
// writer fewer); with one writer there is nothing to wait for. Writers
// that reach the store through a server come back after an HTTP round
// trip, which on a busy machine takes about as long as a transaction: a
// shorter wait misses them, and c writers settle into groups of about
// c/2 again, each paying a commit's fixed cost.
func (h *core) committer() {
	defer h.hub.wg.Done()
	ctx := h.hub.ctx
	var carry *job
	for {
		g := gathering{keys: map[string]bool{}}
		if carry != nil {
			h.writers.turn.Lock()
			g.add(carry)
			carry = nil
		} else {
			select {
			case j := <-h.jobs:
				// j counts as queued until the committer has the turn
				// (a writer running alone may have it), so that no
				// writer runs alone ahead of it.
				h.writers.turn.Lock()
				h.take(&g, j)
			case <-ctx.Done():
				h.drain()
				return
			}
		}
		// Gathering counts from the group's first job in hand to its
		// transaction's start.
		gathered := time.Now()
		// The writers the last group answered are runnable but may not
		// have run yet: let them submit their next job, so that they join
		// this group rather than wait out a whole transaction for the
		// next one (without it, c writers settle into alternating groups
		// of about c/2).
		runtime.Gosched()
		h.gather(&g, nil, maxGroup)
		if wait, expect := h.writers.waitFor(h.opts.GroupWait); wait > 0 && len(g.jobs) < expect {
			timer := time.NewTimer(wait)
			h.gather(&g, timer.C, min(expect, maxGroup))
			timer.Stop()
		}
		h.stats.gathering.Add(int64(time.Since(gathered)))
		done := h.runCounted(ctx, &g)
		carry = g.carry
		h.writers.turn.Unlock()
		answer(done)
	}
}

// gathering is a group being gathered.
type gathering struct {
	jobs []*job
	keys map[string]bool // the group's idempotency keys
	// carry is a job that cannot join the group (its key is in it), which
	// closed the group and starts the next.
	carry *job
}

// add adds j to the group, or makes it the carry: two jobs with one
// idempotency key never share a transaction, as the second must see the
// first's result.
func (g *gathering) add(j *job) {
	if j.idemKey != "" {
		if g.keys[j.idemKey] {
			g.carry = j
			return
		}
		g.keys[j.idemKey] = true
	}
	g.jobs = append(g.jobs, j)
}

// take adds j, received from the queue, to g.
func (h *core) take(g *gathering, j *job) {
	h.writers.queued.Add(-1)
	g.add(j)
}

// gather adds queued jobs to g until it holds n or is closed, and, with
// stop nil, until none is waiting; otherwise until stop fires.
func (h *core) gather(g *gathering, stop <-chan time.Time, n int) {
	for len(g.jobs) < n && g.carry == nil {
		if stop == nil {
			select {
			case j := <-h.jobs:
				h.take(g, j)
				continue
			default:
				return
			}
		}
		select {
		case j := <-h.jobs:
			h.take(g, j)
		case <-stop:
			return
		}
	}
}

// lateJoin takes the jobs queued since g's transaction began, for it to
// run too, as gather would (up to maxGroup, none after a carry), while a
// caller in it still waits (waiting > 0): once they have all given up, the
// transaction is being cancelled, and a job taken then is carried to the
// next group instead. Jobs whose callers have given up are answered, not
// returned.
func (h *core) lateJoin(g *gathering, waiting *atomic.Int64) []*job {
	var more []*job
	for len(g.jobs) < maxGroup && g.carry == nil {
		var j *job
		select {
		case j = <-h.jobs:
		default:
			return more
		}
		h.take(g, j)
		if g.carry == j {
			return more
		}
		if gaveUp(j) {
			continue
		}
		if !addCaller(waiting) {
			g.jobs = g.jobs[:len(g.jobs)-1]
			g.carry = j
			return more
		}
		more = append(more, j)
	}
	return more
}

// addCaller counts one more caller a transaction waits for, unless none
// waits any more (the transaction is then being cancelled, and the count
// stays 0).
func addCaller(waiting *atomic.Int64) bool {
	for {
		w := waiting.Load()
		if w == 0 {
			return false
		}
		if waiting.CompareAndSwap(w, w+1) {
			return true
		}
	}
}

// gaveUp answers j, not run, if its caller has given up.
func gaveUp(j *job) bool {
	err := j.ctx.Err()
	if err != nil {
		j.err = err
		close(j.done)
	}
	return err != nil
}

func (h *core) drain() {
	for {
		select {
		case j := <-h.jobs:
			h.writers.queued.Add(-1)
			j.err = workspace.ErrClosed
			close(j.done)
		default:
			return
		}
	}
}

// runGroup commits the live jobs of g in one transaction, with the jobs
// that join it late (added to g). It answers the jobs it does not run
// (their ctx ended) and those it runs one by one; the jobs of a shared
// transaction it returns, outcomes set, for the caller to answer once it
// has counted the writers and let go of the turn.
func (h *core) runGroup(ctx context.Context, g *gathering) []*job {
	live := g.jobs[:0:0]
	for _, j := range g.jobs {
		if !gaveUp(j) {
			live = append(live, j)
		}
	}
	if len(live) == 0 {
		return nil
	}
	if len(live) > 1 && h.savepoints.Load() != savepointsYes {
		// Until a transaction has shown it takes savepoints, and forever
		// if it does not, each job gets a transaction of its own.
		for _, j := range live {
			answer(h.runGroup(ctx, &gathering{jobs: []*job{j}}))
		}
		return nil
	}
	// The transaction ends early only when every caller in it has given up.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var waiting atomic.Int64
	waiting.Store(int64(len(live)))
	var stops []func() bool
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	watch := func(j *job) {
		stops = append(stops, context.AfterFunc(j.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		}))
	}
	for _, j := range live {
		watch(j)
	}
	// committed is what the transaction appended to the log, numbered.
	var committed []workspace.Event
	// A group first runs without a savepoint per job (see errIsolate);
	// isolate is set for the run again with them.
	isolate := false
	update := h.st.Update
	if hu, ok := h.st.(driver.HintedUpdater); ok {
		var hints []driver.ReadHint
		for _, j := range live {
			for _, h := range j.hints {
				if !slices.Contains(hints, h) {
					hints = append(hints, h)
				}
			}
		}
		if len(hints) > 0 {
			update = func(ctx context.Context, fn func(tx driver.Tx) error) error {
				return hu.UpdateHinted(ctx, hints, fn)
			}
		}
	}
	fn := func(tx driver.Tx) error {
		committed = nil
		now := tx.Now()
		sp, ok := tx.(driver.Savepointer)
		if ok {
			h.savepoints.Store(savepointsYes)
		} else {
			h.savepoints.Store(savepointsNo)
		}
		// optimistic: several jobs share the transaction without
		// savepoints, which they would get on a run again.
		optimistic := ok && len(live) > 1 && !isolate
		if len(live) == 1 || optimistic {
			sp = nil // nothing to isolate it from, or not yet
		}
		var (
			all    []workspace.Event
			starts = make([]int, 0, len(live)) // each job's first event in all
		)
		for i := 0; ; i++ {
			if i == len(live) {
				// Jobs queued while this group's jobs ran join it, if
				// the store takes them at no extra cost (see lateJoin);
				// a run again with savepoints runs the jobs it has.
				if !optimistic || !h.late {
					break
				}
				more := h.lateJoin(g, &waiting)
				if len(more) == 0 {
					break
				}
				for _, j := range more {
					watch(j)
				}
				live = append(live, more...)
			}
			j := live[i]
			j.reset()
			starts = append(starts, len(all))
			if wrote, err := h.runJob(ctx, tx, sp, now, j); err != nil {
				switch {
				case optimistic && (wrote || !conditionFailed(err)):
					return errIsolate
				case sp == nil && !optimistic:
					return err
				}
				j.err = err
				if j.conflict != nil {
					all = append(all, conflictEvent(j.actor, now, j.conflict, j.message))
				}
				if j.refused.err != nil {
					all = append(all, deniedEvent(j.actor, now, j.refused))
				}
				continue
			}
			if !j.res.Replayed {
				all = append(all, j.events...)
			}
		}
		if len(all) > 0 {
			first, err := tx.AppendEvents(ctx, all)
			if err != nil {
				return err
			}
			for k := range all {
				all[k].Seq = first + int64(k)
			}
			committed = all
			for i, j := range live {
				if j.err != nil || j.res.Replayed {
					continue
				}
				for k := range j.events {
					j.events[k].Seq = first + int64(starts[i]+k)
				}
			}
		}
		prune := false
		for _, j := range live {
			if j.err != nil || j.idemKey == "" || j.res.Replayed {
				continue
			}
			j.res.Events = j.events
			enc, err := json.Marshal(idemRecord{Fingerprint: j.fingerprint, Result: j.res})
			if err != nil {
				return err
			}
			if j.prune && !prune {
				prune = true
				if err := tx.PruneIdempotent(ctx, now); err != nil {
					return err
				}
			}
			if err := tx.PutIdempotent(ctx, j.idemKey, enc, now.Add(h.opts.IdempotencyTTL)); err != nil {
				return err
			}
		}
		return nil
	}
	err := update(ctx, fn)
	if errors.Is(err, errIsolate) {
		isolate = true
		err = update(ctx, fn)
	}
	for _, j := range live {
		switch {
		case err != nil && errors.Is(err, context.Canceled) && j.ctx.Err() != nil:
			// The transaction ended because every caller in it gave up:
			// each is told its own reason (its deadline, say), not the
			// group's cancellation.
			j.err = j.ctx.Err()
		case err != nil && len(live) == 1:
			j.err = err
			if j.conflict != nil {
				h.recordConflict(ctx, j.actor, j.conflict, j.message)
			}
			if j.refused.err != nil {
				h.recordDenied(ctx, j.refused.err, j.refused.subject)
			}
		case err != nil && j.err == nil:
			j.err = err
		case j.err == nil && !j.res.Replayed:
			j.res.Events = j.events
		}
	}
	if err == nil {
		// Every event the group committed, conflict events of failed
		// jobs included: waiters wake, and subscribers that are caught up
		// take them from memory.
		h.hub.publish(committed)
	}
	return live
}

// runJob runs one job inside the group's transaction, in a savepoint when sp
// is set. On error its writes are rolled back (with sp) and the error
// returned; wrote says whether it had written anything.
func (h *core) runJob(ctx context.Context, tx driver.Tx, sp driver.Savepointer, now time.Time, j *job) (wrote bool, err error) {
	if j.idemKey != "" {
		stored, err := tx.Idempotent(ctx, j.idemKey, now)
		switch {
		case err == nil:
			var rec idemRecord
			if err := json.Unmarshal(stored, &rec); err != nil {
				return false, fmt.Errorf("idempotency key: stored result is corrupt: %w", err)
			}
			if rec.Fingerprint != j.fingerprint {
				return false, invalid("idempotency key", "was used by %q for a different request within its retention", j.actor)
			}
			// A replay is a request of its own: an actor that has lost the
			// right since gets no success for a write it may no longer do
			// (nor the records it may no longer read), and the refusal says
			// the first request committed, so it is not taken for undone.
			if j.authorize != nil {
				x := &exec{h: h, tx: writeMarker{Tx: tx, wrote: &wrote}, actor: j.actor, now: now, refused: &j.refused}
				if err := j.authorize(ctx, x); err != nil {
					var fe *workspace.ForbiddenError
					if errors.As(err, &fe) {
						fe.Reason += "; " + replayedNote(rec.Result)
					}
					return false, err
				}
			}
			j.res = rec.Result
			j.res.Replayed = true
			j.events = j.res.Events
			return false, nil
		case !errors.Is(err, workspace.ErrNotFound):
			return false, err
		}
	}
	if sp != nil {
		if err := sp.Savepoint(ctx); err != nil {
			return false, err
		}
	}
	x := &exec{h: h, tx: writeMarker{Tx: tx, wrote: &wrote}, actor: j.actor, now: now, refused: &j.refused}
	if err := j.apply(ctx, x); err != nil {
		if sp != nil {
			if rerr := sp.RollbackSavepoint(ctx); rerr != nil {
				return wrote, errors.Join(err, rerr)
			}
		}
		return wrote, err
	}
	if sp != nil {
		if err := sp.ReleaseSavepoint(ctx); err != nil {
			return wrote, err
		}
	}
	j.events = x.events
	return wrote, nil
}

// Groups without savepoints. Most jobs of a group succeed, or fail on a
// condition checked before they write (a version, a lease, a missing
// record), so a group first runs without a savepoint per job: a job that
// fails that way has nothing to undo, and the transaction goes on. A job
// that fails after it wrote, or on anything else (an error of the store
// may have aborted the transaction), makes runGroup roll the transaction
// back and run the group again with a savepoint per job. W1 at c=16 on
// one Postgres store: +8% without the savepoints.

// errIsolate ends a group's transaction that must run again with a
// savepoint per job.
var errIsolate = errors.New("workspace: the group runs again with a savepoint per job")

// conditionFailed reports whether err is a job's refusal on a condition
// the engine checks from what it read (not an error of the store, which
// may have aborted the transaction).
func conditionFailed(err error) bool {
	for _, e := range []error{workspace.ErrNotFound, workspace.ErrAlreadyExists, workspace.ErrConflict, workspace.ErrLocked, workspace.ErrNotHolder,
		workspace.ErrLockLost, workspace.ErrStaleFence, workspace.ErrNoTask, workspace.ErrInvalid, workspace.ErrTooLarge, workspace.ErrForbidden} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// writeMarker is a job's Tx: it notes whether the job wrote. It overrides
// every write of Tx a job makes (the group's own, the events and the
// idempotency records, come after the jobs); TestWriteMarkerMarksEveryWrite
// keeps the list whole.
type writeMarker struct {
	driver.Tx
	wrote *bool
}

func (w writeMarker) PutArtifact(ctx context.Context, a workspace.Artifact, content []byte) error {
	*w.wrote = true
	return w.Tx.PutArtifact(ctx, a, content)
}

func (w writeMarker) DeleteArtifact(ctx context.Context, id string) error {
	*w.wrote = true
	return w.Tx.DeleteArtifact(ctx, id)
}

func (w writeMarker) PutTask(ctx context.Context, t workspace.Task) error {
	*w.wrote = true
	return w.Tx.PutTask(ctx, t)
}

func (w writeMarker) PutNote(ctx context.Context, n workspace.Note) error {
	*w.wrote = true
	return w.Tx.PutNote(ctx, n)
}

func (w writeMarker) DeleteNote(ctx context.Context, kind, key string) error {
	*w.wrote = true
	return w.Tx.DeleteNote(ctx, kind, key)
}

func (w writeMarker) PutLease(ctx context.Context, l workspace.Lease) error {
	*w.wrote = true
	return w.Tx.PutLease(ctx, l)
}

func (w writeMarker) DeleteVersions(ctx context.Context, id string, versions []int64) error {
	*w.wrote = true
	return w.Tx.DeleteVersions(ctx, id, versions)
}

func (w writeMarker) DeleteTask(ctx context.Context, id string) (bool, error) {
	*w.wrote = true
	return w.Tx.DeleteTask(ctx, id)
}

func (w writeMarker) PutIdempotent(ctx context.Context, key string, result []byte, expires time.Time) error {
	*w.wrote = true
	return w.Tx.PutIdempotent(ctx, key, result, expires)
}

func (w writeMarker) PruneIdempotent(ctx context.Context, now time.Time) error {
	*w.wrote = true
	return w.Tx.PruneIdempotent(ctx, now)
}

func (w writeMarker) AppendEvents(ctx context.Context, events []workspace.Event) (int64, error) {
	*w.wrote = true
	return w.Tx.AppendEvents(ctx, events)
}

func (w writeMarker) CompactEvents(ctx context.Context, floor int64) error {
	*w.wrote = true
	return w.Tx.CompactEvents(ctx, floor)
}

func (w writeMarker) SetChainBase(ctx context.Context, hash []byte) error {
	*w.wrote = true
	return w.Tx.SetChainBase(ctx, hash)
}

func conflictEvent(actor string, now time.Time, c *workspace.ConflictError, msg string) workspace.Event {
	ev := workspace.Event{
		Time:    now,
		Actor:   actor,
		Type:    workspace.EventConflict,
		Subject: c.Subject,
		Version: c.Current,
		Message: fmt.Sprintf("expected version %d, current is %d", c.Expected, c.Current),
	}
	if msg != "" {
		ev.Message += ": " + msg
	}
	return ev
}

// idemRecord is what a batch with an idempotency key stores.
type idemRecord struct {
	Fingerprint string                `json:"fingerprint"`
	Result      workspace.BatchResult `json:"result"`
}

// idemScope makes idempotency keys per actor: two agents that happen to
// pick the same key never receive each other's results. Neither part can
// hold a control character, so the separator is unambiguous.
func idemScope(actor, key string) string { return actor + "\x1f" + key }

// fingerprint hashes a batch's ops, types included.
func fingerprint(ops []workspace.Op) string {
	h := sha256.New()
	for _, op := range ops {
		fmt.Fprintf(h, "%T\n", op)
		enc, err := json.Marshal(op)
		if err != nil { // ops are plain data; this cannot happen
			enc = []byte(err.Error())
		}
		h.Write(enc)
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// replayedNote says, for a refused replay, that its first request
// committed, and where in the log.
func replayedNote(r workspace.BatchResult) string {
	where := ""
	if n := len(r.Events); n > 0 {
		where = fmt.Sprintf(" (events %d to %d)", r.Events[0].Seq, r.Events[n-1].Seq)
	}
	return "the request with this idempotency key committed earlier" + where + ", while it was allowed; its result is withheld"
}

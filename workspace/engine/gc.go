package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/agentspace/agentspace/policy"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

const (
	// defaultGCBatch is the most events one gc transaction removes.
	defaultGCBatch = 10000
	maxGCBatch     = 1000000
	// minGCBatch is where a batch starts, and the least it shrinks to.
	minGCBatch = 16
	// defaultGCBatchTime is how long one gc transaction should hold the
	// store's write lock.
	defaultGCBatchTime = 10 * time.Millisecond
	maxGCBatchTime     = time.Second
)

// GC implements workspace.Collector. It decides the new floor from one
// snapshot, then compacts up to it in short transactions, and records an
// EventGC event.
//
// Invariant: gc holds the store's write lock for one batch at a time, a
// batch sized from the last one's measured time to take about
// p.BatchTime, and after each it rests at least as long as the batch
// took; so a writer waits for at most one batch (about p.BatchTime plus a
// commit) and writers keep at least half of the store's write time. The
// pacing decides only how fast the floor moves, never which events go.
// On a BelowFloorDeleter the events' batches take no lock at all: only
// the one write that raises the floor does (see gcBelowFloor).
func (h *handle) GC(ctx context.Context, p workspace.GCPolicy) (workspace.GCReport, error) {
	if err := h.alive(); err != nil {
		return workspace.GCReport{}, err
	}
	// It removes what writers wrote, as a compaction does: the same admin
	// right, for a caller with a principal (a client of the server,
	// wsctl --as).
	if err := h.allowAdmin(ctx, policy.AdminCompact); err != nil {
		return workspace.GCReport{}, err
	}
	if err := h.checkGCPolicy(&p); err != nil {
		return workspace.GCReport{}, err
	}
	r := workspace.GCReport{DryRun: p.DryRun}
	var (
		target int64
		tasks  []string
		sizes  []int64
		cuts   []versionCut
		msgs   []string
		msizes []int64
	)
	err := h.view(ctx, "gc", func(tx driver.ReadTx) error {
		var err error
		if r.Floor, target, err = gcTarget(ctx, tx, p); err != nil {
			return err
		}
		if tasks, sizes, err = gcTaskPlan(ctx, tx, p); err != nil {
			return err
		}
		if msgs, msizes, err = gcMessagePlan(ctx, tx, p); err != nil {
			return err
		}
		cuts, err = gcVersionPlan(ctx, tx, p, &r.Versions)
		return err
	})
	if err != nil {
		return r, wrapErr("gc", err)
	}
	r.FloorAfter = r.Floor
	if p.DryRun {
		err := h.view(ctx, "gc", func(tx driver.ReadTx) error { return countEvents(ctx, tx, r.Floor, target, &r.Events) })
		if err != nil {
			return r, wrapErr("gc", err)
		}
		r.FloorAfter = max(target, r.Floor)
		r.Tasks.Count = int64(len(tasks))
		for _, n := range sizes {
			r.Tasks.Bytes += n
		}
		r.Messages.Count = int64(len(msgs))
		for _, n := range msizes {
			r.Messages.Bytes += n
		}
		if rc, ok := h.st.(driver.Reclaimer); ok {
			if _, r.Reclaimable, err = rc.Reclaim(ctx, 0); err != nil {
				return r, wrapErr("gc", err)
			}
		}
		return r, nil
	}
	if bd, ok := h.st.(driver.BelowFloorDeleter); ok {
		err = h.gcBelowFloor(ctx, bd, p, target, &r)
	} else {
		err = h.gcEvents(ctx, p, target, &r)
	}
	if err != nil {
		return r, wrapErr("gc", err)
	}
	if err := h.gcTasks(ctx, p, tasks, sizes, &r); err != nil {
		return r, wrapErr("gc", err)
	}
	if err := h.gcVersions(ctx, p, cuts, &r); err != nil {
		return r, wrapErr("gc", err)
	}
	if err := h.gcMessages(ctx, p, msgs, msizes, &r); err != nil {
		return r, wrapErr("gc", err)
	}
	if r.Events.Count == 0 && r.Tasks.Count == 0 && r.Versions.Count == 0 && r.Messages.Count == 0 {
		return r, wrapErr("gc", h.reclaim(ctx, p, &r))
	}
	ev := workspace.Event{Actor: p.Actor, Type: workspace.EventGC, Subject: workspace.Subject{Kind: "workspace"},
		Message: fmt.Sprintf("gc removed %d events (%d bytes) below seq %d, %d artifact versions (%d bytes), %d tasks (%d bytes) and %d messages (%d bytes) in %d batches",
			r.Events.Count, r.Events.Bytes, r.FloorAfter, r.Versions.Count, r.Versions.Bytes, r.Tasks.Count, r.Tasks.Bytes, r.Messages.Count, r.Messages.Bytes, r.Batches)}
	err = h.st.Update(ctx, func(tx driver.Tx) error {
		ev.Time = tx.Now()
		if err := tx.PruneIdempotent(ctx, ev.Time); err != nil {
			return err
		}
		first, err := tx.AppendEvents(ctx, []workspace.Event{ev})
		ev.Seq = first
		return err
	})
	if err != nil {
		return r, wrapErr("gc", err)
	}
	h.hub.publish([]workspace.Event{ev})
	r.Seq = ev.Seq
	return r, wrapErr("gc", h.reclaim(ctx, p, &r))
}

// gcEvents compacts the log up to target in batches under the store's
// write lock, sized and rested as the invariant above says.
func (h *handle) gcEvents(ctx context.Context, p workspace.GCPolicy, target int64, r *workspace.GCReport) error {
	pace := gcPacer{size: min(minGCBatch, p.Batch), max: p.Batch, target: p.BatchTime}
	if lr, ok := h.st.(driver.LogRewriter); ok && lr.RewritesLog() {
		// Each batch costs a rewrite of the log: as few as p allows.
		pace = gcPacer{size: p.Batch, max: p.Batch}
	}
	for from := r.Floor; from < target; {
		to := min(from+pace.size, target)
		if err := h.view(ctx, "gc", func(tx driver.ReadTx) error { return countEvents(ctx, tx, from, to, &r.Events) }); err != nil {
			return err
		}
		var locked time.Time
		err := h.st.Update(ctx, func(tx driver.Tx) error {
			// The write lock is held from here (BEGIN IMMEDIATE on
			// SQLite, the store lock on json) until Update returns.
			locked = time.Now()
			cur, err := tx.Floor(ctx)
			if err != nil || to <= cur {
				return err
			}
			return tx.CompactEvents(ctx, to)
		})
		if err != nil {
			return err
		}
		took := time.Since(locked)
		r.Batches++
		r.FloorAfter = to
		r.LongestBatch = max(r.LongestBatch, took)
		pace.learn(to-from, took)
		from = to
		if c, ok := h.st.(driver.Checkpointer); ok {
			if err := c.Checkpoint(ctx); err != nil {
				return err
			}
		}
		if from < target {
			if err := rest(ctx, took); err != nil {
				return err
			}
		}
	}
	return nil
}

// rest waits after a batch as long as it took (at least a millisecond),
// so that writers keep at least half of the store's write time; it ends
// early with ctx.
func rest(ctx context.Context, took time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(max(took, time.Millisecond)):
		return nil
	}
}

// gcBelowFloor compacts the log of a BelowFloorDeleter up to target: it
// counts what goes from a snapshot, raises the floor in one short write
// (the only time it holds the writers' lock), then deletes the rows below
// the floor in batches that hold no lock a writer waits for, sized and
// rested as the other batches are, since they still share the server's
// I/O and CPU with the writers. A delete runs only below a floor already
// committed, so no reader can miss what it removes.
func (h *handle) gcBelowFloor(ctx context.Context, bd driver.BelowFloorDeleter, p workspace.GCPolicy, target int64, r *workspace.GCReport) error {
	if target <= r.Floor {
		return nil
	}
	if err := h.view(ctx, "gc", func(tx driver.ReadTx) error { return countEvents(ctx, tx, r.Floor, target, &r.Events) }); err != nil {
		return err
	}
	var locked time.Time
	err := h.st.Update(ctx, func(tx driver.Tx) error {
		locked = time.Now()
		fr, ok := tx.(driver.FloorRaiser)
		if !ok {
			return fmt.Errorf("%T deletes below the floor but its transaction cannot raise it", h.st)
		}
		cur, err := tx.Floor(ctx)
		if err != nil || target <= cur {
			return err
		}
		return fr.RaiseFloor(ctx, target)
	})
	if err != nil {
		return err
	}
	took := time.Since(locked)
	r.LongestBatch = max(r.LongestBatch, took)
	r.FloorAfter = target
	// Rows an interrupted gc left below the old floor go first.
	if _, err := bd.DeleteBelowFloor(ctx, 0, r.Floor); err != nil {
		return err
	}
	pace := gcPacer{size: min(minGCBatch, p.Batch), max: p.Batch, target: p.BatchTime}
	for from := r.Floor; from < target; {
		to := min(from+pace.size, target)
		start := time.Now()
		if _, err := bd.DeleteBelowFloor(ctx, from, to); err != nil {
			return err
		}
		took := time.Since(start)
		r.Batches++
		pace.learn(to-from, took)
		from = to
		if from < target {
			if err := rest(ctx, took); err != nil {
				return err
			}
		}
	}
	return nil
}

// reclaim gives free space back with p.Reclaim, in steps paced as the
// batches are, then reports what is left.
func (h *handle) reclaim(ctx context.Context, p workspace.GCPolicy, r *workspace.GCReport) error {
	rc, ok := h.st.(driver.Reclaimer)
	if !ok {
		return nil
	}
	pages := int64(128)
	for p.Reclaim {
		start := time.Now()
		freed, left, err := rc.Reclaim(ctx, pages)
		if err != nil {
			return err
		}
		took := time.Since(start)
		r.Reclaimed += freed
		if freed == 0 || left == 0 {
			break
		}
		if took < p.BatchTime/4 {
			pages = 1024
		} else if took > p.BatchTime {
			pages = 128
		}
		if err := rest(ctx, took); err != nil {
			return err
		}
	}
	if c, ok := h.st.(driver.Checkpointer); ok && r.Reclaimed > 0 {
		if err := c.Checkpoint(ctx); err != nil {
			return err
		}
	}
	_, left, err := rc.Reclaim(ctx, 0)
	r.Reclaimable = left
	return err
}

// gcPacer sizes gc's batches: each from the time the last one held the
// write lock, so that it takes about target, growing or shrinking at most
// twofold per batch (one slow batch, say the one that ran into a WAL
// checkpoint, does not collapse the size), within [minGCBatch, max].
type gcPacer struct {
	size, max int64
	target    time.Duration
}

func (g *gcPacer) learn(n int64, took time.Duration) {
	// A batch cut short by the target floor (the last) says little.
	if n < g.size || g.target == 0 {
		return
	}
	want := n * 2
	if took > 0 {
		want = int64(float64(n) * float64(g.target) / float64(took))
	}
	want = min(max(want, n/2), n*2)
	g.size = min(max(want, minGCBatch), g.max)
}

func (h *handle) checkGCPolicy(p *workspace.GCPolicy) error {
	if err := checkActor(p.Actor); err != nil {
		return err
	}
	switch {
	case p.KeepEvents < 0:
		return invalid("keep events", "%d: a count of events, at least 0", p.KeepEvents)
	case p.MinEvents < 0:
		return invalid("min events", "%d: a count of events, at least 0", p.MinEvents)
	case p.KeepEventsFor < 0:
		return invalid("keep events for", "%v: a duration, at least 0", p.KeepEventsFor)
	case p.KeepVersions < 0:
		return invalid("keep versions", "%d: a count of versions, at least 0", p.KeepVersions)
	case p.KeepTasksFor < 0:
		return invalid("keep tasks for", "%v: a duration, at least 0", p.KeepTasksFor)
	case p.KeepMessagesFor < 0:
		return invalid("keep messages for", "%v: a duration, at least 0", p.KeepMessagesFor)
	case p.Batch < 0 || p.Batch > maxGCBatch:
		return invalid("batch", "%d: between 1 and %d events (0 for %d)", p.Batch, maxGCBatch, defaultGCBatch)
	case p.BatchTime < 0 || p.BatchTime > maxGCBatchTime:
		return invalid("batch time", "%v: between 0 and %v (0 for %v)", p.BatchTime, maxGCBatchTime, defaultGCBatchTime)
	}
	if p.Batch == 0 {
		p.Batch = defaultGCBatch
		if lr, ok := h.st.(driver.LogRewriter); ok && lr.RewritesLog() {
			p.Batch = maxGCBatch
		}
	}
	if p.BatchTime == 0 {
		p.BatchTime = defaultGCBatchTime
	}
	return nil
}

// gcTarget returns the floor now and the floor policy p allows: the
// lowest that any of its rules sets (an event is kept if any rule keeps
// it), the current one if p sets none.
func gcTarget(ctx context.Context, tx driver.ReadTx, p workspace.GCPolicy) (floor, target int64, err error) {
	if floor, err = tx.Floor(ctx); err != nil {
		return 0, 0, err
	}
	head, err := tx.Head(ctx)
	if err != nil {
		return 0, 0, err
	}
	target, set := head+1, false
	if p.KeepEvents > 0 {
		target, set = min(target, head-p.KeepEvents+1), true
	}
	if p.KeepEventsFor > 0 {
		cutoff := tx.Now().Add(-p.KeepEventsFor)
		evs, err := tx.Events(ctx, workspace.EventQuery{AfterSeq: floor - 1, Since: cutoff, Limit: 1})
		if err != nil {
			return 0, 0, err
		}
		young := head + 1
		if len(evs) > 0 {
			young = evs[0].Seq
		}
		target, set = min(target, young), true
	}
	if !set || target < floor || target-floor < p.MinEvents {
		target = floor
	}
	return floor, target, nil
}

// countEvents adds the events with from <= seq < to to k.
func countEvents(ctx context.Context, tx driver.ReadTx, from, to int64, k *workspace.GCKind) error {
	after := from - 1
	for after < to-1 {
		evs, err := tx.Events(ctx, workspace.EventQuery{AfterSeq: after, Limit: archivePage})
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Seq >= to {
				return nil
			}
			k.Count++
			k.Bytes += int64(len(driver.ChainBody(e)))
			after = e.Seq
		}
		if len(evs) < archivePage {
			return nil
		}
	}
	return nil
}

package driver

import (
	"context"
	"fmt"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

const (
	defaultGCBatch = 1000
	maxGCBatch     = 1000000
)

// GC implements workspace.Collector. It decides the new floor from one
// snapshot, then compacts up to it in transactions of p.Batch events each
// (a writer waits for one batch at most), and records an EventGC event.
func (h *handle) GC(ctx context.Context, p workspace.GCPolicy) (workspace.GCReport, error) {
	if err := h.alive(); err != nil {
		return workspace.GCReport{}, err
	}
	if err := checkGCPolicy(&p); err != nil {
		return workspace.GCReport{}, err
	}
	r := workspace.GCReport{DryRun: p.DryRun}
	var target int64
	err := h.view(ctx, "gc", func(tx ReadTx) error {
		var err error
		r.Floor, target, err = gcTarget(ctx, tx, p)
		return err
	})
	if err != nil {
		return r, wrapErr("gc", err)
	}
	r.FloorAfter = r.Floor
	for from := r.Floor; from < target; from += p.Batch {
		to := min(from+p.Batch, target)
		if err := h.view(ctx, "gc", func(tx ReadTx) error { return countEvents(ctx, tx, from, to, &r.Events) }); err != nil {
			return r, wrapErr("gc", err)
		}
		if p.DryRun {
			continue
		}
		began := time.Now()
		err := h.st.Update(ctx, func(tx Tx) error {
			cur, err := tx.Floor(ctx)
			if err != nil || to <= cur {
				return err
			}
			return tx.CompactEvents(ctx, to)
		})
		if err != nil {
			return r, wrapErr("gc", err)
		}
		r.Batches++
		r.FloorAfter = to
		// Pace: rest as long as the batch took, so that writers get at
		// least half of the store's write time while gc runs.
		if to < target {
			select {
			case <-ctx.Done():
				return r, wrapErr("gc", ctx.Err())
			case <-time.After(time.Since(began)):
			}
		}
	}
	if p.DryRun {
		r.FloorAfter = max(target, r.Floor)
		return r, nil
	}
	if r.Events.Count == 0 {
		return r, nil
	}
	ev := workspace.Event{Actor: p.Actor, Type: workspace.EventGC, Subject: workspace.Subject{Kind: "workspace"},
		Message: fmt.Sprintf("gc removed %d events (%d bytes) below seq %d in %d batches", r.Events.Count, r.Events.Bytes, r.FloorAfter, r.Batches)}
	err = h.st.Update(ctx, func(tx Tx) error {
		ev.Time = tx.Now()
		first, err := tx.AppendEvents(ctx, []workspace.Event{ev})
		ev.Seq = first
		return err
	})
	if err != nil {
		return r, wrapErr("gc", err)
	}
	h.hub.publish([]workspace.Event{ev})
	r.Seq = ev.Seq
	return r, nil
}

func checkGCPolicy(p *workspace.GCPolicy) error {
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
	case p.Batch < 0 || p.Batch > maxGCBatch:
		return invalid("batch", "%d: between 1 and %d events (0 for %d)", p.Batch, maxGCBatch, defaultGCBatch)
	case p.Batch == 0:
		p.Batch = defaultGCBatch
	}
	return nil
}

// gcTarget returns the floor now and the floor policy p allows: the
// lowest that any of its rules sets (an event is kept if any rule keeps
// it), the current one if p sets none.
func gcTarget(ctx context.Context, tx ReadTx, p workspace.GCPolicy) (floor, target int64, err error) {
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
func countEvents(ctx context.Context, tx ReadTx, from, to int64, k *workspace.GCKind) error {
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
			k.Bytes += int64(len(ChainBody(e)))
			after = e.Seq
		}
		if len(evs) < archivePage {
			return nil
		}
	}
	return nil
}

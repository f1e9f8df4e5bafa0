package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// A pause is a sealed "pause" note keyed by the actor's name (before any
// "#suffix": a pause of bob covers bob#merger-1). Every write of a paused
// actor that could change the team's state (a batch, a claim, an acquire)
// is refused with a *PausedError, on every backend and behind every
// server. Acks, renewals (lock renew, task heartbeat) and releases pass:
// they answer the operator or keep what the agent holds alive, or give it
// up.
//
// Writers read the pauses from a cache of the core's (pauseCache), not in
// their own transactions, so that a write costs no read more (a Postgres
// write stays one predicted round trip); the writers that find the copy
// expired together share one read (pauseCache.reading). Invariant: a
// pause or resume committed through a core binds that core's writes from
// the moment its events are published (the hub clears the cache before it
// wakes anyone, and neither a read a clear overtook nor one begun before
// the clear is kept or shared), and any other core's within
// Options.PolicyRecheck, the bound the policy itself binds within (0 in
// the DSN: every write reads them).

type pauseRecord struct {
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Message string    `json:"message"` // the pause message's ID
}

// baseActor is actor without a "#suffix": the agent a process lease of
// its (the merge queue's merger#PID-…) belongs to.
func baseActor(actor string) string {
	base, _, _ := strings.Cut(actor, "#")
	return base
}

// paused returns actor's pause, or nil.
func paused(ctx context.Context, tx driver.ReadTx, actor string) (*pauseRecord, error) {
	n, err := tx.Note(ctx, pauseKind, baseActor(actor))
	if errors.Is(err, workspace.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p pauseRecord
	if err := json.Unmarshal([]byte(n.Body), &p); err != nil {
		return nil, fmt.Errorf("pause of %q: stored record is corrupt: %w", n.Key, err)
	}
	return &p, nil
}

// checkPaused refuses a batch of a paused actor unless it only acks.
func (x *exec) checkPaused(ctx context.Context, ops []workspace.Op) error {
	onlyAcks := true
	for _, op := range ops {
		if _, ok := op.(workspace.AckMessageOp); !ok {
			onlyAcks = false
			break
		}
	}
	if onlyAcks {
		return nil
	}
	return x.gate(ctx)
}

// gate refuses a write of x.actor while it is paused (x.paused, read
// from the core's cache before the transaction).
func (x *exec) gate(_ context.Context) error {
	if p := x.paused; p != nil {
		return &workspace.PausedError{Actor: x.actor, By: p.By, Since: p.At}
	}
	return nil
}

// pauseCache is a core's copy of the store's pauses, by actor, and when it
// was read (zero: never, or cleared by a pause or resume of this core's).
type pauseCache struct {
	mu  sync.Mutex
	at  time.Time
	set map[string]pauseRecord
	// gen counts clears: a read that a clear overtook (it may have read
	// before the pause committed) does not install what it read.
	gen uint64
	// pending counts this core's writes that pause or resume an actor and
	// have not yet cleared the cache after their commit. While one is in
	// flight every check reads the store: its commit may be visible to a
	// reader (a woken inbox poll, on a store whose change feed runs ahead
	// of the commit's publication) before the cache is cleared, and a
	// writer woken by the pause message must see the pause.
	pending atomic.Int32
	// reading is the read of the pauses in flight that later checks may
	// wait for instead of reading too: so the writers that find the copy
	// expired together (all of them, under load) cost one read, not one
	// each. It is one only while no pause or resume is pending, and a
	// check waits for it only if no clear came since it began (gen) and
	// none is pending: its answer is then what the copy would hold had
	// it been installed as it began, which such a check would take as
	// fresh.
	reading    *flight[map[string]pauseRecord]
	readingGen uint64 // the cache's gen as reading began
	// reads counts the reads of the pauses, joins the checks that waited
	// for another's (for tests).
	reads, joins atomic.Int64
}

// clear makes the next write read the pauses again.
func (c *pauseCache) clear() {
	c.mu.Lock()
	c.at = time.Time{}
	c.gen++
	c.mu.Unlock()
}

// clearOn clears the cache if evs pause or resume an actor: the hub calls
// it with a commit of its core's before it wakes anyone, so that a writer
// woken by a pause (its pause message) already sees it.
func (c *pauseCache) clearOn(evs []workspace.Event) {
	for _, e := range evs {
		if e.Type == workspace.EventActorPaused || e.Type == workspace.EventActorResumed {
			c.clear()
			return
		}
	}
}

// pauseOf returns actor's pause as the core's cache has it, reading the
// store's pauses when the copy is older than Options.PolicyRecheck, or
// waiting for a read in flight that began recently enough (see
// pauseCache.reading).
func (h *handle) pauseOf(ctx context.Context, actor string) (*pauseRecord, error) {
	c := &h.pauses
	now := time.Now()
	recheck := h.opts.PolicyRecheck
	c.mu.Lock()
	quiet := recheck > 0 && c.pending.Load() == 0
	fresh := quiet && !c.at.IsZero() && now.Sub(c.at) < recheck
	set, gen := c.set, c.gen
	var r *flight[map[string]pauseRecord]
	own := false
	if !fresh {
		switch {
		case quiet && c.reading != nil && c.readingGen == gen && now.Sub(c.reading.start) < recheck:
			r = c.reading
		case quiet:
			r, own = newFlight[map[string]pauseRecord](now), true
			c.reading, c.readingGen = r, gen
		}
	}
	c.mu.Unlock()
	var err error
	switch {
	case fresh:
	case r != nil && !own:
		c.joins.Add(1)
		var again bool
		if set, err, again = r.wait(ctx, "pause"); again {
			set, err = h.readPauses(ctx, now, gen)
		}
	case own:
		set, err = r.fly(ctx, h, &c.mu, &c.reading,
			func() (map[string]pauseRecord, error) { return h.readPauses(ctx, now, gen) }, errPauseReadAborted)
	default:
		set, err = h.readPauses(ctx, now, gen)
	}
	if err != nil {
		return nil, err
	}
	if p, ok := set[baseActor(actor)]; ok {
		return &p, nil
	}
	return nil, nil
}

// errPauseReadAborted answers the checks that waited for a read of the
// pauses that panicked.
var errPauseReadAborted = errors.New("pause: the read of the pauses this write waited for was aborted")

// readPauses reads the store's pauses and installs them as read at now
// unless a clear (gen) or a pending pause or resume came meanwhile.
func (h *handle) readPauses(ctx context.Context, now time.Time, gen uint64) (map[string]pauseRecord, error) {
	c := &h.pauses
	c.reads.Add(1)
	read := map[string]pauseRecord{}
	err := h.storeView(ctx, nil, func(tx driver.ReadTx) error {
		clear(read)
		return eachNote(ctx, tx, pauseKind, func(n workspace.Note) error {
			var p pauseRecord
			if err := json.Unmarshal([]byte(n.Body), &p); err != nil {
				return fmt.Errorf("pause of %q: stored record is corrupt: %w", n.Key, err)
			}
			read[n.Key] = p
			return nil
		})
	})
	if err != nil {
		return nil, wrapErr("pause", err)
	}
	c.mu.Lock()
	if c.gen == gen && c.pending.Load() == 0 && (c.at.IsZero() || c.at.Before(now)) {
		c.at, c.set = now, read
	}
	c.mu.Unlock()
	return read, nil
}

// pauseActor records o.Actor's pause and sends it the pause message,
// which needs its ack (by o.AckTimeout, if set). A second pause of a
// paused actor changes nothing and returns the first's message.
func (x *exec) pauseActor(ctx context.Context, o workspace.PauseActorOp) (*workspace.Msg, error) {
	actor := baseActor(o.Actor)
	if p, err := paused(ctx, x.tx, actor); err != nil {
		return nil, err
	} else if p != nil {
		m, err := getMsg(ctx, x.tx, p.Message)
		if err != nil {
			return nil, err
		}
		return &m, nil
	}
	body := o.Message
	if body == "" {
		body = fmt.Sprintf("%s paused you: your writes are refused until you are resumed. Acknowledge this message, finish no work, and wait.", x.actor)
	}
	in := workspace.NewMsg{To: []string{actor}, Type: "pause", Severity: workspace.SeverityWarning,
		Subject: "paused by " + x.actor, Body: body, RequiresAck: true}
	if o.AckTimeout > 0 {
		in.Deadline = x.msgNow().Add(o.AckTimeout)
	}
	data, _ := json.Marshal(map[string]any{"actor": actor, "by": x.actor})
	in.Data = data
	// The operator's pause reaches any actor, seen before or not.
	m, err := x.sendMessage(ctx, in, x.actor)
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(pauseRecord{By: x.actor, At: x.now, Message: m.ID})
	if err := x.tx.PutNote(ctx, workspace.Note{Kind: pauseKind, Key: actor, Title: "paused by " + x.actor, Body: string(b),
		Author: x.actor, Version: 1, CreatedAt: x.now, UpdatedAt: x.now, UpdatedBy: x.actor}); err != nil {
		return nil, err
	}
	x.emit(workspace.EventActorPaused, workspace.Subject{Kind: workspace.SubjectActor, ID: actor, Name: actor}, 1, o.Message)
	return m, nil
}

// resumeActor lifts o.Actor's pause and tells it so.
func (x *exec) resumeActor(ctx context.Context, o workspace.ResumeActorOp) error {
	actor := baseActor(o.Actor)
	p, err := paused(ctx, x.tx, actor)
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("actor %q is not paused: %w", truncate(actor, 64), workspace.ErrNotFound)
	}
	if err := x.tx.DeleteNote(ctx, pauseKind, actor); err != nil {
		return err
	}
	body := o.Message
	if body == "" {
		body = fmt.Sprintf("%s resumed you: your writes are accepted again.", x.actor)
	}
	if _, err := x.sendOperatorMessage(ctx, workspace.NewMsg{To: []string{actor}, ReplyTo: p.Message, Type: "resume",
		Subject: "resumed by " + x.actor, Body: body}); err != nil {
		return err
	}
	x.emit(workspace.EventActorResumed, workspace.Subject{Kind: workspace.SubjectActor, ID: actor, Name: actor}, 1, o.Message)
	return nil
}

// touchesPauses reports whether ops pause or resume an actor: the core's
// cache of pauses is then stale.
func touchesPauses(ops []workspace.Op) bool {
	for _, op := range ops {
		switch op.(type) {
		case workspace.PauseActorOp, workspace.ResumeActorOp:
			return true
		}
	}
	return false
}

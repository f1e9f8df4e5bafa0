package engine

import (
	"github.com/agentspace/agentspace/internal/wsconn"

	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// core is what every handle on one store shares: the store, the committer
// that groups the handles' writes into transactions, and the hub that wakes
// their waiters. Handles that Open gives out for one DSN in one process
// share one core (see share.go); New makes a core of its own per handle.
type core struct {
	st   driver.Store
	opts workspace.Options
	hub  *hub

	commits    atomic.Uint64
	jobs       chan *job    // to the committer (group.go)
	savepoints atomic.Int32 // savepointsUnknown, Yes or No
	// late: the store's transactions take jobs queued after they began
	// (LateJoiner).
	late bool
	// writers is the group commit's account of who writes (group.go).
	writers writers
	// stats counts the transactions the core ran for its writers
	// (group.go), for CommitStats.
	stats commitCounters
	// own records the core's transactions, by which its watcher tells
	// their notifications from other stores'.
	own ownCommits
	// policy is the compiled policy, checked per operation (policy.go).
	policy policyCache
	// pauses is the store's pauses, cached for the write gate (pause.go).
	pauses pauseCache
	// inboxes is the inbox long polls, woken by recipient (inboxwake.go).
	inboxes inboxWake

	// key is the core's entry in the shared registry, "" for one made by
	// New; refs counts its handles (guarded by sharedMu); ready closes once
	// the store is open or openErr is set (shared cores only).
	key     string
	refs    int
	ready   chan struct{}
	openErr error
}

// handle is the portable Workspace: it validates, enforces the semantics,
// and calls the backend's Store inside one transaction per batch. Closing
// a handle ends its own waits and subscriptions; the core closes with the
// last of its handles.
type handle struct {
	*core

	ctx       context.Context // ends when this handle closes
	cancel    context.CancelFunc
	closed    atomic.Bool
	subs      sync.WaitGroup // this handle's subscription goroutines
	closeOnce sync.Once
	closeErr  error
}

// New wraps st in the engine: the portable handle that every Workspace
// Open returns is. Backends' own constructors (for a *sql.DB or a
// *pgxpool.Pool) call it. The handle is private (its Attach gives
// more handles on its store) and owns st: the last handle's Close closes it.
func New(st driver.Store, opts workspace.Options) *workspace.Workspace {
	c := &core{refs: 1}
	c.start(st, opts)
	return c.handle().ws()
}

// start starts the committer and the hub of c's store st.
func (c *core) start(st driver.Store, opts workspace.Options) {
	c.st, c.opts = st, opts.WithDefaults()
	c.hub = newHub(c)
	c.jobs = make(chan *job)
	c.late = driver.JoinsLate(st)
	c.hub.wg.Add(1)
	go c.committer()
}

// handle returns a new handle on c; a shared c has counted it in refs.
func (c *core) handle() *handle {
	h := &handle{core: c}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

func (h *handle) Artifacts() workspace.Artifacts { return artifacts{h} }
func (h *handle) Tasks() workspace.Tasks         { return tasks{h} }
func (h *handle) Notes() workspace.Notes         { return notes{h} }
func (h *handle) Locks() workspace.Locks         { return locks{h} }
func (h *handle) Events() workspace.Events       { return events{h} }

// Close ends the handle's waits and subscriptions (they return ErrClosed),
// then lets go of the core: the last handle on a store closes it and gets
// the store's error. Writes already handed to the committer finish.
func (h *handle) Close() error {
	h.closeOnce.Do(func() {
		h.closed.Store(true)
		h.cancel()
		h.subs.Wait()
		h.closeErr = h.core.release()
	})
	return h.closeErr
}

// stop closes the core's hub and committer, then its store.
func (c *core) stop() error {
	c.hub.close()
	return c.st.Close()
}

func (h *handle) alive() error {
	if h.closed.Load() {
		return workspace.ErrClosed
	}
	return nil
}

// view runs fn on a read snapshot, with the closed check and error wrapping.
func (h *handle) view(ctx context.Context, op string, fn func(tx driver.ReadTx) error) error {
	return h.viewHinted(ctx, op, nil, fn)
}

// viewHinted is view for a read of the hints' records (see HintedViewer).
func (h *handle) viewHinted(ctx context.Context, op string, hints []driver.ReadHint, fn func(tx driver.ReadTx) error) error {
	if err := h.alive(); err != nil {
		return err
	}
	return wrapErr(op, h.storeView(ctx, hints, fn))
}

// storeView runs fn on a read snapshot of the store. A read that fails
// once the handle has closed says so: Close does not wait for reads, and
// the store may have closed under this one, whose own error (a closed
// pool, a closed database) is then not what the caller must hear.
func (h *handle) storeView(ctx context.Context, hints []driver.ReadHint, fn func(tx driver.ReadTx) error) error {
	var err error
	if hv, ok := h.st.(driver.HintedViewer); ok && len(hints) > 0 {
		err = hv.ViewHinted(ctx, hints, fn)
	} else {
		err = h.st.View(ctx, fn)
	}
	if err != nil && h.closed.Load() {
		return workspace.ErrClosed
	}
	return err
}

// wrapErr prefixes err with the operation unless it is one of our own typed
// errors, which already say what went wrong.
func wrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var (
		be *workspace.BatchError
		ie *workspace.InvalidError
	)
	if errors.As(err, &be) || errors.As(err, &ie) {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Commit applies a batch all or nothing.
func (h *handle) Commit(ctx context.Context, b workspace.Batch) (workspace.BatchResult, error) {
	return h.commit(ctx, "commit", b)
}

func (h *handle) commit(ctx context.Context, opname string, b workspace.Batch) (workspace.BatchResult, error) {
	if err := h.alive(); err != nil {
		return workspace.BatchResult{}, err
	}
	if err := checkActor(b.Actor); err != nil {
		return workspace.BatchResult{}, err
	}
	if err := checkIdemKey(b.IdempotencyKey); err != nil {
		return workspace.BatchResult{}, err
	}
	if len(b.Ops) == 0 {
		return workspace.BatchResult{}, invalid("ops", "a batch needs at least one op")
	}
	if len(b.Ops) > workspace.MaxOpsPerBatch {
		return workspace.BatchResult{}, invalid("ops", "%d ops is over the limit of %d", len(b.Ops), workspace.MaxOpsPerBatch)
	}
	ops := make([]workspace.Op, len(b.Ops))
	for i, op := range b.Ops {
		ops[i] = op
		err := h.checkOp(op)
		if err == nil {
			err = checkReserved(ctx, b.Actor, ops[i])
		}
		if err != nil {
			if len(b.Ops) == 1 {
				return workspace.BatchResult{}, err
			}
			return workspace.BatchResult{}, &workspace.BatchError{Index: i, Op: op, Err: err}
		}
	}
	prune := b.IdempotencyKey != "" && h.commits.Add(1)%64 == 1
	who, err := h.who(ctx, b.Actor)
	if err != nil {
		return workspace.BatchResult{}, wrapErr(opname, err)
	}

	j := &job{actor: b.Actor, prune: prune, hints: readHints(ops)}
	if b.IdempotencyKey != "" {
		j.idemKey, j.fingerprint = idemScope(b.Actor, b.IdempotencyKey), fingerprint(ops)
	}
	authorize := func(ctx context.Context, x *exec) error {
		if i, err := x.authorize(ctx, who, ops); err != nil {
			if len(ops) == 1 {
				return err
			}
			return &workspace.BatchError{Index: i, Op: b.Ops[i], Err: err}
		}
		return nil
	}
	if !who.none() {
		j.authorize = authorize
	}
	paused, err := h.pauseOf(ctx, b.Actor)
	if err != nil {
		return workspace.BatchResult{}, wrapErr(opname, err)
	}
	j.apply = func(ctx context.Context, x *exec) error {
		x.who, x.paused = &who, paused
		if err := x.checkPaused(ctx, ops); err != nil {
			return err
		}
		if err := authorize(ctx, x); err != nil {
			return err
		}
		for i, op := range ops {
			r, err := x.apply(ctx, op)
			if err != nil {
				if errors.As(err, &j.conflict) {
					j.message = opMessage(op)
				}
				if len(ops) == 1 {
					return err
				}
				return &workspace.BatchError{Index: i, Op: b.Ops[i], Err: err}
			}
			j.res.Results = append(j.res.Results, r)
			x.authTask = nil // only the first op may take it
		}
		return nil
	}
	if touchesPauses(ops) {
		h.pauses.pending.Add(1)
		defer func() {
			h.pauses.clear()
			h.pauses.pending.Add(-1)
		}()
	}
	if err := h.submit(ctx, j); err != nil {
		return workspace.BatchResult{}, wrapErr(opname, err)
	}
	if touchesPolicy(ops, j.res) {
		h.policy.changed()
	}
	return j.res, nil
}

// recordConflict appends the conflict event of a rejected write, in its own
// transaction (the write's was rolled back). It is best effort: the caller
// already has its error.
func (c *core) recordConflict(ctx context.Context, actor string, ce *workspace.ConflictError, msg string) {
	ctx = context.WithoutCancel(ctx)
	var ev workspace.Event
	err := c.st.Update(ctx, func(tx driver.Tx) error {
		ev = conflictEvent(actor, tx.Now(), ce, msg)
		first, err := tx.AppendEvents(ctx, []workspace.Event{ev})
		ev.Seq = first
		return err
	})
	if err != nil {
		c.opts.Logger.Warn("agentspace: recording a conflict event failed", "err", err)
		return
	}
	c.hub.publish([]workspace.Event{ev})
}

// readHint names the record op reads first (its op table entry's hint).
func readHint(op workspace.Op) driver.ReadHint {
	if s, err := specOf(op); err == nil {
		return s.hint(op)
	}
	return driver.ReadHint{}
}

// readHints names the records ops read first, each op's, in op order
// (runGroup drops repeats).
func readHints(ops []workspace.Op) []driver.ReadHint {
	var hints []driver.ReadHint
	for _, op := range ops {
		if h := readHint(op); h != (driver.ReadHint{}) {
			hints = append(hints, h)
		}
	}
	return hints
}

// opMessage is op's own message (its op table entry's), kept on the
// conflict event of a rejected write.
func opMessage(op workspace.Op) string {
	if s, err := specOf(op); err == nil {
		return s.message(op)
	}
	return ""
}

// single runs one op as a batch of one and returns its result.
func (h *handle) single(ctx context.Context, opname string, w workspace.Write, op workspace.Op) (workspace.OpResult, error) {
	res, err := h.commit(ctx, opname, workspace.Batch{Actor: w.Actor, IdempotencyKey: w.IdempotencyKey, Ops: []workspace.Op{op}})
	if err != nil {
		return workspace.OpResult{}, err
	}
	if len(res.Results) == 0 {
		return workspace.OpResult{}, nil
	}
	return res.Results[0], nil
}

// ws makes the user's *workspace.Workspace of h.
func (h *handle) ws() *workspace.Workspace { return wsconn.Wrap(h) }

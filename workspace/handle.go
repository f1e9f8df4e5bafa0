package workspace

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// handle is the portable Workspace: it validates, enforces the semantics,
// and calls the backend's Store inside one transaction per batch.
type handle struct {
	st   Store
	opts Options
	hub  *hub

	closed     atomic.Bool
	closeOnce  sync.Once
	closeErr   error
	commits    atomic.Uint64
	jobs       chan *job    // to the committer (group.go)
	savepoints atomic.Int32 // savepointsUnknown, Yes or No
}

// New wraps a backend's store in the portable handle every Workspace is.
// Backends' own constructors (for a *sql.DB or a *pgxpool.Pool) call it.
// The handle owns st: Close closes it.
func New(st Store, opts Options) Workspace {
	h := &handle{st: st, opts: opts.withDefaults()}
	var changes <-chan struct{}
	if n, ok := st.(Notifier); ok {
		changes = n.Changes()
	}
	h.hub = newHub(h, changes)
	h.jobs = make(chan *job)
	h.hub.wg.Add(1)
	go h.committer()
	return h
}

func (h *handle) Artifacts() Artifacts { return artifacts{h} }
func (h *handle) Tasks() Tasks         { return tasks{h} }
func (h *handle) Notes() Notes         { return notes{h} }
func (h *handle) Locks() Locks         { return locks{h} }
func (h *handle) Events() Events       { return events{h} }

func (h *handle) Close() error {
	h.closeOnce.Do(func() {
		h.closed.Store(true)
		h.hub.close()
		h.closeErr = h.st.Close()
	})
	return h.closeErr
}

func (h *handle) alive() error {
	if h.closed.Load() {
		return ErrClosed
	}
	return nil
}

// view runs fn on a read snapshot, with the closed check and error wrapping.
func (h *handle) view(ctx context.Context, op string, fn func(tx ReadTx) error) error {
	if err := h.alive(); err != nil {
		return err
	}
	if err := h.st.View(ctx, fn); err != nil {
		return wrapErr(op, err)
	}
	return nil
}

// wrapErr prefixes err with the operation unless it is one of our own typed
// errors, which already say what went wrong.
func wrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var (
		be *BatchError
		ie *InvalidError
	)
	if errors.As(err, &be) || errors.As(err, &ie) {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Commit applies a batch all or nothing.
func (h *handle) Commit(ctx context.Context, b Batch) (BatchResult, error) {
	return h.commit(ctx, "commit", b)
}

func (h *handle) commit(ctx context.Context, opname string, b Batch) (BatchResult, error) {
	if err := h.alive(); err != nil {
		return BatchResult{}, err
	}
	if err := checkActor(b.Actor); err != nil {
		return BatchResult{}, err
	}
	if err := checkIdemKey(b.IdempotencyKey); err != nil {
		return BatchResult{}, err
	}
	if len(b.Ops) == 0 {
		return BatchResult{}, invalid("ops", "a batch needs at least one op")
	}
	if len(b.Ops) > MaxOpsPerBatch {
		return BatchResult{}, invalid("ops", "%d ops is over the limit of %d", len(b.Ops), MaxOpsPerBatch)
	}
	ops := make([]Op, len(b.Ops))
	for i, op := range b.Ops {
		ops[i] = derefOp(op)
		if err := h.checkOp(ops[i]); err != nil {
			if len(b.Ops) == 1 {
				return BatchResult{}, err
			}
			return BatchResult{}, &BatchError{Index: i, Op: op, Err: err}
		}
	}
	prune := b.IdempotencyKey != "" && h.commits.Add(1)%64 == 1

	j := &job{actor: b.Actor, prune: prune}
	if b.IdempotencyKey != "" {
		j.idemKey, j.fingerprint = idemScope(b.Actor, b.IdempotencyKey), fingerprint(ops)
	}
	j.apply = func(ctx context.Context, x *exec) error {
		for i, op := range ops {
			r, err := x.apply(ctx, op)
			if err != nil {
				if errors.As(err, &j.conflict) {
					j.message = opMessage(op)
				}
				if len(ops) == 1 {
					return err
				}
				return &BatchError{Index: i, Op: b.Ops[i], Err: err}
			}
			j.res.Results = append(j.res.Results, r)
		}
		return nil
	}
	if err := h.submit(ctx, j); err != nil {
		return BatchResult{}, wrapErr(opname, err)
	}
	return j.res, nil
}

// recordConflict appends the conflict event of a rejected write, in its own
// transaction (the write's was rolled back). It is best effort: the caller
// already has its error.
func (h *handle) recordConflict(ctx context.Context, actor string, c *ConflictError, msg string) {
	ctx = context.WithoutCancel(ctx)
	var ev Event
	err := h.st.Update(ctx, func(tx Tx) error {
		ev = conflictEvent(actor, tx.Now(), c, msg)
		first, err := tx.AppendEvents(ctx, []Event{ev})
		ev.Seq = first
		return err
	})
	if err != nil {
		h.opts.Logger.Warn("agentspace: recording a conflict event failed", "err", err)
		return
	}
	h.hub.publish([]Event{ev})
}

func opMessage(op Op) string {
	switch o := op.(type) {
	case UpdateArtifactOp:
		return o.Message
	case DeleteArtifactOp:
		return o.Message
	case RollbackArtifactOp:
		return o.Message
	case UpdateTaskOp:
		return o.Message
	case PutNoteOp:
		return o.Message
	case DeleteNoteOp:
		return o.Message
	}
	return ""
}

func derefOp(op Op) Op {
	switch o := op.(type) {
	case *CreateArtifactOp:
		if o != nil {
			return *o
		}
	case *UpdateArtifactOp:
		if o != nil {
			return *o
		}
	case *DeleteArtifactOp:
		if o != nil {
			return *o
		}
	case *RollbackArtifactOp:
		if o != nil {
			return *o
		}
	case *CreateTaskOp:
		if o != nil {
			return *o
		}
	case *UpdateTaskOp:
		if o != nil {
			return *o
		}
	case *PutNoteOp:
		if o != nil {
			return *o
		}
	case *DeleteNoteOp:
		if o != nil {
			return *o
		}
	case *ReleaseLockOp:
		if o != nil {
			return *o
		}
	default:
		return op
	}
	return nil
}

// single runs one op as a batch of one and returns its result.
func (h *handle) single(ctx context.Context, opname string, w Write, op Op) (OpResult, error) {
	res, err := h.commit(ctx, opname, Batch{Actor: w.Actor, IdempotencyKey: w.IdempotencyKey, Ops: []Op{op}})
	if err != nil {
		return OpResult{}, err
	}
	if len(res.Results) == 0 {
		return OpResult{}, nil
	}
	return res.Results[0], nil
}

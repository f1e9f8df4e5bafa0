package jsonstore

import (
	"context"
	"errors"

	"github.com/agentspace/agentspace/workspace/driver"
)

// Savepoints let the handle commit concurrent writers in one transaction
// (group commit): one journal record and one set of fsyncs for the group,
// each writer in its own savepoint. Every write of a tx pushes one undo step
// covering both the state and the marks the commit record is built from, so
// a savepoint is just a position in the undo list.

var _ driver.Savepointer = (*tx)(nil)

// errNoSavepoint reports a RollbackSavepoint or ReleaseSavepoint without a
// matching Savepoint: a bug in the caller.
var errNoSavepoint = errors.New("json store: no open savepoint")

func (t *tx) Savepoint(ctx context.Context) error {
	if !t.write {
		return errors.New("json store: savepoint in a read-only transaction")
	}
	t.sps = append(t.sps, len(t.undo))
	return nil
}

func (t *tx) RollbackSavepoint(ctx context.Context) error {
	n := len(t.sps)
	if n == 0 {
		return errNoSavepoint
	}
	mark := t.sps[n-1]
	t.sps = t.sps[:n-1]
	for i := len(t.undo) - 1; i >= mark; i-- {
		t.undo[i]()
		t.undo[i] = nil
	}
	t.undo = t.undo[:mark]
	return nil
}

func (t *tx) ReleaseSavepoint(ctx context.Context) error {
	n := len(t.sps)
	if n == 0 {
		return errNoSavepoint
	}
	t.sps = t.sps[:n-1]
	return nil
}

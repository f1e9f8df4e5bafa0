package postgres

import (
	"context"
	"strconv"
)

// writeTx is a driver.Savepointer, so a handle commits concurrent writes
// in one transaction: one WAL flush and one NOTIFY for the group (group
// commit). The statements are queued on the pipeline like any write, in
// order, so a savepoint costs no round trip of its own.
var _ interface {
	Savepoint(ctx context.Context) error
	RollbackSavepoint(ctx context.Context) error
	ReleaseSavepoint(ctx context.Context) error
} = (*writeTx)(nil)

// Savepoint opens a nested savepoint.
func (t *writeTx) Savepoint(ctx context.Context) error {
	t.savepoints++
	// A savepoint changes no row: what was read ahead stays good.
	t.pl.queue("SAVEPOINT " + savepointName(t.savepoints))
	return nil
}

// RollbackSavepoint undoes the writes since the newest savepoint and ends it.
// After a failed statement the transaction is aborted until this runs.
func (t *writeTx) RollbackSavepoint(ctx context.Context) error {
	name := savepointName(t.savepoints)
	t.savepoints--
	t.unsure = true // which of its writes were undone is not tracked
	if t.pl.broken != nil {
		return t.pl.broken
	}
	if _, err := t.pl.Exec(ctx, "ROLLBACK TO SAVEPOINT "+name); err != nil {
		return err
	}
	_, err := t.pl.Exec(ctx, "RELEASE SAVEPOINT "+name)
	return err
}

// ReleaseSavepoint keeps the writes since the newest savepoint and ends it.
func (t *writeTx) ReleaseSavepoint(ctx context.Context) error {
	name := savepointName(t.savepoints)
	t.savepoints--
	_, err := t.pl.Exec(ctx, "RELEASE SAVEPOINT "+name)
	return err
}

func savepointName(n int) string { return "ws_sp" + strconv.Itoa(n) }

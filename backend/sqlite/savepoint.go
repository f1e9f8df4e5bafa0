package sqlite

import (
	"context"
	"fmt"
)

// Savepoints let the handle commit concurrent writers in one transaction
// (group commit): one fsync for the group, each writer in its own savepoint.
// SQLite savepoint names are identifiers we choose, never user input.

func (t *writeTx) Savepoint(ctx context.Context) error {
	t.depth++
	_, err := t.q.ExecContext(ctx, fmt.Sprintf("SAVEPOINT sp%d", t.depth))
	return err
}

func (t *writeTx) RollbackSavepoint(ctx context.Context) error {
	t.leaseRead = nil // it may have been read after a write now undone
	t.noted.unsure = true
	name := fmt.Sprintf("sp%d", t.depth)
	t.depth--
	if _, err := t.q.ExecContext(ctx, "ROLLBACK TO "+name); err != nil {
		return err
	}
	_, err := t.q.ExecContext(ctx, "RELEASE "+name)
	return err
}

func (t *writeTx) ReleaseSavepoint(ctx context.Context) error {
	name := fmt.Sprintf("sp%d", t.depth)
	t.depth--
	_, err := t.q.ExecContext(ctx, "RELEASE "+name)
	return err
}

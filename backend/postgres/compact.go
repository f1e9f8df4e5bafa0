package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	// raiseFloor moves the floor up to $1 and the chain's base to the hash
	// of event $1 - 1, deleting nothing.
	raiseFloor = `UPDATE counters SET floor = $1,
		floor_hash = coalesce((SELECT hash FROM events WHERE seq = $1 - 1), floor_hash)
		WHERE floor < $1`
)

// deleteBelowFloor deletes the event rows of schema from $1 up to $2
// that are below the floor; it reads the floor without locking the
// counter row. Its tables are named in schema: pgx prepares it before the
// batch that would set the search_path runs.
func deleteBelowFloor(schema string) string {
	return `DELETE FROM ` + pgx.Identifier{schema, "events"}.Sanitize() + ` WHERE seq >= $1 AND seq < $2
		AND seq < (SELECT floor FROM ` + pgx.Identifier{schema, "counters"}.Sanitize() + `)`
}

// RaiseFloor implements driver.FloorRaiser: one statement under the
// writers' lock, however many events go.
func (t *writeTx) RaiseFloor(ctx context.Context, floor int64) error {
	if _, err := t.q.Exec(ctx, raiseFloor, floor); err != nil {
		return fmt.Errorf("postgres: raise event floor: %w", err)
	}
	return nil
}

// DeleteBelowFloor implements driver.BelowFloorDeleter. No read of the
// log goes below the floor (every one starts at or above it) and writers
// only add rows at the head, so the rows below it are deleted in a
// transaction that does not take the writers' advisory lock: a writer
// waits for none of it. The transaction runs in one round trip.
func (s *store) DeleteBelowFloor(ctx context.Context, from, to int64) (int64, error) {
	var n int64
	err := s.retry(ctx, "delete below floor", func() (bool, error) {
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			return ctx.Err() == nil, fmt.Errorf("postgres: acquire connection: %w", err)
		}
		defer conn.Release()
		b := &pgx.Batch{}
		b.Queue(beginWrite)
		b.Queue(s.deleteBelow, from, to).Exec(func(tag pgconn.CommandTag) error {
			n = tag.RowsAffected()
			return nil
		})
		b.Queue(commitStmt)
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			s.abort(conn)
			return retryable(conn, err), fmt.Errorf("postgres: delete events below the floor: %w", err)
		}
		return false, nil
	})
	return n, err
}

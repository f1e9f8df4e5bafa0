package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentspace/agentspace/workspace/driver"
)

// The store keeps the event log's hash chain (driver.ReadTx's
// ChainEvents and ChainBase, driver.Tx's SetChainBase): events.hash, computed by the statements that
// append events (events.go) from counters.hash, the head's; and
// counters.floor_hash, kept by compactEvents.
var (
	_ driver.ReadTx = (*readTx)(nil)
	_ driver.Tx     = (*writeTx)(nil)
)

const (
	readChainEvents = `SELECT ` + eventCols + `, hash FROM events WHERE seq > $1 ORDER BY seq LIMIT $2`
	readChainBase   = `SELECT floor_hash FROM counters`
	setChainBase    = `UPDATE counters SET hash = $1, floor_hash = $1`
)

// ChainEvents implements driver.ReadTx.
func (t *readTx) ChainEvents(ctx context.Context, after int64, limit int) ([]driver.ChainedEvent, error) {
	rows, err := t.q.Query(ctx, readChainEvents, after, limit)
	out, err := collect(rows, err, func(row pgx.Row) (driver.ChainedEvent, error) {
		var c driver.ChainedEvent
		e := &c.Event
		err := row.Scan(&e.Seq, &e.Time, &e.Actor, &e.Type, &e.Subject.Kind, &e.Subject.ID, &e.Subject.Name, &e.Version, &e.Message, &c.Hash)
		e.Time = e.Time.UTC()
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: read event chain: %w", err)
	}
	return out, nil
}

// ChainBase implements driver.ReadTx.
func (t *readTx) ChainBase(ctx context.Context) ([]byte, error) {
	var h []byte
	if err := t.q.QueryRow(ctx, readChainBase).Scan(&h); err != nil {
		return nil, fmt.Errorf("postgres: read chain base: %w", err)
	}
	return h, nil
}

// SetChainBase implements driver.Tx.
func (t *writeTx) SetChainBase(ctx context.Context, hash []byte) error {
	if _, err := t.q.Exec(ctx, setChainBase, hash); err != nil {
		return fmt.Errorf("postgres: set chain base: %w", err)
	}
	return nil
}

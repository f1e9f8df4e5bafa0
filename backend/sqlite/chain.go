package sqlite

import (
	"context"
	"fmt"

	"github.com/agentspace/agentspace/workspace/driver"
)

// The store keeps the event log's hash chain (driver.ReadTx's
// ChainEvents and ChainBase, driver.Tx's SetChainBase): events.hash, written by AppendEvents, and
// meta.floor_hash, kept by CompactEvents.
var (
	_ driver.ReadTx = (*readTx)(nil)
	_ driver.Tx     = (*writeTx)(nil)
)

const (
	qChainEvents  = `SELECT ` + eventCols + `, hash FROM events WHERE seq > ? ORDER BY seq LIMIT +?`
	qChainBase    = `SELECT floor_hash FROM meta WHERE id = 1`
	qSetChainBase = `UPDATE meta SET floor_hash = ? WHERE id = 1`
)

// ChainEvents implements driver.ReadTx.
func (t *readTx) ChainEvents(ctx context.Context, after int64, limit int) ([]driver.ChainedEvent, error) {
	rows, err := t.q.QueryContext(ctx, qChainEvents, after, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("sqlite: read event chain: %w", err)
	}
	defer rows.Close()
	var out []driver.ChainedEvent
	for rows.Next() {
		var (
			c  driver.ChainedEvent
			tm int64
		)
		e := &c.Event
		if err := rows.Scan(&e.Seq, &tm, &e.Actor, &e.Type, &e.Subject.Kind, &e.Subject.ID,
			&e.Subject.Name, &e.Version, &e.Message, &c.Hash); err != nil {
			return nil, fmt.Errorf("sqlite: read event chain: %w", err)
		}
		e.Time = fromMicros(tm)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read event chain: %w", err)
	}
	return out, nil
}

// ChainBase implements driver.ReadTx.
func (t *readTx) ChainBase(ctx context.Context) ([]byte, error) {
	var h []byte
	if err := t.q.QueryRowContext(ctx, qChainBase).Scan(&h); err != nil {
		return nil, fmt.Errorf("sqlite: read chain base: %w", err)
	}
	return h, nil
}

// SetChainBase implements driver.Tx.
func (t *writeTx) SetChainBase(ctx context.Context, hash []byte) error {
	if _, err := t.q.ExecContext(ctx, qSetChainBase, hash); err != nil {
		return fmt.Errorf("sqlite: set chain base: %w", err)
	}
	return nil
}

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentspace/agentspace/workspace/driver"
)

// Migration 7 asks for the events written before the chain to be chained
// (migrations/sqlite/000007_chain_existing.up.sql); chainExisting does it.
//
// Invariant: every event below meta.chain_next carries its hash, chained
// from floor_hash at the floor, and chain_next moves only in the
// transaction that writes the hashes it passes. So each batch is atomic, a
// run cut short (a crash, a kill, a cancelled context) resumes at
// chain_next, and two runs at once take turns batch by batch (each batch is
// a BEGIN IMMEDIATE transaction that reads chain_next afresh).

// chainVersion is the schema version that keeps meta.chain_next.
const chainVersion = 7

// chainBatch is how many events one transaction chains: it bounds the
// transaction's size and how long it holds the write lock, whatever the
// size of the log.
const chainBatch = 4096

const (
	qChainNextOnly = `SELECT chain_next FROM meta WHERE id = 1`
	qChainNext     = `SELECT chain_next, floor_hash FROM meta WHERE id = 1`
	qChainPrev     = `SELECT hash FROM events WHERE seq = ?`
	qChainRange    = `SELECT ` + eventCols + `, hash FROM events WHERE seq >= ? ORDER BY seq LIMIT +?`
	qChainSet      = `UPDATE events SET hash = ? WHERE seq = ? AND hash IS NULL`
	qChainMoved    = `UPDATE meta SET chain_next = ? WHERE id = 1`
)

// chainExisting chains what migration 7 left to chain, batch by batch,
// and returns once meta.chain_next is 0. A store below chainVersion, or
// dirty, is left alone. path names the file in errors.
func chainExisting(ctx context.Context, db *sql.DB, path string) error {
	s, err := readSchema(ctx, db, path)
	if err != nil || s.chainNext == 0 {
		return err
	}
	for {
		done, err := chainStep(ctx, db, chainBatch)
		if err != nil {
			return fmt.Errorf("sqlite: chaining the events written before the chain: %w", describe(err, path))
		}
		if done {
			return nil
		}
	}
}

// chainStep chains up to limit events from meta.chain_next in one
// transaction and reports whether none is left.
func chainStep(ctx context.Context, db *sql.DB, limit int) (done bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var (
		next int64
		prev []byte
	)
	if err := tx.QueryRowContext(ctx, qChainNext).Scan(&next, &prev); err != nil {
		return false, err
	}
	if next == 0 {
		return true, tx.Rollback()
	}
	var below []byte
	switch err := tx.QueryRowContext(ctx, qChainPrev, next-1).Scan(&below); {
	case errors.Is(err, sql.ErrNoRows): // next is the floor: chain from floor_hash
	case err != nil:
		return false, err
	case below == nil:
		return false, fmt.Errorf("event %d, below the chain's resume point %d, has no hash", next-1, next)
	default:
		prev = below
	}
	evs, err := chainRange(ctx, tx, next, limit)
	if err != nil {
		return false, err
	}
	for _, ce := range evs {
		if ce.Hash != nil {
			return false, fmt.Errorf("event %d already has a hash: refusing to chain over it", ce.Event.Seq)
		}
		prev = driver.ChainHash(prev, ce.Event)
		if _, err := tx.ExecContext(ctx, qChainSet, prev, ce.Event.Seq); err != nil {
			return false, err
		}
	}
	moved := int64(0)
	if len(evs) == limit {
		moved = evs[len(evs)-1].Event.Seq + 1
	}
	if _, err := tx.ExecContext(ctx, qChainMoved, moved); err != nil {
		return false, err
	}
	return moved == 0, tx.Commit()
}

// chainRange reads up to limit events from seq from on, with their hashes.
func chainRange(ctx context.Context, tx *sql.Tx, from int64, limit int) ([]driver.ChainedEvent, error) {
	rows, err := tx.QueryContext(ctx, qChainRange, from, limit)
	if err != nil {
		return nil, err
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
			return nil, err
		}
		e.Time = fromMicros(tm)
		out = append(out, c)
	}
	return out, rows.Err()
}

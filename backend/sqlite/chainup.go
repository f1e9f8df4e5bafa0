package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/agentspace/agentspace/backend/internal/sqlchain"
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
	if err := sqlchain.Existing(ctx, db, chainUp, chainBatch); err != nil {
		return fmt.Errorf("sqlite: chaining the events written before the chain: %w", describe(err, path))
	}
	return nil
}

// chainUp is what sqlchain.Existing needs of a SQLite store.
var chainUp = sqlchain.Up{
	Resume: func(ctx context.Context, tx *sql.Tx) (next int64, floorHash []byte, err error) {
		err = tx.QueryRowContext(ctx, qChainNext).Scan(&next, &floorHash)
		return next, floorHash, err
	},
	HashOf: func(ctx context.Context, tx *sql.Tx, seq int64) (h []byte, err error) {
		err = tx.QueryRowContext(ctx, qChainPrev, seq).Scan(&h)
		return h, err
	},
	Range: chainRange,
	Set: func(ctx context.Context, tx *sql.Tx, seqs []int64, hashes [][]byte) error {
		for i, seq := range seqs {
			if _, err := tx.ExecContext(ctx, qChainSet, hashes[i], seq); err != nil {
				return err
			}
		}
		return nil
	},
	Moved: func(ctx context.Context, tx *sql.Tx, next int64, _ []byte) error {
		_, err := tx.ExecContext(ctx, qChainMoved, next)
		return err
	},
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

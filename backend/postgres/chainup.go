package postgres

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/agentspace/agentspace/backend/internal/sqlchain"
	"github.com/agentspace/agentspace/workspace/driver"
)

// Migration 6 asks for the events written before the chain to be chained
// (migrations/postgres/000006_chain_existing.up.sql); chainExisting does it.
//
// Invariant: every event below counters.chain_next carries its hash,
// chained from floor_hash at the floor, and chain_next moves only in the
// transaction that writes the hashes it passes (with counters.hash, the
// hash the next append chains from). So each batch is atomic, a run cut
// short (a crash, a lost connection, a cancelled context) resumes at
// chain_next, and runs on several hosts at once take turns batch by batch
// on the counter row's lock. Open refuses to hand out a store until
// chain_next is 0 (it finishes the chaining first), so no event is
// appended to a half-chained log.

// chainVersion is the schema version that keeps counters.chain_next.
const chainVersion = 6

// chainBatch is how many events one transaction chains: it bounds the
// transaction's size and how long it holds the counter row, whatever the
// size of the log.
const chainBatch = 4096

const (
	chainNextSQL  = `SELECT chain_next, floor_hash FROM counters FOR UPDATE`
	chainPrevSQL  = `SELECT hash FROM events WHERE seq = $1`
	chainRangeSQL = `SELECT ` + eventCols + `, hash FROM events WHERE seq >= $1 ORDER BY seq LIMIT $2`
	chainSetSQL   = `UPDATE events AS e SET hash = v.h FROM unnest($1::bigint[], $2::bytea[]) AS v(seq, h)
		WHERE e.seq = v.seq AND e.hash IS NULL`
	chainMovedSQL = `UPDATE counters SET chain_next = $1, hash = $2`
)

// chain chains what migration 6 left to chain, unless the schema is older
// or dirty.
func (m *migrator) chain(ctx context.Context) error {
	v, dirty, err := m.Version(ctx)
	if err != nil || dirty || v < chainVersion {
		return err
	}
	return chainExisting(ctx, m.db)
}

// chainExisting chains batch by batch until counters.chain_next is 0. db's
// search_path is the workspace's schema.
func chainExisting(ctx context.Context, db *sql.DB) error {
	if err := sqlchain.Existing(ctx, db, chainUp, chainBatch); err != nil {
		return fmt.Errorf("postgres: chaining the events written before the chain: %w", err)
	}
	return nil
}

// chainUp is what sqlchain.Existing needs of a Postgres store.
var chainUp = sqlchain.Up{
	Resume: func(ctx context.Context, tx *sql.Tx) (next int64, floorHash []byte, err error) {
		err = tx.QueryRowContext(ctx, chainNextSQL).Scan(&next, &floorHash)
		return next, floorHash, err
	},
	HashOf: func(ctx context.Context, tx *sql.Tx, seq int64) (h []byte, err error) {
		err = tx.QueryRowContext(ctx, chainPrevSQL, seq).Scan(&h)
		return h, err
	},
	Range: chainRange,
	Set: func(ctx context.Context, tx *sql.Tx, seqs []int64, hashes [][]byte) error {
		res, err := tx.ExecContext(ctx, chainSetSQL, seqs, hashes)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != int64(len(seqs)) {
			return fmt.Errorf("%d of %d events chained from %d (%v)", n, len(seqs), seqs[0], err)
		}
		return nil
	},
	Moved: func(ctx context.Context, tx *sql.Tx, next int64, last []byte) error {
		_, err := tx.ExecContext(ctx, chainMovedSQL, next, last)
		return err
	},
}

// chainRange reads up to limit events from seq from on, with their hashes.
func chainRange(ctx context.Context, tx *sql.Tx, from int64, limit int) ([]driver.ChainedEvent, error) {
	rows, err := tx.QueryContext(ctx, chainRangeSQL, from, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []driver.ChainedEvent
	for rows.Next() {
		var c driver.ChainedEvent
		e := &c.Event
		if err := rows.Scan(&e.Seq, &e.Time, &e.Actor, &e.Type, &e.Subject.Kind, &e.Subject.ID,
			&e.Subject.Name, &e.Version, &e.Message, &c.Hash); err != nil {
			return nil, err
		}
		e.Time = e.Time.UTC()
		out = append(out, c)
	}
	return out, rows.Err()
}

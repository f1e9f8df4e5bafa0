// Package sqlchain chains, in steps, the events of a SQL store that an
// upgrade left without hashes: what sqlite and postgres share of it, over
// database/sql. It lives under backend/ so that the backend contract
// (workspace/driver) stays free of database/sql.
package sqlchain

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentspace/agentspace/workspace/driver"
)

// Up is a SQL store's part of Existing: the statements that differ
// between stores. Each function runs in the step's transaction.
type Up struct {
	// Resume reads, locking it against other runs, the first event not yet
	// chained (0: none is left) and the floor's hash, which the chain starts
	// from when that event is the floor.
	Resume func(ctx context.Context, tx *sql.Tx) (next int64, floorHash []byte, err error)
	// HashOf reads event seq's hash (nil: it has none); sql.ErrNoRows when
	// seq is below the floor.
	HashOf func(ctx context.Context, tx *sql.Tx, seq int64) ([]byte, error)
	// Range reads up to limit events from seq from on, with their hashes.
	Range func(ctx context.Context, tx *sql.Tx, from int64, limit int) ([]driver.ChainedEvent, error)
	// Set writes hashes[i] as event seqs[i]'s hash, each one that has none.
	Set func(ctx context.Context, tx *sql.Tx, seqs []int64, hashes [][]byte) error
	// Moved records the next resume point (0: done) and the last hash of the
	// chain so far.
	Moved func(ctx context.Context, tx *sql.Tx, next int64, last []byte) error
}

// Existing chains, batch by batch, the events an upgrade left without
// hashes (a store made before the log was chained), until none is left.
//
// Invariant: every event below the resume point carries its hash, chained
// from the floor's, and the resume point moves only in the transaction
// that writes the hashes it passes. So each batch is atomic, a run cut short
// (a crash, a lost connection, a cancelled context) resumes there, and
// runs at once take turns batch by batch (Resume locks the point).
func Existing(ctx context.Context, db *sql.DB, c Up, batch int) error {
	for {
		done, err := Step(ctx, db, c, batch)
		if err != nil || done {
			return err
		}
	}
}

// Step chains up to limit events from the resume point in one
// transaction and reports whether none is left: one batch of Existing (a
// test cuts a run short with it).
func Step(ctx context.Context, db *sql.DB, c Up, limit int) (done bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	next, prev, err := c.Resume(ctx, tx)
	if err != nil {
		return false, err
	}
	if next == 0 {
		return true, tx.Rollback()
	}
	switch below, err := c.HashOf(ctx, tx, next-1); {
	case errors.Is(err, sql.ErrNoRows): // next is the floor: chain from its hash
	case err != nil:
		return false, err
	case below == nil:
		return false, fmt.Errorf("event %d, below the chain's resume point %d, has no hash", next-1, next)
	default:
		prev = below
	}
	evs, err := c.Range(ctx, tx, next, limit)
	if err != nil {
		return false, err
	}
	seqs := make([]int64, len(evs))
	hashes := make([][]byte, len(evs))
	for i, ce := range evs {
		if ce.Hash != nil {
			return false, fmt.Errorf("event %d already has a hash: refusing to chain over it", ce.Event.Seq)
		}
		prev = driver.ChainHash(prev, ce.Event)
		seqs[i], hashes[i] = ce.Event.Seq, prev
	}
	if len(evs) > 0 {
		if err := c.Set(ctx, tx, seqs, hashes); err != nil {
			return false, err
		}
	}
	moved := int64(0)
	if len(evs) == limit {
		moved = evs[len(evs)-1].Event.Seq + 1
	}
	if err := c.Moved(ctx, tx, moved, prev); err != nil {
		return false, err
	}
	return moved == 0, tx.Commit()
}

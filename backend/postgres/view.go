package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// A read of one record (a Get of an artifact's head with its content, of a
// note, a task, a lease) is one statement: it needs no transaction, since
// one statement reads one snapshot, and so costs one round trip where a
// View costs three (begin with the snapshot's head, the reads, the end).

// errNotReadAhead is what a read-ahead view returns for a read it does not
// hold: ViewHinted then runs the read again in a plain View.
var errNotReadAhead = errors.New("postgres: not read ahead")

// ViewHinted implements driver.HintedViewer for a read of one record:
// an artifact with its head's content, a note, a task or a lease; other
// reads are plain Views. fn runs on what the statement returned; if it
// reads anything else, or the record was not found, or the statement
// failed, fn runs again in a View, which decides.
func (s *store) ViewHinted(ctx context.Context, hints []driver.ReadHint, fn func(tx driver.ReadTx) error) error {
	if len(hints) != 1 {
		return s.View(ctx, fn)
	}
	h := hints[0]
	e := &earlyRead{hint: h}
	var (
		now time.Time
		err error
	)
	at := func(row pgx.Row) pgx.Row { return framedRow{Row: row, before: []any{&now}} }
	switch {
	case h.Artifact != (workspace.ArtifactRef{}) && h.Content:
		e.hint.Content, e.contentRead = false, true
		sql, arg := s.viewAhead.byName, h.Artifact.Name
		if h.Artifact.ID != "" {
			sql, arg = s.viewAhead.byID, h.Artifact.ID
		}
		row := s.pool.QueryRow(ctx, sql, arg)
		e.artifact, err = scanArtifact(framedRow{Row: row, before: []any{&now}, after: []any{&e.content}})
	case h.NoteKind != "" && h.NoteKey != "":
		e.note, err = scanNote(at(s.pool.QueryRow(ctx, s.viewAhead.note, h.NoteKind, h.NoteKey)))
	case h.Task != "":
		e.task, err = scanTask(at(s.pool.QueryRow(ctx, s.viewAhead.task, h.Task)))
	case h.Lease != "":
		e.lease.resource = h.Lease
		e.lease.lease, err = scanLease(at(s.pool.QueryRow(ctx, s.viewAhead.lease, h.Lease)))
	default:
		return s.View(ctx, fn)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.View(ctx, fn)
	}
	pl := newPipeline(ctx, refused{})
	pl.early = []*earlyRead{e}
	if err := fn(&readTx{q: pl, pl: pl, now: clock(now)}); !errors.Is(err, errNotReadAhead) {
		return err
	}
	return s.View(ctx, fn)
}

// framedRow scans a row whose columns are a record's with others before
// and after them.
type framedRow struct {
	pgx.Row
	before, after []any
}

func (r framedRow) Scan(dest ...any) error {
	all := make([]any, 0, len(r.before)+len(dest)+len(r.after))
	return r.Row.Scan(append(append(append(all, r.before...), dest...), r.after...)...)
}

// refused sends nothing: every statement a read-ahead view would send
// fails with errNotReadAhead.
type refused struct{}

func (refused) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults { return refused{} }

func (refused) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, errNotReadAhead }
func (refused) Query() (pgx.Rows, error)         { return nil, errNotReadAhead }
func (refused) QueryRow() pgx.Row                { return errRow{errNotReadAhead} }
func (refused) Close() error                     { return errNotReadAhead }
func (refused) Tx() pgx.Tx                       { return nil }

package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentspace/agentspace/workspace"
)

// A read of one artifact with its head's content (a Get) is one statement:
// it needs no transaction, since one statement reads one snapshot, and so
// costs one round trip where a View costs three (begin with the snapshot's
// head, the reads, the end).

// errNotReadAhead is what a read-ahead view returns for a read it does not
// hold: ViewHinted then runs the read again in a plain View.
var errNotReadAhead = errors.New("postgres: not read ahead")

// ViewHinted implements workspace.HintedViewer for a read of one artifact
// and its head's content; other reads are plain Views. fn runs on what the
// statement returned; if it reads anything else, or the artifact was not
// found, or the statement failed, fn runs again in a View, which decides.
func (s *store) ViewHinted(ctx context.Context, hints []workspace.ReadHint, fn func(tx workspace.ReadTx) error) error {
	if len(hints) != 1 || hints[0].Artifact == (workspace.ArtifactRef{}) || !hints[0].Content {
		return s.View(ctx, fn)
	}
	ref := hints[0].Artifact
	e := &earlyRead{hint: workspace.ReadHint{Artifact: ref}, contentRead: true}
	sql, arg := s.viewAhead.byName, ref.Name
	if ref.ID != "" {
		sql, arg = s.viewAhead.byID, ref.ID
	}
	var now time.Time
	row := s.pool.QueryRow(ctx, sql, arg)
	e.artifact, e.err = scanArtifact(framedRow{Row: row, before: []any{&now}, after: []any{&e.content}})
	if e.err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.View(ctx, fn)
	}
	pl := newPipeline(refused{})
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

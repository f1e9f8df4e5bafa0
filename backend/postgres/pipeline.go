package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pipeline is a write transaction's querier: writes (Exec) are queued and
// sent together, in one round trip, with the next read, the event append or
// the COMMIT. A queued write's error therefore surfaces at that next call,
// which fails the transaction as the write itself would have.
type pipeline struct {
	conn   querier
	sender interface {
		SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	}
	batch *pgx.Batch
	sqls  []string
}

func newPipeline(conn interface {
	querier
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}) *pipeline {
	return &pipeline{conn: conn, sender: conn, batch: &pgx.Batch{}}
}

// Exec queues a write.
func (p *pipeline) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	p.batch.Queue(sql, args...)
	p.sqls = append(p.sqls, sql)
	return pgconn.CommandTag{}, nil
}

func (p *pipeline) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := p.flush(ctx, "", nil, nil); err != nil {
		return nil, err
	}
	return p.conn.Query(ctx, sql, args...)
}

func (p *pipeline) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := p.flush(ctx, "", nil, nil); err != nil {
		return errRow{err}
	}
	return p.conn.QueryRow(ctx, sql, args...)
}

// flush sends the queued writes, followed by sql (if not empty) whose one
// row goes to scan, in one round trip.
func (p *pipeline) flush(ctx context.Context, sql string, args []any, scan func(pgx.Row) error) error {
	if sql == "" && p.batch.Len() == 0 {
		return nil
	}
	b, sqls := p.batch, p.sqls
	p.batch, p.sqls = &pgx.Batch{}, nil
	if sql != "" {
		b.Queue(sql, args...)
	}
	br := p.sender.SendBatch(ctx, b)
	for _, s := range sqls {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return fmt.Errorf("postgres: %s: %w", summary(s), err)
		}
	}
	if sql != "" {
		if err := scan(br.QueryRow()); err != nil {
			_ = br.Close()
			return fmt.Errorf("postgres: %s: %w", summary(sql), err)
		}
	}
	return br.Close()
}

// commit sends the queued writes and COMMIT together.
func (p *pipeline) commit(ctx context.Context) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	p.batch.Queue(commitStmt)
	p.sqls = append(p.sqls, commitStmt)
	b, sqls := p.batch, p.sqls
	p.batch, p.sqls = &pgx.Batch{}, nil
	br := p.sender.SendBatch(ctx, b)
	for i, s := range sqls {
		ct, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return tag, fmt.Errorf("%s: %w", summary(s), err)
		}
		if i == len(sqls)-1 {
			tag = ct
		}
	}
	err := br.Close()
	if tag.String() == "COMMIT" {
		// Committed: a failure after that (the backend terminated) changes nothing.
		return tag, nil
	}
	return tag, err
}

// summary names a statement for an error: its first words, up to the table.
func summary(sql string) string {
	f := strings.Fields(sql)
	for i, w := range f {
		if w == "INTO" || w == "UPDATE" || w == "FROM" {
			if i+1 < len(f) {
				return strings.ToLower(strings.Join(f[:i+2], " "))
			}
		}
	}
	if len(f) > 3 {
		f = f[:3]
	}
	return strings.ToLower(strings.Join(f, " "))
}

// errRow is a pgx.Row whose Scan fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// A statement takes its LIMIT as "LIMIT +?", never "LIMIT ?": SQLite
// (3.53 here) reads a bare LIMIT parameter's value while it plans, and so
// compiles the statement again each time that parameter is bound, which
// for a prepared list statement is every run (an eighth of a page read's
// CPU). The unary plus keeps the parameter out of the plan; the limit is
// still the bound integer. TestNoBareLimitParameter holds the rule.

// stmtCache keeps the fixed queries prepared on one *sql.DB, so that a
// transaction reuses its connection's compiled statement instead of parsing
// the SQL again (parsing was a third of a write's CPU time). Statements are
// prepared when the store opens: preparing on the DB later, inside a
// transaction, would wait for a connection the transaction holds.
type stmtCache struct {
	stmts map[string]*sql.Stmt
}

func prepareAll(ctx context.Context, db *sql.DB, queries []string) (*stmtCache, error) {
	c := &stmtCache{stmts: make(map[string]*sql.Stmt, len(queries))}
	for _, q := range queries {
		s, err := db.PrepareContext(ctx, q)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("sqlite: prepare %.40q: %w", q, err)
		}
		c.stmts[q] = s
	}
	return c, nil
}

func (c *stmtCache) close() {
	if c == nil {
		return
	}
	for _, s := range c.stmts {
		_ = s.Close()
	}
}

// readQueries are the fixed queries of readTx; writeQueries adds Tx's.
var (
	readQueries = []string{
		qArtifactByID, qArtifactByName, qArtifactVersion, qArtifactVersions, qContent,
		qListArtifactsAll, qListArtifactsPrefix,
		qTask, qReadyTaskAny, qExpiredClaims, qCounts, qTaskCounts,
		qNote, qListNotes, qLease, qListLeases, qIdempotent,
		qHead, qFloor, qEventsAll, qViewByID, qViewByName,
	}
	writeQueries = append([]string{
		qArtifactLeaseByID, qArtifactLeaseByName, qPutHead, qBumpHead, qPutVersion, qPutBlob, qStoredBlob, qDeleteArtifact, qPutTask, qPutDep,
		qPutNote, qDeleteNote, qPutLease, qPutIdempotent, qPruneIdempotent,
		qPutEvent, qAppendState, qIndexTail, qSetIndexedTo, qCompact, qSetFloor,
	}, readQueries...)
)

// txq runs statements in one transaction through a stmtCache. It is the
// querier of readTx and writeTx.
type txq struct {
	tx    *sql.Tx
	cache *stmtCache
}

// stmt returns query's statement bound to the transaction, or nil to run
// query unprepared.
func (q txq) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	s := q.cache.stmts[query]
	if s == nil {
		return nil, nil
	}
	return q.tx.StmtContext(ctx, s), nil
}

func (q txq) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	s, err := q.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return q.tx.ExecContext(ctx, query, args...)
	}
	return s.ExecContext(ctx, args...)
}

func (q txq) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	s, err := q.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return q.tx.QueryContext(ctx, query, args...)
	}
	return s.QueryContext(ctx, args...)
}

func (q txq) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	s, err := q.stmt(ctx, query)
	if err != nil || s == nil {
		// On a prepare error the unprepared query fails the same way, and
		// *sql.Row carries the error to Scan.
		return q.tx.QueryRowContext(ctx, query, args...)
	}
	return s.QueryRowContext(ctx, args...)
}

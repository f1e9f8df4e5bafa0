package sqlite

import (
	"context"
	"database/sql"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// A statement takes its LIMIT as "LIMIT +?", never "LIMIT ?": SQLite
// (3.53 here) reads a bare LIMIT parameter's value while it plans, and so
// compiles the statement again each time that parameter is bound, which
// for a prepared list statement is every run (an eighth of a page read's
// CPU). The unary plus keeps the parameter out of the plan; the limit is
// still the bound integer. TestNoBareLimitParameter holds the rule.

// stmtCache keeps a *sql.DB's statements prepared, so that a transaction
// reuses its connection's compiled statement instead of parsing the SQL
// again (parsing was a third of a write's CPU time). Every query runs
// unprepared the first time; the store prepares it once the transaction
// has let go of its connection (prepareWanted): preparing on the DB
// inside a transaction would wait for a connection the transaction holds.
// The fixed queries are all kept, once run; of the queries built from a
// filter (a list by kind, a claim by labels, an event page by type) up to
// maxBuilt are. None is prepared when the store opens: a wsctl process
// runs a few statements and exits, and preparing the fifty fixed ones
// was most of the CPU time of its store's opening.
type stmtCache struct {
	db    *sql.DB
	fixed map[string]bool // the fixed queries
	// stmts holds the fixed queries prepared so far, read without a lock
	// (a new map replaces it when one is added).
	stmts atomic.Pointer[map[string]*sql.Stmt]

	mu          sync.Mutex
	built       map[string]*sql.Stmt // built queries prepared after their first run
	wanted      []string             // built queries run unprepared since the last prepareWanted
	wantedFixed []string             // fixed queries run unprepared since the last prepareWanted
	closed      bool
}

// maxBuilt bounds the built queries a cache keeps prepared: the filters'
// combinations are few, but labels make them open-ended.
const maxBuilt = 64

// newStmtCache is db's cache, whose fixed queries are queries.
func newStmtCache(db *sql.DB, queries []string) *stmtCache {
	c := &stmtCache{db: db, fixed: make(map[string]bool, len(queries)), built: map[string]*sql.Stmt{}}
	for _, q := range queries {
		c.fixed[q] = true
	}
	c.stmts.Store(&map[string]*sql.Stmt{})
	return c
}

// get returns query's prepared statement, or nil to run it unprepared; a
// query not prepared yet is noted for prepareWanted.
func (c *stmtCache) get(query string) *sql.Stmt {
	if s := (*c.stmts.Load())[query]; s != nil {
		return s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fixed[query] {
		if !c.closed && !slices.Contains(c.wantedFixed, query) {
			c.wantedFixed = append(c.wantedFixed, query)
		}
		return nil
	}
	if s := c.built[query]; s != nil {
		return s
	}
	if len(c.built)+len(c.wanted) < maxBuilt && !slices.Contains(c.wanted, query) {
		c.wanted = append(c.wanted, query)
	}
	return nil
}

// prepareWanted prepares the queries noted since its last call. The
// caller holds none of the DB's connections (its transaction has ended),
// so preparing waits at most for another caller's statement. A query that
// fails to prepare runs unprepared, and is noted again when it next runs.
func (c *stmtCache) prepareWanted(ctx context.Context) {
	c.mu.Lock()
	wanted, wantedFixed := c.wanted, c.wantedFixed
	c.wanted, c.wantedFixed = nil, nil
	c.mu.Unlock()
	for _, q := range wantedFixed {
		s, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		old := *c.stmts.Load()
		if c.closed || old[q] != nil {
			c.mu.Unlock()
			_ = s.Close()
			continue
		}
		m := make(map[string]*sql.Stmt, len(old)+1)
		maps.Copy(m, old)
		m[q] = s
		c.stmts.Store(&m)
		c.mu.Unlock()
	}
	for _, q := range wanted {
		s, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if c.closed || c.built[q] != nil {
			c.mu.Unlock()
			_ = s.Close()
			continue
		}
		c.built[q] = s
		c.mu.Unlock()
	}
}

func (c *stmtCache) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, s := range *c.stmts.Load() {
		_ = s.Close()
	}
	c.stmts.Store(&map[string]*sql.Stmt{})
	for _, s := range c.built {
		_ = s.Close()
	}
	c.built = nil
}

// readQueries are the fixed queries of readTx; writeQueries adds Tx's.
var (
	readQueries = []string{
		qArtifactByID, qArtifactByName, qArtifactVersion, qArtifactVersions, qContent,
		qListArtifactsAll, qListArtifactsPrefix,
		qTask, qReadyTaskAny, qExpiredClaims, qCounts, qTaskCounts,
		qNote, qListNotes, qListKind, qListKindAfter, qListKindBefore, qListKindRange, qLease, qListLeases, qIdempotent,
		qHead, qFloor, qEventsAll, qViewByID, qViewByName,
	}
	writeQueries = append([]string{
		qArtifactLeaseByID, qArtifactLeaseByName, qArtifactLeaseByIDs, qArtifactLeaseByNames, qPutHead, qBumpHead, qPutVersion, qPutBlob, qStoredBlob, qDeleteArtifact, qPutTask, qPutDep,
		qTaskNamed, qDeleteTaskDeps, qDeleteTask, qVersionBlob, qDeleteVersion, qDeleteUnusedBlobs,
		qPutNote, qDeleteNote, qPutLease, qPutIdempotent, qPruneIdempotent,
		qPutEvent, qAppendState, qIndexTail, qSetIndexedTo, qCompact, qSetFloor,
	}, readQueries...)
)

// txq runs statements in one transaction through a stmtCache. It is the
// querier of readTx and writeTx.
type txq struct {
	tx    *sql.Tx
	cache *stmtCache
	// whole is set in write transactions: their statements (point reads
	// and writes under the write lock, mostly) run to the end once
	// started, ctx checked before each. Given a ctx that can end, modernc
	// starts a goroutine per statement to interrupt it (W1 c=16 on shared
	// handles: +4% without). A write whose callers all gave up still
	// stops at its next statement and rolls back; reads keep their
	// interruptible statements, as a page or an export can be long.
	whole bool
	// kept, in a write transaction, is what its statements reuse (see
	// kept); nil in a read transaction.
	kept *kept
}

// kept is what one write transaction's statements reuse. A group of
// writes runs the same few statements once per write, each a
// tx.StmtContext (a statement bound to the transaction: two allocations
// and a lock) and a context.WithoutCancel: binding each query once per
// transaction spares that for every write of the group but the first.
// Invariant: a bound statement is used only by the transaction that bound
// it (database/sql closes it when the transaction ends), and only by
// its one goroutine, as every statement of a transaction is.
type kept struct {
	stmts   map[string]*sql.Stmt
	in, out context.Context // the last ctx given and its WithoutCancel
}

// bound returns the ctx to run a statement with, or ctx's error when it
// has ended and the statement must not start.
func (q txq) bound(ctx context.Context) (context.Context, error) {
	if !q.whole {
		return ctx, nil
	}
	if err := ctx.Err(); err != nil {
		return ctx, err
	}
	if k := q.kept; k != nil {
		if k.in != ctx {
			k.in, k.out = ctx, context.WithoutCancel(ctx)
		}
		return k.out, nil
	}
	return context.WithoutCancel(ctx), nil
}

// stmt returns query's statement bound to the transaction, or nil to run
// query unprepared.
func (q txq) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	s := q.cache.get(query)
	if s == nil {
		return nil, nil
	}
	k := q.kept
	if k == nil {
		return q.tx.StmtContext(ctx, s), nil
	}
	if b := k.stmts[query]; b != nil {
		return b, nil
	}
	b := q.tx.StmtContext(ctx, s)
	if k.stmts == nil {
		k.stmts = make(map[string]*sql.Stmt, 8)
	}
	k.stmts[query] = b
	return b, nil
}

func (q txq) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx, err := q.bound(ctx)
	if err != nil {
		return nil, err
	}
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
	ctx, err := q.bound(ctx)
	if err != nil {
		return nil, err
	}
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
	if c, err := q.bound(ctx); err == nil {
		ctx = c // else the row fails with ctx's error
	}
	s, err := q.stmt(ctx, query)
	if err != nil || s == nil {
		// On a prepare error the unprepared query fails the same way, and
		// *sql.Row carries the error to Scan.
		return q.tx.QueryRowContext(ctx, query, args...)
	}
	return s.QueryRowContext(ctx, args...)
}

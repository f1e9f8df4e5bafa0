package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/agentspace/agentspace/workspace/driver"

	_ "modernc.org/sqlite" // the bare driver of the SQLite baseline
)

const rawSQLiteSchema = `
CREATE TABLE raw_art (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, version INTEGER NOT NULL);
CREATE TABLE raw_ver (id TEXT NOT NULL, version INTEGER NOT NULL, content BLOB, PRIMARY KEY (id, version));
CREATE TABLE raw_ev (seq INTEGER PRIMARY KEY, actor TEXT NOT NULL, type TEXT NOT NULL, subject TEXT NOT NULL, version INTEGER NOT NULL);
CREATE TABLE raw_lease (resource TEXT PRIMARY KEY, owner TEXT NOT NULL, token INTEGER NOT NULL, expires INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE raw_task (id INTEGER PRIMARY KEY, grp TEXT NOT NULL, status TEXT NOT NULL, priority INTEGER NOT NULL, dep INTEGER, owner TEXT NOT NULL DEFAULT '');
CREATE INDEX raw_task_ready ON raw_task (grp, status, priority DESC, id);
CREATE TABLE raw_note (kind TEXT NOT NULL, key TEXT NOT NULL, body TEXT NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (kind, key)) WITHOUT ROWID;
`

// sqliteConns is the SQLite baseline's connections: per pseudo-handle one
// writer (BEGIN IMMEDIATE, as the backend) and a small read pool.
type sqliteConns struct {
	path    string
	writers []*sql.DB
	readers []*sql.DB
	// wstmts[i] and rstmts[i] are writers[i]'s and readers[i]'s statements.
	wstmts, rstmts []*stmts
}

// stmts keeps the baseline's statements prepared on one *sql.DB, as a
// careful user of database/sql does and as the backend does (pgx's raw
// baseline gets the same from pgx's statement cache): parsing is a large
// share of a small statement's cost in modernc's SQLite. A statement's
// first run is unprepared; it is prepared when the DB's connection is
// free (a writer's only connection is held by its transaction until then).
type stmts struct {
	db      *sql.DB
	mu      sync.Mutex
	m       map[string]*sql.Stmt
	pending []string
}

func newStmts(db *sql.DB) *stmts { return &stmts{db: db, m: map[string]*sql.Stmt{}} }

// get returns q's statement, or nil (then q is prepared by the next flush).
func (s *stmts) get(q string) *sql.Stmt {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.m[q]
	if st == nil && !slices.Contains(s.pending, q) {
		s.pending = append(s.pending, q)
	}
	return st
}

// flush prepares the statements get did not have; one that fails to
// prepare stays unprepared.
func (s *stmts) flush(ctx context.Context) {
	s.mu.Lock()
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, q := range pending {
		st, err := s.db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		s.mu.Lock()
		if s.m[q] == nil {
			s.m[q], st = st, nil
		}
		s.mu.Unlock()
		if st != nil {
			_ = st.Close()
		}
	}
}

func (s *stmts) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.m {
		_ = st.Close()
	}
}

// openRawSQLite creates the baseline's database as a sibling of the store's
// file (same file system), with the backend's pragmas.
func openRawSQLite(ctx context.Context, cfg driver.Config, handles int, prefix string) (rawStore, error) {
	path, _, _ := strings.Cut(cfg.Target, "?")
	sync := "FULL"
	if v, ok := cfg.Params["ws_synchronous"]; ok {
		sync = strings.ToUpper(v)
	}
	c := &sqliteConns{path: filepath.Join(filepath.Dir(path), filepath.Base(path)+"."+prefix+".raw.db")}
	base := c.path + "?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)"
	for range max(1, handles) {
		w, err := sql.Open("sqlite", base+"&_pragma=journal_mode(WAL)&_pragma=synchronous("+sync+")&_txlock=immediate")
		if err != nil {
			c.close()
			return nil, err
		}
		w.SetMaxOpenConns(1)
		c.writers = append(c.writers, w)
		c.wstmts = append(c.wstmts, newStmts(w))
		rd, err := sql.Open("sqlite", base+"&_pragma=query_only(1)")
		if err != nil {
			c.close()
			return nil, err
		}
		rd.SetMaxOpenConns(4)
		rd.SetMaxIdleConns(4)
		c.readers = append(c.readers, rd)
		c.rstmts = append(c.rstmts, newStmts(rd))
	}
	if _, err := c.writers[0].ExecContext(ctx, rawSQLiteSchema); err != nil {
		c.close()
		return nil, fmt.Errorf("raw sqlite baseline %s: %w", c.path, err)
	}
	return &rawSQL{db: c, prefix: prefix}, nil
}

func (c *sqliteConns) close() {
	for _, s := range append(c.wstmts, c.rstmts...) {
		s.close()
	}
	for _, db := range append(c.writers, c.readers...) {
		_ = db.Close()
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(c.path + suffix)
	}
}

func (c *sqliteConns) tx(ctx context.Context, w int, fn func(q sqlQ) error) error {
	i := w % len(c.writers)
	tx, err := c.writers[i].BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer c.wstmts[i].flush(ctx)
	if err := fn(sqlTx{tx, c.wstmts[i]}); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (c *sqliteConns) read(ctx context.Context, w int, fn func(q sqlQ) error) error {
	s := c.rstmts[w%len(c.readers)]
	defer s.flush(ctx)
	return fn(sqlDB{s})
}

func (c *sqliteConns) countRows(ctx context.Context, w int, query string, args ...any) (int, error) {
	s := c.rstmts[w%len(c.readers)]
	defer s.flush(ctx)
	var (
		rows *sql.Rows
		err  error
	)
	if st := s.get(query); st != nil {
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = s.db.QueryContext(ctx, query, args...)
	}
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

type sqlExecer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// sqlTx runs statements in a write transaction, prepared where s has them.
type sqlTx struct {
	tx *sql.Tx
	s  *stmts
}

// sqlDB runs statements on a read pool, prepared where s has them.
type sqlDB struct{ s *stmts }

func (t sqlTx) on(ctx context.Context, q string) sqlExecer {
	if st := t.s.get(q); st != nil {
		return stmtExecer{t.tx.StmtContext(ctx, st)}
	}
	return t.tx
}

func (d sqlDB) on(q string) sqlExecer {
	if st := d.s.get(q); st != nil {
		return stmtExecer{st}
	}
	return d.s.db
}

func (t sqlTx) exec(ctx context.Context, q string, args ...any) (int64, error) {
	return execSQL(ctx, t.on(ctx, q), q, args)
}
func (t sqlTx) queryRow(ctx context.Context, q string, args []any, dest ...any) error {
	return t.on(ctx, q).QueryRowContext(ctx, q, args...).Scan(dest...)
}
func (d sqlDB) exec(ctx context.Context, q string, args ...any) (int64, error) {
	return execSQL(ctx, d.on(q), q, args)
}
func (d sqlDB) queryRow(ctx context.Context, q string, args []any, dest ...any) error {
	return d.on(q).QueryRowContext(ctx, q, args...).Scan(dest...)
}

// stmtExecer runs a prepared statement; the query text is its own.
type stmtExecer struct{ st *sql.Stmt }

func (e stmtExecer) ExecContext(ctx context.Context, _ string, args ...any) (sql.Result, error) {
	return e.st.ExecContext(ctx, args...)
}
func (e stmtExecer) QueryRowContext(ctx context.Context, _ string, args ...any) *sql.Row {
	return e.st.QueryRowContext(ctx, args...)
}

func execSQL(ctx context.Context, e sqlExecer, q string, args []any) (int64, error) {
	res, err := e.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (r *rawSQL) close() {
	if c, ok := r.db.(interface{ close() }); ok {
		c.close()
	}
}

// isNoRows reports an empty claim: the pool ran dry.
func isNoRows(err error) bool {
	return errors.Is(err, sql.ErrNoRows) || isPgNoRows(err)
}

package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentspace/agentspace/workspace"
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
}

// openRawSQLite creates the baseline's database as a sibling of the store's
// file (same file system), with the backend's pragmas.
func openRawSQLite(ctx context.Context, cfg workspace.Config, handles int, prefix string) (rawStore, error) {
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
		rd, err := sql.Open("sqlite", base+"&_pragma=query_only(1)")
		if err != nil {
			c.close()
			return nil, err
		}
		rd.SetMaxOpenConns(4)
		rd.SetMaxIdleConns(4)
		c.readers = append(c.readers, rd)
	}
	if _, err := c.writers[0].ExecContext(ctx, rawSQLiteSchema); err != nil {
		c.close()
		return nil, fmt.Errorf("raw sqlite baseline %s: %w", c.path, err)
	}
	return &rawSQL{db: c, prefix: prefix}, nil
}

func (c *sqliteConns) close() {
	for _, db := range append(c.writers, c.readers...) {
		_ = db.Close()
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(c.path + suffix)
	}
}

func (c *sqliteConns) tx(ctx context.Context, w int, fn func(q sqlQ) error) error {
	tx, err := c.writers[w%len(c.writers)].BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(sqlTx{tx}); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (c *sqliteConns) read(ctx context.Context, w int, fn func(q sqlQ) error) error {
	return fn(sqlDB{c.readers[w%len(c.readers)]})
}

func (c *sqliteConns) countRows(ctx context.Context, w int, query string, args ...any) (int, error) {
	rows, err := c.readers[w%len(c.readers)].QueryContext(ctx, query, args...)
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

type sqlTx struct{ *sql.Tx }
type sqlDB struct{ *sql.DB }

func (t sqlTx) exec(ctx context.Context, q string, args ...any) (int64, error) {
	return execSQL(ctx, t.Tx, q, args)
}
func (t sqlTx) queryRow(ctx context.Context, q string, args []any, dest ...any) error {
	return t.Tx.QueryRowContext(ctx, q, args...).Scan(dest...)
}
func (d sqlDB) exec(ctx context.Context, q string, args ...any) (int64, error) {
	return execSQL(ctx, d.DB, q, args)
}
func (d sqlDB) queryRow(ctx context.Context, q string, args []any, dest ...any) error {
	return d.DB.QueryRowContext(ctx, q, args...).Scan(dest...)
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

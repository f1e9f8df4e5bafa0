package sqlite

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentspace/agentspace/workspace/driver"
)

// SnapshotFile implements driver.FileSnapshotter with VACUUM INTO, run on
// a reader connection: it copies the database as of one read transaction,
// so writers of this and other processes go on (WAL), and the copy is
// compact and holds no WAL of its own. The copy is then opened read-only
// and must pass PRAGMA integrity_check; a copy that fails is removed.
func (s *store) SnapshotFile(ctx context.Context, path string) (driver.Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(abs); !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("sqlite: backup %s: the file exists", path)
	}
	if err := s.vacuumInto(ctx, abs); err != nil {
		_ = os.Remove(abs)
		return nil, fmt.Errorf("sqlite: backup: VACUUM INTO %s: %w", path, describe(err, s.path))
	}
	cp, err := s.openCopy(ctx, abs)
	if err != nil {
		_ = os.Remove(abs)
		return nil, err
	}
	return cp, nil
}

// vacuumInto runs VACUUM INTO abs on a reader connection (the writer's,
// for a store on one *sql.DB), with query_only lifted for it if set
// (VACUUM INTO writes only the new file, but query_only refuses it); a
// connection whose setting cannot be put back is dropped from the pool.
func (s *store) vacuumInto(ctx context.Context, abs string) error {
	conn, err := s.r.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var queryOnly int
	if err := conn.QueryRowContext(ctx, `PRAGMA query_only`).Scan(&queryOnly); err != nil {
		return err
	}
	if queryOnly == 0 {
		_, err = conn.ExecContext(ctx, `VACUUM INTO ?`, abs)
		return err
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA query_only = 0`); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, `VACUUM INTO ?`, abs)
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA query_only = 1`); rerr != nil {
		_ = conn.Raw(func(any) error { return sqldriver.ErrBadConn })
		return errors.Join(err, rerr)
	}
	return err
}

// openCopy opens the database file at abs read-only (it writes nothing,
// not even a -shm file: the copy is not in WAL mode), checks it with
// PRAGMA integrity_check, and returns a store on it that reads as s does.
func (s *store) openCopy(ctx context.Context, abs string) (_ *store, err error) {
	u := url.URL{Scheme: "file", Path: abs, RawQuery: "mode=ro&_pragma=query_only(1)&_pragma=busy_timeout(10000)"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	db.SetMaxOpenConns(1)
	defer func() {
		if err != nil {
			_ = db.Close()
		}
	}()
	var problems []string
	rows, err := db.QueryContext(ctx, `PRAGMA integrity_check(20)`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: backup: integrity check: %w", describe(err, abs))
	}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			_ = rows.Close()
			return nil, fmt.Errorf("sqlite: backup: integrity check: %w", err)
		}
		problems = append(problems, p)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("sqlite: backup: integrity check: %w", err)
	}
	if len(problems) != 1 || problems[0] != "ok" {
		return nil, fmt.Errorf("sqlite: backup: the copy fails its integrity check: %s", strings.Join(problems, "; "))
	}
	st := newStore(db, db, "", true, s.indexBatch, 0, s.log)
	if err := st.prepare(ctx); err != nil {
		return nil, err
	}
	return st, nil
}

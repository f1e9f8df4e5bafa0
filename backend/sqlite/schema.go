package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/agentspace/agentspace/backend/internal/sqlmigrate"
	"github.com/agentspace/agentspace/workspace"

	migrations "github.com/agentspace/agentspace/migrations/sqlite"
)

// lockPathFor is the sidecar file whose flock serializes migrations (and
// schema checks) across processes.
func lockPathFor(path string) string { return path + ".migrate.lock" }

// LatestVersion is the newest schema version this code knows.
func LatestVersion() uint {
	list, _ := steps()
	return sqlmigrate.Latest(list)
}

// schemaState is what a database file says about its schema.
type schemaState struct {
	version uint
	dirty   bool
	empty   bool // no tables besides the version table
	// chainNext is meta.chain_next: the first event an upgrade has yet to
	// chain, 0 if none (see chainup.go).
	chainNext int64
}

func readSchema(ctx context.Context, db *sql.DB, path string) (schemaState, error) {
	var st schemaState
	var others, hasMig int
	err := db.QueryRowContext(ctx, `
		SELECT
		  (SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite!_%' ESCAPE '!' AND name <> 'schema_migrations'),
		  (SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations')`).Scan(&others, &hasMig)
	if err != nil {
		return st, fmt.Errorf("sqlite: reading the schema: %w", describe(err, path))
	}
	st.empty = others == 0
	if hasMig == 0 {
		return st, nil
	}
	var v int64
	err = db.QueryRowContext(ctx, `SELECT version, dirty FROM schema_migrations LIMIT 1`).Scan(&v, &st.dirty)
	if errors.Is(err, sql.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("sqlite: reading the schema version: %w", describe(err, path))
	}
	if v > 0 {
		st.version = uint(v)
	}
	if st.dirty || st.version < chainVersion || st.version > LatestVersion() {
		return st, nil
	}
	if err := db.QueryRowContext(ctx, qChainNextOnly).Scan(&st.chainNext); err != nil {
		return st, fmt.Errorf("sqlite: reading the chain's resume point: %w", describe(err, path))
	}
	return st, nil
}

// ensureSchema checks st's schema under the migration lock (OpenDB's path).
func ensureSchema(ctx context.Context, st *store, autoMigrate bool) error {
	if st.path != "" {
		unlock, err := lockFile(ctx, lockPathFor(st.path))
		if err != nil {
			return err
		}
		defer unlock()
	}
	return checkOrMigrate(ctx, st, autoMigrate)
}

// checkOrMigrate brings an empty store (or, with autoMigrate, an older one)
// to the latest schema and reports any other mismatch as a
// *workspace.SchemaError. The caller holds the migration lock.
func checkOrMigrate(ctx context.Context, st *store, autoMigrate bool) error {
	s, err := readSchema(ctx, st.w, st.path)
	if err != nil {
		return err
	}
	latest := LatestVersion()
	switch {
	case s.dirty:
		return &workspace.SchemaError{Current: int64(s.version), Want: int64(latest), Dirty: true} // #nosec G115 -- schema versions are small counts (our migrations number a handful)
	case s.version == latest:
		// An upgrade cut short may have left events to chain: nothing is
		// appended before they are.
		return chainExisting(ctx, st.w, st.path)
	case s.version > latest:
		return &workspace.SchemaError{Current: int64(s.version), Want: int64(latest)} // #nosec G115 -- schema versions are small counts (our migrations number a handful)
	case s.version == 0 && !s.empty:
		return fmt.Errorf("sqlite: %s has tables but no agentspace schema version: it is not an agentspace store: %w",
			st.path, &workspace.SchemaError{Want: int64(latest)}) // #nosec G115 -- schema versions are small counts (our migrations number a handful)
	case s.version == 0 || autoMigrate:
		if s.version > 0 {
			st.log.Info("agentspace: migrating the sqlite schema", "path", st.path, "from", s.version, "to", latest)
		}
		if err := runMigration(ctx, st.w, func(r *sqlmigrate.Runner) error { return r.Up(ctx) }); err != nil {
			return err
		}
		return chainExisting(ctx, st.w, st.path)
	}
	return &workspace.SchemaError{Current: int64(s.version), Want: int64(latest)} // #nosec G115 -- schema versions are small counts (our migrations number a handful)
}

// migrateHook is the tests' BeforeCommit of every migration step (see
// sqlmigrate.Runner; the crash test stops the process there).
var migrateHook func(ctx context.Context, version uint, up bool) error

// steps are the migrations this binary carries.
var steps = sync.OnceValues(func() ([]sqlmigrate.Step, error) { return sqlmigrate.Load(migrations.FS) })

// runMigration runs step with the migrations on db: each step one
// transaction with the version it records. The caller holds the
// migration lock (the flock of lockPathFor).
func runMigration(ctx context.Context, db *sql.DB, step func(r *sqlmigrate.Runner) error) error {
	list, err := steps()
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	r := &sqlmigrate.Runner{
		DB:    db,
		Steps: list,
		Dialect: sqlmigrate.Dialect{
			Read:   `SELECT version, dirty FROM schema_migrations LIMIT 1`,
			Clear:  `DELETE FROM schema_migrations`,
			Exists: `SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations')`,
			Create: `CREATE TABLE IF NOT EXISTS schema_migrations (version uint64, dirty bool);
				CREATE UNIQUE INDEX IF NOT EXISTS version_unique ON schema_migrations (version)`,
			Insert: `INSERT INTO schema_migrations (version, dirty) VALUES (?, ?)`,
		},
		BeforeCommit: migrateHook,
	}
	err = step(r)
	var se *sqlmigrate.StepError
	switch {
	case sqlmigrate.Typed(err):
		return err
	case errors.As(err, &se):
		return fmt.Errorf("sqlite: %w", err)
	}
	return fmt.Errorf("sqlite: migrate: %w", err)
}

// migrator is the workspace.Migrator for `wsctl migrate`. Every step holds
// the cross-process migration lock.
type migrator struct {
	db       *sql.DB
	lockPath string
	path     string
	owned    bool
}

func (m *migrator) Version(ctx context.Context) (uint, bool, error) {
	s, err := readSchema(ctx, m.db, m.path)
	return s.version, s.dirty, err
}

func (m *migrator) Latest() uint { return LatestVersion() }

// locked runs step under the migration lock; chain then chains the events
// an upgrade left to chain (chainExisting), still under the lock.
func (m *migrator) locked(ctx context.Context, chain bool, step func(r *sqlmigrate.Runner) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	unlock, err := lockFile(ctx, m.lockPath)
	if err != nil {
		return err
	}
	defer unlock()
	if err := runMigration(ctx, m.db, step); err != nil || !chain {
		return err
	}
	return chainExisting(ctx, m.db, m.path)
}

func (m *migrator) Up(ctx context.Context) error {
	return m.locked(ctx, true, func(r *sqlmigrate.Runner) error { return r.Up(ctx) })
}

func (m *migrator) Down(ctx context.Context, n int) error {
	return m.locked(ctx, false, func(r *sqlmigrate.Runner) error { return r.Down(ctx, n) })
}

func (m *migrator) Goto(ctx context.Context, v uint) error {
	return m.locked(ctx, true, func(r *sqlmigrate.Runner) error { return r.Goto(ctx, v) })
}

func (m *migrator) Force(ctx context.Context, v int) error {
	if v < 0 || uint(v) > LatestVersion() {
		return &workspace.InvalidError{Field: "version", Reason: fmt.Sprintf("%d: want a version between 0 and %d", v, LatestVersion())}
	}
	return m.locked(ctx, false, func(r *sqlmigrate.Runner) error { return r.Force(ctx, v) })
}

func (m *migrator) Close() error {
	if m.owned {
		return m.db.Close()
	}
	return nil
}

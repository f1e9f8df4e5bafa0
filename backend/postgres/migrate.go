package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/agentspace/agentspace/backend/internal/sqlmigrate"
	pgmigrations "github.com/agentspace/agentspace/migrations/postgres"
	"github.com/agentspace/agentspace/workspace"
)

// migrationsTable is the version table, inside the workspace's schema (in
// golang-migrate's layout, which earlier releases migrated with).
const migrationsTable = "schema_migrations"

// steps are the migrations this binary carries, and latest the newest's version.
var (
	steps  = sync.OnceValues(func() ([]sqlmigrate.Step, error) { return sqlmigrate.Load(pgmigrations.FS) })
	latest = func() uint { s, _ := steps(); return sqlmigrate.Latest(s) }
)

// schemaState is what a schema holds, as far as the version check cares.
type schemaState struct {
	exists  bool // the schema exists
	others  int  // tables in it besides the version table
	version int64
	dirty   bool
	hasRow  bool // a version is recorded
	// chainNext is counters.chain_next: the first event an upgrade has
	// yet to chain, 0 if none (see chainup.go).
	chainNext int64
}

// migrateLockID is the advisory lock of the schema's migrations: holding
// it (even transaction-scoped) waits out a migration in progress
// elsewhere. It is the key golang-migrate, which earlier releases ran
// migrations with, derives from the same names (a CRC-32 of schema, table
// and database joined by NULs, times its salt), so that a migration by an
// earlier release and one by this one exclude each other.
func migrateLockID(database, schema string) int64 {
	const salt = 1486364155
	sum := crc32.ChecksumIEEE([]byte(schema + "\x00" + migrationsTable + "\x00" + database))
	return int64(sum * salt)
}

// readSchemaState reads the schema's version while no migration runs.
func readSchemaState(ctx context.Context, pool *pgxpool.Pool, schema string) (schemaState, error) {
	var st schemaState
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var db string
		if err := tx.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLockID(db, schema)); err != nil {
			return err
		}
		var hasTable bool
		err := tx.QueryRow(ctx, probeQuery, schema, migrationsTable).Scan(&st.exists, &hasTable)
		if err != nil {
			return err
		}
		// The other tables are counted only for a schema with no version:
		// pg_class has no index by schema alone, so the count scans it, and
		// a database that has seen many schemas come and go (a test
		// server's, or a busy one's) makes that scan cost tens of ms.
		countOthers := func() error {
			return tx.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename <> $2`,
				schema, migrationsTable).Scan(&st.others)
		}
		if !hasTable {
			return countOthers()
		}
		q := `SELECT version, dirty FROM ` + pgx.Identifier{schema, migrationsTable}.Sanitize() + ` LIMIT 1`
		err = tx.QueryRow(ctx, q).Scan(&st.version, &st.dirty)
		if errors.Is(err, pgx.ErrNoRows) {
			return countOthers()
		}
		st.hasRow = err == nil
		newest := int64(latest()) // #nosec G115 -- schema versions are small counts (our migrations number a handful)
		if err != nil || st.dirty || st.version < chainVersion || st.version > newest {
			return err
		}
		q = `SELECT chain_next FROM ` + pgx.Identifier{schema, "counters"}.Sanitize()
		return tx.QueryRow(ctx, q).Scan(&st.chainNext)
	})
	if err != nil {
		return st, fmt.Errorf("postgres: read schema version of %q: %w", schema, err)
	}
	return st, nil
}

// checkSchemaVersion creates the current schema in an empty one, migrates
// an older one if auto, and refuses dirty, older or newer ones. Migrations
// run on a connection made from session: the migration files name no
// schema and rely on the connection's search_path, which a transaction
// pooler does not keep.
func checkSchemaVersion(ctx context.Context, pool *pgxpool.Pool, session *pgx.ConnConfig, schema string, auto bool) error {
	want := int64(latest()) // #nosec G115 -- schema versions are small counts (our migrations number a handful)
	for pass := 0; ; pass++ {
		st, err := readSchemaState(ctx, pool, schema)
		if err != nil {
			return err
		}
		migrateUp := false
		switch {
		case !st.hasRow && st.others > 0:
			return fmt.Errorf("postgres: schema %q holds tables but no agentspace schema version: refusing to touch it", schema)
		case !st.hasRow:
			migrateUp = true
		case st.dirty:
			return &workspace.SchemaError{Current: st.version, Want: want, Dirty: true}
		case st.version > want:
			return &workspace.SchemaError{Current: st.version, Want: want}
		case st.version < want && !auto:
			return &workspace.SchemaError{Current: st.version, Want: want}
		case st.version < want:
			migrateUp = true
		case st.chainNext != 0:
			// An upgrade cut short left events to chain: nothing is
			// appended before they are.
			return finishChain(ctx, session, schema)
		default:
			return nil
		}
		if pass > 0 {
			return fmt.Errorf("postgres: schema %q is at version %d after migrating, want %d", schema, st.version, want)
		}
		if !migrateUp {
			return nil
		}
		m, err := newMigrator(ctx, session, schema)
		if err != nil {
			return err
		}
		err = m.Up(ctx)
		if cerr := m.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}

// finishChain chains what an upgrade left to chain (chainup.go).
func finishChain(ctx context.Context, session *pgx.ConnConfig, schema string) error {
	m, err := newMigrator(ctx, session, schema)
	if err != nil {
		return err
	}
	err = m.chain(ctx)
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	return err
}

// migrator is the workspace.Migrator of one schema: its steps run one
// transaction each, the version they record in the same transaction
// (backend/internal/sqlmigrate), holding the schema's migration lock.
type migrator struct {
	r  sqlmigrate.Runner
	db *sql.DB
}

// migrateHooks are the tests' BeforeCommit of each schema's migrations
// (SetMigrateHook in export_test.go).
var migrateHooks sync.Map // schema -> func(ctx context.Context, version uint, up bool) error

// newMigrator opens the migrations of schema on a connection whose
// search_path is the schema, creating the schema first if it does not exist.
func newMigrator(ctx context.Context, ccfg *pgx.ConnConfig, schema string) (*migrator, error) {
	return newMigratorFS(ctx, ccfg, schema, pgmigrations.FS)
}

// newMigratorFS is newMigrator with the migration files of fsys.
func newMigratorFS(ctx context.Context, ccfg *pgx.ConnConfig, schema string, fsys fs.FS) (*migrator, error) {
	if err := checkSchema(schema); err != nil {
		return nil, err
	}
	steps, err := sqlmigrate.Load(fsys)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	cfg := ccfg.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	db := stdlib.OpenDB(*cfg)
	if err := ensureSchema(ctx, db, schema); err != nil {
		_ = db.Close()
		return nil, err
	}
	var database string
	if err := db.QueryRowContext(ctx, `SELECT current_database()`).Scan(&database); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("postgres: migrations: %w", err)
	}
	lockID := migrateLockID(database, schema)
	m := &migrator{db: db, r: sqlmigrate.Runner{
		DB:    db,
		Steps: steps,
		Dialect: sqlmigrate.Dialect{
			// The connection's search_path is the schema alone.
			Exists: `SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'schema_migrations')`,
			Read:   `SELECT version, dirty FROM ` + pgx.Identifier{schema, migrationsTable}.Sanitize() + ` LIMIT 1`,
			Clear:  `DELETE FROM ` + pgx.Identifier{schema, migrationsTable}.Sanitize(),
			Create: `CREATE TABLE IF NOT EXISTS ` + pgx.Identifier{schema, migrationsTable}.Sanitize() + ` (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL)`,
			Insert: `INSERT INTO ` + pgx.Identifier{schema, migrationsTable}.Sanitize() + ` (version, dirty) VALUES ($1, $2)`,
			// Transaction-scoped, so a step holds it to its COMMIT and a
			// crash lets go of it; an earlier release's session lock on
			// the same key waits for it, and it for that.
			Lock: func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, lockID)
				return err
			},
		},
	}}
	if h, ok := migrateHooks.Load(schema); ok {
		m.r.BeforeCommit = h.(func(context.Context, uint, bool) error)
	}
	return m, nil
}

// ensureSchema creates the schema unless it exists. Only creating needs the
// CREATE privilege on the database; a role given a ready schema needs none.
func ensureSchema(ctx context.Context, db *sql.DB, schema string) error {
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		return fmt.Errorf("postgres: look for schema %q: %w", schema, err)
	}
	if exists {
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("postgres: create schema %q: %w", schema, err)
	}
	defer func() { _ = tx.Rollback() }()
	// Two processes creating the schema at once would race in the catalog.
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey(schema)); err != nil {
		return fmt.Errorf("postgres: create schema %q: %w", schema, err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
		return fmt.Errorf("postgres: create schema %q (the role needs CREATE on the database, or create the schema for it): %w", schema, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("postgres: create schema %q: %w", schema, err)
	}
	return nil
}

// done maps what a step run returned: a failed step's error names its
// file and where in it the server pointed.
func (m *migrator) done(err error) error {
	var se *sqlmigrate.StepError
	if errors.As(err, &se) {
		return migrationError(se)
	}
	if sqlmigrate.Typed(err) {
		return err
	}
	return fmt.Errorf("postgres: migrate: %w", err)
}

// migrationError makes a failed step's error one line: the file, the line
// and column the server pointed at, that line's text, and the server's
// message. The server's error stays wrapped for errors.As.
func migrationError(se *sqlmigrate.StepError) error {
	file, cause := se.Step.File(se.Up), se.Err
	text := se.Step.Up
	if !se.Up {
		text = se.Step.Down
	}
	var pgErr *pgconn.PgError
	if !errors.As(cause, &pgErr) || pgErr.Position <= 0 {
		return fmt.Errorf("postgres: migration %s failed: %w", file, cause)
	}
	line, col, lineText := position(text, 0, int(pgErr.Position))
	msg := fmt.Sprintf("postgres: migration %s, line %d, column %d (%s)", file, line, col, strconv.Quote(lineText))
	if pgErr.Hint != "" {
		cause = fmt.Errorf("%w; hint: %s", cause, pgErr.Hint)
	}
	return fmt.Errorf("%s: %w", msg, cause)
}

// position turns the server's error position (1-based, in characters of the
// statement that starts at byte start of text) into a 1-based line and
// column of text, and that line's text, trimmed and cut to 80 characters.
func position(text string, start, pos int) (line, col int, lineText string) {
	off := start
	for i := 1; i < pos && off < len(text); i++ {
		_, size := utf8.DecodeRuneInString(text[off:])
		off += size
	}
	line = 1 + strings.Count(text[:off], "\n")
	lineStart := strings.LastIndexByte(text[:off], '\n') + 1
	col = 1 + utf8.RuneCountInString(text[lineStart:off])
	lineText, _, _ = strings.Cut(text[lineStart:], "\n")
	lineText = strings.TrimSpace(lineText)
	if r := []rune(lineText); len(r) > 80 {
		lineText = string(r[:80]) + "…"
	}
	return line, col, lineText
}

func (m *migrator) Version(ctx context.Context) (uint, bool, error) {
	v, dirty, err := m.r.Version(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("postgres: migration version: %w", err)
	}
	return v, dirty, nil
}

func (m *migrator) Latest() uint { return m.r.Latest() }

// Up migrates to the latest version and chains the events written before
// the chain.
func (m *migrator) Up(ctx context.Context) error {
	if err := m.done(m.r.Up(ctx)); err != nil {
		return err
	}
	return m.chain(ctx)
}

func (m *migrator) Down(ctx context.Context, n int) error {
	return m.done(m.r.Down(ctx, n))
}

func (m *migrator) Goto(ctx context.Context, v uint) error {
	if err := m.done(m.r.Goto(ctx, v)); err != nil || v == 0 {
		return err
	}
	return m.chain(ctx)
}

func (m *migrator) Force(ctx context.Context, v int) error {
	return m.done(m.r.Force(ctx, v))
}

func (m *migrator) Close() error { return m.db.Close() }

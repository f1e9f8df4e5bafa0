package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

// DefaultSchema is the schema a workspace lives in when ws_schema is not given.
const DefaultSchema = "agentspace"

// The backend's own DSN parameters.
const (
	paramSchema    = "ws_schema"
	paramListenDSN = "ws_listen_dsn"
	paramListen    = "ws_listen"
)

func init() {
	d := pgDriver{}
	driver.Register("postgres", engine.Backend(d))
	driver.Register("postgresql", engine.Backend(d))
}

// Options configure a store opened with OpenPool. The zero value is the
// default schema with LISTEN on the pool's own server.
type Options struct {
	// Schema holds the workspace (default DefaultSchema).
	Schema string
	// ListenDSN, when set, is where the LISTEN connection and schema
	// migrations go: a session connection, not a transaction-mode pooler.
	// Default: the pool's config.
	ListenDSN string
	// NoListen turns LISTEN/NOTIFY off: other handles' writes are polled for.
	NoListen bool
	// AutoMigrate lets OpenPool migrate an older schema up.
	AutoMigrate bool
	// Logger receives diagnostics (default slog.Default()).
	Logger *slog.Logger
}

var schemaRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`) })

// checkSchema accepts names that need no quoting and cannot be a system schema.
func checkSchema(name string) error {
	if !schemaRE().MatchString(name) || strings.HasPrefix(name, "pg_") || name == "information_schema" {
		return &workspace.InvalidError{Field: paramSchema, Reason: fmt.Sprintf(
			"%q: want lower-case letters, digits and underscores, starting with a letter or underscore, at most 48 bytes, not pg_*", name)}
	}
	return nil
}

// OpenPool opens the workspace in opts.Schema of the database pool reaches,
// for programs that manage their own pool. The pool stays the caller's:
// closing the workspace does not close it. An empty schema gets the current
// tables; an older one is a *workspace.SchemaError unless opts.AutoMigrate.
func OpenPool(ctx context.Context, pool *pgxpool.Pool, opts Options, wsOpts workspace.Options) (*workspace.Workspace, error) {
	if opts.Logger == nil {
		opts.Logger = wsOpts.Logger
	}
	st, err := openStore(ctx, pool, false, opts)
	if err != nil {
		return nil, err
	}
	return engine.New(st, wsOpts), nil
}

type pgDriver struct{}

func (pgDriver) Params() []string { return []string{paramSchema, paramListenDSN, paramListen} }

func (pgDriver) Open(ctx context.Context, cfg driver.Config) (driver.Store, error) {
	return openDSN(ctx, cfg, false)
}

// OpenExisting implements driver.ExistingOpener: the probe's queries run
// on the pool the store then opens on, so a must-exist open (every wsctl
// call, every server) starts one server session, not two.
func (pgDriver) OpenExisting(ctx context.Context, cfg driver.Config) (driver.Store, error) {
	return openDSN(ctx, cfg, true)
}

// openDSN opens a pool on cfg.DSN and the store on it; with mustExist the
// schema is first probed for (probeOn) on that pool.
func openDSN(ctx context.Context, cfg driver.Config, mustExist bool) (driver.Store, error) {
	opts, err := optionsOf(cfg)
	if err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, driver.RedactError(fmt.Errorf("parse dsn: %w", err), cfg.DSN)
	}
	pcfg.PrepareConn = prepareConn
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, driver.RedactError(fmt.Errorf("connect: %w", err), cfg.DSN)
	}
	if mustExist {
		if err := probeOn(ctx, pool, opts.Schema, pcfg.ConnConfig.Database, cfg.DSN); err != nil {
			pool.Close()
			if nw := (*workspace.NoWorkspaceError)(nil); errors.As(err, &nw) {
				return nil, err
			}
			return nil, driver.RedactError(unavailable(err, false), cfg.DSN)
		}
	}
	st, err := openStore(ctx, pool, true, opts)
	if err != nil {
		pool.Close()
		return nil, driver.RedactError(unavailable(err, false), cfg.DSN)
	}
	return st, nil
}

// LatestVersion is the newest schema version this code's migrations know.
func LatestVersion() uint { return latest() }

// probeQuery tells whether the schema exists and holds the version table.
// Both are lookups by key (pg_class by name and schema): a database with
// many schemas, or a catalog bloated by schemas come and gone, costs no
// scan.
const probeQuery = `SELECT n.oid IS NOT NULL,
	EXISTS (SELECT 1 FROM pg_class c WHERE c.relname = $2 AND c.relnamespace = n.oid AND c.relkind IN ('r', 'p'))
	FROM (SELECT 1) AS one LEFT JOIN pg_namespace n ON n.nspname = $1`

// Probe reports whether the DSN's schema holds a workspace, creating
// nothing (it is driver.Driver's Probe, for workspace.Options.MustExist):
// the schema must exist and record a schema version. It reads on one
// short-lived connection and takes no lock: a migration in progress shows
// as a version, which Open then waits for and checks.
func (pgDriver) Probe(ctx context.Context, cfg driver.Config) error {
	opts, err := optionsOf(cfg)
	if err != nil {
		return err
	}
	ccfg, err := pgx.ParseConfig(cfg.DSN)
	if err != nil {
		return driver.RedactError(fmt.Errorf("parse dsn: %w", err), cfg.DSN)
	}
	conn, err := pgx.ConnectConfig(ctx, ccfg)
	if err != nil {
		return driver.RedactError(unavailable(err, false), cfg.DSN)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	return probeOn(ctx, conn, opts.Schema, ccfg.Database, cfg.DSN)
}

// rowQuerier is what the probe reads on: a connection or a pool.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// probeOn is Probe's look at schema of database through q: it must exist
// and record a schema version. It takes no lock: a migration in progress
// shows as a version, which the open then waits for and checks.
func probeOn(ctx context.Context, q rowQuerier, schema, database, dsn string) error {
	where := fmt.Sprintf("schema %q of database %q", schema, database)
	var exists, hasTable bool
	if err := q.QueryRow(ctx, probeQuery, schema, migrationsTable).Scan(&exists, &hasTable); err != nil {
		return driver.RedactError(fmt.Errorf("postgres: look for schema %q: %w", schema, err), dsn)
	}
	switch {
	case !exists:
		return &workspace.NoWorkspaceError{Where: where, Reason: "the schema does not exist"}
	case !hasTable:
		return &workspace.NoWorkspaceError{Where: where, Reason: "the schema holds no agentspace schema version"}
	}
	var (
		version int64
		dirty   bool
	)
	sel := `SELECT version, dirty FROM ` + pgx.Identifier{schema, migrationsTable}.Sanitize() + ` LIMIT 1`
	err := q.QueryRow(ctx, sel).Scan(&version, &dirty)
	switch {
	case errors.Is(err, pgx.ErrNoRows), err == nil && version <= 0 && !dirty:
		return &workspace.NoWorkspaceError{Where: where, Reason: "the schema holds no agentspace schema version"}
	case err != nil:
		return driver.RedactError(fmt.Errorf("postgres: read schema version of %q: %w", schema, err), dsn)
	}
	return nil
}

func (pgDriver) OpenMigrator(ctx context.Context, cfg driver.Config) (workspace.Migrator, error) {
	opts, err := optionsOf(cfg)
	if err != nil {
		return nil, err
	}
	// The migration files rely on search_path: use the session DSN if there is one.
	dsn := cfg.DSN
	if opts.ListenDSN != "" {
		dsn = opts.ListenDSN
	}
	ccfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, driver.RedactError(fmt.Errorf("parse dsn: %w", err), dsn)
	}
	m, err := newMigrator(ctx, ccfg, opts.Schema)
	if nw := missingDatabase(err); nw != nil {
		return nil, nw
	}
	if err != nil {
		return nil, driver.RedactError(err, dsn)
	}
	return m, nil
}

// optionsOf reads the ws_ parameters of a parsed DSN.
func optionsOf(cfg driver.Config) (Options, error) {
	opts := Options{
		Schema:      cfg.Params[paramSchema],
		ListenDSN:   cfg.Params[paramListenDSN],
		AutoMigrate: cfg.AutoMigrate,
		Logger:      cfg.Logger,
	}
	if opts.Schema == "" {
		opts.Schema = DefaultSchema
	}
	if err := checkSchema(opts.Schema); err != nil {
		return opts, err
	}
	switch v := strings.ToLower(cfg.Params[paramListen]); v {
	case "", "on", "true", "1":
	case "off", "false", "0":
		opts.NoListen = true
	default:
		return opts, &workspace.InvalidError{Field: paramListen, Reason: fmt.Sprintf("%q: want on or off", v)}
	}
	if opts.NoListen && opts.ListenDSN != "" {
		return opts, &workspace.InvalidError{Field: paramListenDSN, Reason: "is set but ws_listen is off"}
	}
	return opts, nil
}

// lockKey is the advisory lock that serializes the writers of one schema.
func lockKey(schema string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("agentspace\x00" + schema)) // a hash.Hash never fails to write
	return int64(h.Sum64())                           // #nosec G115 -- the bits of the hash, reinterpreted as a bigint lock key: wrapping is intended
}

// channelName is the NOTIFY channel of one schema's workspace.
func channelName(schema string) string { return "agentspace." + schema }

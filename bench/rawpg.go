package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentspace/agentspace/workspace/driver"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const rawPostgresSchema = `
CREATE TABLE raw_art (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, version BIGINT NOT NULL);
CREATE TABLE raw_ver (id TEXT NOT NULL, version BIGINT NOT NULL, content BYTEA, PRIMARY KEY (id, version));
CREATE TABLE raw_ev (seq BIGSERIAL PRIMARY KEY, actor TEXT NOT NULL, type TEXT NOT NULL, subject TEXT NOT NULL, version BIGINT NOT NULL);
CREATE TABLE raw_lease (resource TEXT PRIMARY KEY, owner TEXT NOT NULL, token BIGINT NOT NULL, expires BIGINT NOT NULL);
CREATE TABLE raw_task (id BIGINT PRIMARY KEY, grp TEXT NOT NULL, status TEXT NOT NULL, priority INT NOT NULL, dep BIGINT, owner TEXT NOT NULL DEFAULT '');
CREATE INDEX raw_task_ready ON raw_task (grp, status, priority DESC, id);
CREATE TABLE raw_note (kind TEXT NOT NULL, key TEXT NOT NULL, body TEXT NOT NULL, version BIGINT NOT NULL, PRIMARY KEY (kind, key));
`

// pgConns is the Postgres baseline: one pgx pool on a schema of its own,
// dropped on close.
type pgConns struct {
	pool   *pgxpool.Pool
	schema string
	binds  sync.Map // "?" query -> "$n" query
}

// openRawPostgres creates a temporary schema in cfg's database for the baseline.
func openRawPostgres(ctx context.Context, cfg driver.Config, prefix string) (rawStore, error) {
	schema := "agentspace_" + strings.ReplaceAll(prefix, "-", "_") + "_raw"
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("raw postgres baseline: %w", err)
	}
	pc.MaxConns = 24
	pc.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("raw postgres baseline: %w", err)
	}
	c := &pgConns{pool: pool, schema: schema}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		pool.Close()
		return nil, fmt.Errorf("raw postgres baseline: %w", err)
	}
	if _, err := pool.Exec(ctx, rawPostgresSchema); err != nil {
		c.close()
		return nil, fmt.Errorf("raw postgres baseline: %w", err)
	}
	channel := schema
	r := &rawSQL{
		db:        c,
		prefix:    prefix,
		claimLock: " FOR UPDATE SKIP LOCKED",
		notify:    "SELECT pg_notify('" + channel + "', '')",
		syncs: func(ctx context.Context) (int64, bool) {
			var n int64
			if err := pool.QueryRow(ctx, `SELECT wal_sync FROM pg_stat_wal`).Scan(&n); err != nil {
				return 0, false
			}
			return n, true
		},
	}
	r.listen = func(ctx context.Context) (func(ctx context.Context) (time.Time, error), func(), error) {
		conn, err := pgx.ConnectConfig(ctx, pc.ConnConfig.Copy())
		if err != nil {
			return nil, nil, err
		}
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
			_ = conn.Close(ctx)
			return nil, nil, err
		}
		wait := func(ctx context.Context) (time.Time, error) {
			if _, err := conn.WaitForNotification(ctx); err != nil {
				return time.Time{}, err
			}
			return time.Now(), nil
		}
		return wait, func() { _ = conn.Close(context.Background()) }, nil
	}
	return r, nil
}

func (c *pgConns) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = c.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{c.schema}.Sanitize()+" CASCADE")
	c.pool.Close()
}

// bind rewrites ? placeholders as $1, $2, ...
func (c *pgConns) bind(q string) string {
	if v, ok := c.binds.Load(q); ok {
		return v.(string)
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	c.binds.Store(q, b.String())
	return b.String()
}

type pgQ struct {
	c  *pgConns
	tx pgx.Tx
}

func (q pgQ) exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := q.tx.Exec(ctx, q.c.bind(query), args...)
	return tag.RowsAffected(), err
}

func (q pgQ) queryRow(ctx context.Context, query string, args []any, dest ...any) error {
	return q.tx.QueryRow(ctx, q.c.bind(query), args...).Scan(dest...)
}

type pgPoolQ struct{ c *pgConns }

func (q pgPoolQ) exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := q.c.pool.Exec(ctx, q.c.bind(query), args...)
	return tag.RowsAffected(), err
}

func (q pgPoolQ) queryRow(ctx context.Context, query string, args []any, dest ...any) error {
	return q.c.pool.QueryRow(ctx, q.c.bind(query), args...).Scan(dest...)
}

func (c *pgConns) tx(ctx context.Context, _ int, fn func(q sqlQ) error) error {
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(pgQ{c, tx}); err != nil {
		_ = tx.Rollback(ctx)
		return err
	}
	return tx.Commit(ctx)
}

func (c *pgConns) read(ctx context.Context, _ int, fn func(q sqlQ) error) error {
	return fn(pgPoolQ{c})
}

func (c *pgConns) countRows(ctx context.Context, _ int, query string, args ...any) (int, error) {
	rows, err := c.pool.Query(ctx, c.bind(query), args...)
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

func isPgNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// analyzePostgres runs ANALYZE on the tables of e's workspace schema, when
// e is on Postgres: what autovacuum does after a bulk load on a server
// where it runs (Config.Analyze).
func analyzePostgres(ctx context.Context, e *env) error {
	if e.backend != "postgres" {
		return nil
	}
	p, err := driver.ParseDSN(e.dsn)
	if err != nil {
		return err
	}
	schema := p.Config.Params["ws_schema"]
	if schema == "" {
		schema = "agentspace" // the backend's default schema
	}
	conn, err := pgx.Connect(ctx, p.Config.DSN)
	if err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = $1`, schema)
	if err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	for _, t := range tables {
		if _, err := conn.Exec(ctx, "ANALYZE "+pgx.Identifier{schema, t}.Sanitize()); err != nil {
			return fmt.Errorf("analyze %s: %w", t, err)
		}
	}
	return nil
}

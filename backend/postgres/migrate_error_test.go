package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
)

// TestAFailedMigrationNamesItsFileLineAndMessage runs migrations whose
// fourth line the server refuses: the error is one line naming the file,
// the line and column when the server gives a position (with that line's
// text), and the server's message, and does not quote the rest of the file.
func TestAFailedMigrationNamesItsFileLineAndMessage(t *testing.T) {
	for _, tc := range []struct {
		name, bad, want, code string
	}{
		{
			name: "with a position",
			bad:  "INSERT INTO second (id, nope) VALUES (1, 'x');",
			want: `postgres: migration 000002_second.up.sql, line 4, column 25 ("INSERT INTO second (id, nope) VALUES (1, 'x');"): ` +
				`ERROR: column "nope" of relation "second" does not exist (SQLSTATE 42703)`,
			code: "42703",
		},
		{
			// The server gives no position for a missing table in ALTER TABLE.
			name: "without a position",
			bad:  "ALTER TABLE missing ADD COLUMN note text;",
			want: `postgres: migration 000002_second.up.sql failed: ERROR: relation "missing" does not exist (SQLSTATE 42P01)`,
			code: "42P01",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			schema := pgtest.Schema(t)
			ccfg, err := pgx.ParseConfig(pgtest.ServerDSN(t))
			require.NoError(t, err)
			fsys := fstest.MapFS{
				"000001_first.up.sql":   {Data: []byte("CREATE TABLE first (id bigint PRIMARY KEY);\n")},
				"000001_first.down.sql": {Data: []byte("DROP TABLE first;\n")},
				"000002_second.up.sql": {Data: []byte("-- the second step\n" +
					"CREATE TABLE second (id bigint PRIMARY KEY, body text NOT NULL);\n" +
					"CREATE INDEX second_body ON second (body);\n" +
					tc.bad + "\n" +
					"CREATE TABLE third (id bigint);\n")},
				"000002_second.down.sql": {Data: []byte("DROP TABLE second;\n")},
			}
			m, err := newMigratorFS(ctx, ccfg, schema, fsys)
			require.NoError(t, err)
			defer m.Close()

			err = m.Up(ctx)
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr), "the server's error stays wrapped")
			assert.Equal(t, tc.code, pgErr.Code)

			v, dirty, err := m.Version(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint(1), v, "the failed step rolled back whole, its version with it")
			assert.False(t, dirty, "nothing is left for migrate force to clear")
			var second *string
			require.NoError(t, m.db.QueryRowContext(ctx, `SELECT to_regclass('second')::text`).Scan(&second))
			assert.Nil(t, second, "the step's first statements rolled back with the one that failed")
			require.NoError(t, m.Goto(ctx, 1), "the store stays usable at the version before")
		})
	}
}

// TestMigrationErrorPositions: the server counts characters from 1 in the
// statement; lines and columns are the file's, and a long line is cut.
func TestMigrationErrorPositions(t *testing.T) {
	text := "-- é\nSELECT 'ü', x;\n" + strings.Repeat("y", 100) + " z\n"
	for _, tc := range []struct {
		name           string
		start, pos     int
		line, col      int
		wantText       string
		wantTextPrefix string
	}{
		{name: "first character", start: 0, pos: 1, line: 1, col: 1, wantText: "-- é"},
		{name: "after a multi-byte character", start: 0, pos: 18, line: 2, col: 13, wantText: "SELECT 'ü', x;"},
		{name: "a statement that starts later", start: len("-- é\n"), pos: 13, line: 2, col: 13, wantText: "SELECT 'ü', x;"},
		{name: "a long line is cut", start: 0, pos: 21, line: 3, col: 1, wantTextPrefix: strings.Repeat("y", 80) + "…"},
		{name: "past the end", start: 0, pos: 10000, line: 4, col: 1, wantText: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line, col, lt := position(text, tc.start, tc.pos)
			assert.Equal(t, tc.line, line, "line")
			assert.Equal(t, tc.col, col, "column")
			if tc.wantTextPrefix != "" {
				assert.Equal(t, tc.wantTextPrefix, lt)
			} else {
				assert.Equal(t, tc.wantText, lt)
			}
		})
	}
}

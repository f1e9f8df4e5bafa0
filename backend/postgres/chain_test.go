package postgres_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/conformance"
)

// execSchema runs one statement in the schema a DSN names, through a
// connection of its own, as another client of the database could.
func execSchema(t testing.TB, dsn, query string, args ...any) {
	t.Helper()
	conn := pgtest.Connect(t)
	schema := pgtest.SchemaOf(t, dsn)
	_, err := conn.Exec(t.Context(), `SELECT set_config('search_path', $1, false)`, pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	tag, err := conn.Exec(t.Context(), query, args...)
	require.NoError(t, err)
	require.Equal(t, int64(1), tag.RowsAffected(), "%s changes one row", query)
}

// TestTamperedLogFailsVerify edits rows with plain SQL in the schema.
func TestTamperedLogFailsVerify(t *testing.T) {
	conformance.RunTamper(t, harness{}, conformance.Tamper{
		EditMessage: func(t testing.TB, dsn string, seq int64) {
			execSchema(t, dsn, `UPDATE events SET message = 'nothing to see here' WHERE seq = $1`, seq)
		},
		DeleteEvent: func(t testing.TB, dsn string, seq int64) {
			execSchema(t, dsn, `DELETE FROM events WHERE seq = $1`, seq)
		},
		EditContent: func(t testing.TB, dsn string, id string) {
			execSchema(t, dsn, `UPDATE blobs SET content = 'another plan'::bytea WHERE artifact_id = $1`, id)
		},
	})
}

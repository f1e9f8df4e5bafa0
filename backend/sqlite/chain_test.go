package sqlite_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/conformance"
)

// execFile runs one statement on the database file a sqlite: DSN names,
// through a connection of its own, as another program could.
func execFile(t testing.TB, dsn, query string, args ...any) {
	t.Helper()
	path, _, _ := strings.Cut(strings.TrimPrefix(dsn, "sqlite:"), "?")
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	res, err := db.Exec(query, args...)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "%s changes one row", query)
}

// TestTamperedLogFailsVerify edits rows with plain SQL on the file.
func TestTamperedLogFailsVerify(t *testing.T) {
	conformance.RunTamper(t, harness{}, conformance.Tamper{
		EditMessage: func(t testing.TB, dsn string, seq int64) {
			execFile(t, dsn, `UPDATE events SET message = 'nothing to see here' WHERE seq = ?`, seq)
		},
		DeleteEvent: func(t testing.TB, dsn string, seq int64) {
			execFile(t, dsn, `DELETE FROM events WHERE seq = ?`, seq)
		},
		EditContent: func(t testing.TB, dsn string, id string) {
			execFile(t, dsn, `UPDATE blobs SET content = CAST('another plan' AS BLOB) WHERE artifact_id = ?`, id)
		},
	})
}

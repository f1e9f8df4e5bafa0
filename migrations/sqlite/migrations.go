// Package sqlite holds the SQLite backend's schema migrations, embedded so
// that a binary carries its own schema. They are run by golang-migrate
// (source/iofs) from backend/sqlite; file names follow its
// NNNNNN_name.up.sql / NNNNNN_name.down.sql convention.
package sqlite

import "embed"

// FS is the migrations directory: every NNNNNN_name.{up,down}.sql file at its root.
//
//go:embed *.sql
var FS embed.FS

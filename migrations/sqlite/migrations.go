// Package sqlite holds the SQLite backend's schema migrations, embedded so
// that a binary carries its own schema. backend/sqlite runs them a step per
// transaction (backend/internal/sqlmigrate); file names are
// NNNNNN_name.up.sql and NNNNNN_name.down.sql.
package sqlite

import "embed"

// FS is the migrations directory: every NNNNNN_name.{up,down}.sql file at its root.
//
//go:embed *.sql
var FS embed.FS

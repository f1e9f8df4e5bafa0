// Package postgres holds the PostgreSQL backend's schema migrations,
// embedded so that the binary carries them. They are run by golang-migrate
// (see backend/postgres) with the workspace's schema as the search_path, so
// the SQL names no schema.
package postgres

import "embed"

// FS holds the NNNNNN_name.up.sql and .down.sql files.
//
//go:embed *.sql
var FS embed.FS

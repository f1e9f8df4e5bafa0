// Package postgres holds the PostgreSQL backend's schema migrations,
// embedded so that the binary carries them. backend/postgres runs them a
// step per transaction (backend/internal/sqlmigrate) with the workspace's
// schema as the search_path, so the SQL names no schema.
package postgres

import "embed"

// FS holds the NNNNNN_name.up.sql and .down.sql files.
//
//go:embed *.sql
var FS embed.FS

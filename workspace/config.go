package workspace

import (
	"context"
	"log/slog"
	"time"
)

// Config is what a Backend gets from Open: the DSN with every ws_
// parameter removed, and those parameters parsed.
type Config struct {
	// Scheme is the DSN's scheme as given ("sqlite", "json", "postgres", ...).
	Scheme string
	// DSN is the DSN without ws_ parameters, ready for the driver.
	DSN string
	// Target is what follows "scheme:" without ws_ parameters (a path for
	// sqlite and json). For URL DSNs it equals DSN.
	Target string
	// Params holds the backend's own ws_ parameters that were given.
	Params map[string]string
	// AutoMigrate (ws_automigrate) lets Open migrate an older schema up.
	AutoMigrate bool
	// PollInterval (ws_poll) is how often other processes' writes are looked for.
	PollInterval time.Duration
	// Logger receives the backend's diagnostics; never nil.
	Logger *slog.Logger
}

// Migrator moves a store's schema between versions.
type Migrator interface {
	// Version reports the current version (0: none) and whether a migration failed half-way.
	Version(ctx context.Context) (version uint, dirty bool, err error)
	// Latest is the newest version this code knows.
	Latest() uint
	// Up migrates to Latest. Nothing to do is success.
	Up(ctx context.Context) error
	// Down undoes n migrations (all if n <= 0).
	Down(ctx context.Context, n int) error
	// Goto migrates up or down to version v.
	Goto(ctx context.Context, v uint) error
	// Force sets the version without migrating and clears the dirty flag.
	Force(ctx context.Context, v int) error
	Close() error
}

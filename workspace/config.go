package workspace

import (
	"context"
)

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

package sqlite

import "context"

// SetMigrateHook makes f run in each migration step's transaction just
// before its COMMIT, in this process (the crash test's child stops there).
func SetMigrateHook(f func(ctx context.Context, version uint, up bool) error) { migrateHook = f }

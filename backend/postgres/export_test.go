package postgres

import "context"

// SetWriteHook sets, for the failover tests, the hook the stores of
// schema call at points of every write transaction ("append", "commit",
// "committed"): fn gets the transaction (an identity to match the points
// of one by) and the types and actors of the events it appended so far;
// at "append", true makes them go without a NOTIFY. It is cleared when
// the returned func is called. One hook at a time: tests that set it do
// not run in parallel with each other.
func SetWriteHook(schema string, fn func(point string, tx any, types, actors []string) bool) (clear func()) {
	channel := channelName(schema)
	h := func(point string, tx *writeTx) bool {
		return tx.channel == channel && fn(point, tx, tx.types, tx.actors)
	}
	writeHook.Store(&h)
	return func() { writeHook.Store(nil) }
}

// SetMigrateHook makes fn run in each migration step of schema, in the
// step's transaction once its SQL and version are written, just before
// its COMMIT (see sqlmigrate.Runner.BeforeCommit), for migrators made
// until the returned func is called.
func SetMigrateHook(schema string, fn func(ctx context.Context, version uint, up bool) error) (clear func()) {
	return setMigrateHook(schema, fn)
}

func setMigrateHook(schema string, fn func(ctx context.Context, version uint, up bool) error) (clear func()) {
	migrateHooks.Store(schema, fn)
	return func() { migrateHooks.Delete(schema) }
}

// PrepareConn is the pgxpool hook the store's pools run on every take of
// a connection; KeepHeap is the statement it runs on the take
// KeepHeapAfter returns.
var PrepareConn = prepareConn

// KeepHeap: see keepHeap.
const KeepHeap = keepHeap

// KeepHeapAfter is the take on which a connection runs KeepHeap.
func KeepHeapAfter() int64 { return keepHeapTake() }

// SetKeepHeapAfter makes connections run KeepHeap on take n until the
// returned func puts the default back. Not for parallel tests.
func SetKeepHeapAfter(n int64) (restore func()) {
	old := keepHeapAfter.Swap(n)
	return func() { keepHeapAfter.Store(old) }
}

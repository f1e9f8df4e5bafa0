// Package driver is what a storage backend implements for agentspace, and
// the engine that turns it into a *workspace.Workspace. Users of a
// workspace import package workspace only; this package is for backend
// authors, as database/sql/driver is for database/sql's drivers.
//
// A backend implements Store: transactional storage of the records and the
// event log, nothing more. The engine (New, or workspace.Open through
// Register) does everything else once, for every backend: it validates
// input before any store sees it (bad input is a *workspace.InvalidError
// and nothing is written), checks row versions, leases and fences, runs
// the task state machine, builds the events, keeps idempotency keys,
// groups concurrent writes into one transaction, and fans subscriptions
// out from one watcher. Errors reach users as the sentinels and typed
// errors of package workspace.
//
// # Implementing a backend
//
//  1. Store.Update runs a write transaction serialized with every other
//     writer of the same store, in any process; a failed fn leaves
//     nothing, and fn may be run again after a retryable failure.
//  2. Store.View reads one consistent snapshot.
//  3. Tx.AppendEvents assigns seqs head+1, head+2, ... and is the last
//     write of its transaction, so seqs are gap-free in commit order.
//  4. Return workspace.ErrNotFound (wrapped or bare) for missing records,
//     and wrap the database's errors with %w.
//  5. Implement Driver (Open a Store for a Config, list the
//     backend's own ws_ parameters), and Prober so that
//     workspace.Options.MustExist works; MigratingDriver for
//     `wsctl migrate`. Register the schemes in init() with Register, and
//     export a constructor that takes an existing connection and calls New.
//  6. Optionally, for speed: Savepointer (group commit with a savepoint per
//     writer), HintedUpdater and HintedViewer (read the records a
//     transaction will need in the round trip that starts it), and the
//     Notifier family (Notifier, LazyNotifier, EarlyNotifier, HeadNotifier,
//     EventNotifier) so that waiters on other handles wake without polling.
//     Each is a separate interface found by type assertion: a store without
//     it is correct, only slower.
//  7. Pass conformance.Run under go test -race.
package driver

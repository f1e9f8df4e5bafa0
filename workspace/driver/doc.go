// Package driver is what a backend implements for agentspace: the
// interfaces of a store and their records, the registry of schemes that
// workspace.Open picks from, and the parsing of DSNs. Users of a workspace
// import package workspace only; this package is for backend authors, as
// database/sql/driver is for database/sql's drivers. It holds no engine:
// a backend that reaches a workspace elsewhere (the client of a server)
// links only this package.
//
// A backend that stores the workspace implements Store: transactional
// storage of the records and the event log, nothing more. The engine
// (package workspace/engine: engine.New, or workspace.Open through the
// Backend that engine.Backend makes of a Driver) does everything else
// once, for every backend: it validates input before any store sees it
// (bad input is a *workspace.InvalidError and nothing is written), checks
// row versions, leases and fences, runs the task state machine, builds
// the events, keeps idempotency keys, groups concurrent writes into one
// transaction, and fans subscriptions out from one watcher. Errors reach
// users as the sentinels and typed errors of package workspace.
//
// # Implementing a backend
//
// What every correct store needs is required, and the compiler checks it:
//
//  1. Store.Update runs a write transaction serialized with every other
//     writer of the same store, in any process; a failed fn leaves
//     nothing, and fn may be run again after a retryable failure.
//  2. Store.View reads one consistent snapshot.
//  3. Tx.AppendEvents assigns seqs head+1, head+2, ... and is the last
//     write of its transaction, so seqs are gap-free in commit order; the
//     store keeps each event's hash (ChainHash) and ReadTx.ChainEvents
//     returns them, for Verify and export.
//  4. ReadTx.ArtifactIDs and LeaseRows list deleted artifacts and
//     released leases too, which the log may no longer name: without
//     them a restore would lose versions and reissue fencing tokens.
//  5. Return workspace.ErrNotFound (wrapped or bare) for missing records,
//     and wrap the database's errors with %w.
//  6. Implement Driver: Open a Store for a driver.Config, Probe for
//     one without creating it (workspace.Options.MustExist), and list the
//     backend's own ws_ parameters. Register the schemes in init() with
//     Register(scheme, engine.Backend(d)), and export a constructor that
//     takes an existing connection and calls engine.New.
//  7. Pass conformance.Run, and conformance.RunFloor, under go test -race.
//
// The rest is optional, each a separate interface found by type
// assertion. For speed only: a store without any of them is correct, only
// slower, as conformance.RunFloor proves by hiding them all.
//
//   - Savepointer: group commit with a savepoint per writer.
//   - LateJoiner: writers that queue while a group's transaction runs
//     join it before it commits.
//   - HintedUpdater, HintedViewer: read the records a transaction will
//     need in the round trip that starts it.
//   - Notifier: waiters on other handles wake without polling.
//   - LogRewriter, BelowFloorDeleter with FloorRaiser, Checkpointer: gc
//     paced to the store, holding up writers less.
//
// For features: without FileSnapshotter, Workspace.Backup answers
// errors.ErrUnsupported; without MigratingDriver, workspace.OpenMigrator
// (`wsctl migrate`) refuses the scheme; without Reclaimer, gc gives no
// freed space back to the file system.
package driver

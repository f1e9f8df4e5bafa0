// Package engine is the portable engine: it implements the user API of
// package workspace over a store of the backend contract
// (workspace/driver), once for every backend. Users of a workspace
// import package workspace only; a store's package links the engine to
// hand out handles: it registers engine.Backend(d) for its schemes, and
// its constructor for an existing connection returns engine.New(store).
//
// The engine validates input before any store sees it (bad input is a
// *workspace.InvalidError and nothing is written), checks row versions,
// leases and fences, runs the task state machine and the messages'
// deliveries and escalations, applies the policy and the reserved note
// kinds (internal/reserve), builds the events and appends them last in
// their transaction, keeps idempotency keys, groups concurrent writes
// into one transaction (one writer queue per store), fans subscriptions
// out from one watcher, shares one store between the handles a process
// opens on one DSN, and runs gc, verify, export and import. Its handle
// becomes a *workspace.Workspace through internal/wsconn.
package engine

// Package workspace is the public API of agentspace: a shared, persistent
// workspace for teams of AI agents.
//
// A Workspace holds artifacts (versioned content), tasks (a work queue with
// dependencies and claims), notes (shared decisions and constraints), locks
// (leases with fencing tokens) and the event log (every change, gap-free,
// followable live). Open picks a backend by DSN, as database/sql picks a
// driver by name; a program imports the backends it needs:
//
//	import (
//		"github.com/agentspace/agentspace/workspace"
//		_ "github.com/agentspace/agentspace/backend/sqlite"
//	)
//
//	ws, err := workspace.Open(ctx, "sqlite:.agentspace/workspace.db")
//	if err != nil { ... }
//	defer ws.Close()
//
// Every handle, whatever its backend, is the same portable layer: it
// validates input once (bad input is a typed *InvalidError and nothing is
// written), checks row versions and fences, runs the task state machine,
// writes each change and its events in one store transaction, and fans
// subscriptions out from one watcher. Backend authors implement the smaller
// interfaces of package driver instead, whose overview is their checklist.
//
// # Guarantees
//
//   - A write with IfVersion n succeeds only if the stored version is n;
//     of two writers with the same n exactly one wins, and the loser's
//     *ConflictError carries the current version and is logged as a
//     "conflict" event.
//   - Every successful change appends its events in the same transaction.
//     Seqs start at 1 and grow by exactly one in commit order.
//   - Subscribe delivers every matching event after AfterSeq exactly once,
//     in order, backlog then live, across processes and hosts.
//   - A batch (Commit) is all or nothing; its events have consecutive seqs.
//   - Lease tokens strictly increase each time a resource changes hands;
//     an expired lease is free without anyone cleaning up.
package workspace

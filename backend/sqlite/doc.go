// Package sqlite is agentspace's embedded default backend: one SQLite file,
// shared safely by many goroutines and many processes on one machine.
//
// Importing it registers the "sqlite" scheme with the workspace package:
//
//	import _ "github.com/agentspace/agentspace/backend/sqlite"
//
//	ws, err := workspace.Open(ctx, "sqlite:.agentspace/workspace.db")
//
// The DSN is "sqlite:PATH", optionally followed by "?" and parameters:
// workspace's own ws_ parameters, this backend's (ws_synchronous,
// ws_busy_timeout, ws_index_batch), and any modernc.org/sqlite parameter,
// passed through.
// Missing parent directories are created (0700) and a new database file is
// created 0600.
//
// # How it is built
//
// The database runs in WAL mode, so readers never block the writer. Each
// handle has one writer connection (writes are BEGIN IMMEDIATE transactions,
// serialized with other processes by SQLite's file lock and waited for with
// busy_timeout) and a small pool of read connections; a read runs in one
// read transaction and so sees one snapshot, except a get of one record (an
// artifact's head with its content, a note, a task, a lock), which is one
// statement outside a transaction: one snapshot as well. A write that still finds the
// database busy after busy_timeout is retried with bounded backoff.
// synchronous=FULL is the default: an acknowledged write survives a power
// loss. ws_synchronous=NORMAL trades that for speed (a power loss may undo
// the last transactions, never corrupt the file); ws_synchronous=OFF leaves
// syncing to the OS (a power loss may corrupt the file: scratch use only).
//
// The schema lives in migrations/sqlite and is applied a step per
// transaction, the version recorded in it (a step killed part way leaves
// the file at the version before), under a cross-process lock (flock on PATH.migrate.lock): opening a new
// file creates it, opening an older one is a *workspace.SchemaError unless
// ws_automigrate=true, and one newer than this code is refused.
//
// The event log's filter indexes (by type, actor, subject id and name)
// take events in batches: a new event is indexed once the log's tail of
// unindexed events reaches ws_index_batch (default 256), when the writer
// that brings it there indexes the whole tail in its transaction. Each
// event's entry in a per-subject index lands on a leaf page of its own, so
// indexing one event at a time wrote about four more pages to the WAL per
// commit; a batch writes each touched leaf once. A filtered read takes the
// indexed events through the index and scans the tail, in one statement.
//
// Writes of the same handle wake its waiters at once. Other handles' and
// processes' writes are noticed from the file's bell (PATH-bell, see
// BellPath): every commit rings it once it can be read, and each handle
// watches that one file (inotify, on Linux), so the WAL's own writes wake
// no one. Where the bell cannot be opened, a handle watches the database
// file and its WAL instead, whose writes come before the commit can be
// read; where nothing can be watched, it polls the event head (ws_poll,
// default 50ms). Processes of releases before the bell do not ring it:
// their commits are found by the slow poll that guards against a lost
// notification (twenty ws_poll intervals, never less than a second: a
// second at the default). The writers of one file in one
// process queue in arrival order (and honour their contexts) before they
// take SQLite's write lock; writers in other processes meet at that lock,
// where SQLite's busy handler retries for up to ws_busy_timeout.
package sqlite

// Package postgres is agentspace's PostgreSQL backend, on jackc/pgx/v5.
// Importing it registers the "postgres" and "postgresql" schemes:
//
//	import _ "github.com/agentspace/agentspace/backend/postgres"
//
//	ws, err := workspace.Open(ctx, "postgres://agent@db.internal/team?sslmode=require&ws_schema=team1")
//
// Everything pgx understands may be in the DSN (pool_max_conns, sslmode,
// default_query_exec_mode, ...). The backend's own parameters:
//
//   - ws_schema: the schema that holds the workspace (default "agentspace"),
//     so many workspaces can share one database. Lower-case letters, digits
//     and underscores, starting with a letter or underscore, at most 48 bytes.
//   - ws_listen_dsn: a URL-encoded DSN of a session connection (the server
//     itself, or a session-mode pooler) for LISTEN and for schema
//     migrations, whose files rely on the connection's search_path. Deployments
//     whose main DSN points at a transaction-mode pooler (pgbouncer) need
//     it. Defaults to the main DSN.
//   - ws_listen: "off" turns LISTEN/NOTIFY off; other handles' writes are
//     then found by polling every ws_poll.
//
// Each Update is one transaction that first takes a transaction-scoped
// advisory lock derived from the schema (pg_advisory_xact_lock), so writers
// of one workspace are serialized across hosts and no lock outlives its
// transaction, even through a pooler. The event log's seqs come from a
// counter row, so they are gap-free in commit order; pg_notify in the same
// transaction wakes the other stores' listeners on commit. Times, leases
// included, come from the database's clock (a predicted write's, below,
// from ours moved by the offset measured to it, and checked).
//
// A store listens only while something on it waits for a change (a
// subscription, a lock or claim wait) and for 10 s after, and while it
// listens it is registered in the schema's listeners table. A writer
// notifies only when a store other than its own is registered: that is
// decided, and registrations are written and refreshed, under the writers'
// advisory lock, so a writer that did not notify committed before the
// registration, and the head the listener reads next covers it.
//
// A transaction's writes are queued and sent in one round trip with its
// next read or its COMMIT. The event append is queued as well: the writer
// knows the seqs it hands out from the head it read under the lock. A
// record's read in a write also reads the lease that guards it, and the
// artifacts, notes and tasks a transaction's ops write (every op of a
// group commit, up to 32), with their leases, and a claim's lapsed claims
// and ready task, are read in the round trip that takes the lock
// (driver.HintedUpdater); a write drops only the reads ahead it makes
// stale (any task's write those of a claim). So a write of artifacts,
// notes and tasks, or a claim, takes two round trips, the lock with the
// reads and the COMMIT, however many ops share the transaction (one, when
// predicted: below). A get of
// one record (an artifact's head, its content fetched in a subquery; a
// note; a task; a lock) is one statement outside any transaction, since one
// statement reads one snapshot (driver.HintedViewer); other reads are a
// REPEATABLE READ snapshot. The claim
// query runs with enable_sort off for its statement, so that it walks the
// ready index even when the table has no statistics.
// A store that wrote last knows what its next write will most likely read:
// the records and leases it just read or wrote, the head, whether another
// store listens, and the database's clock (as an offset from its own). A
// write whose reads it all knows, with no other write of the store under
// way, runs on those values and is sent in one round trip: BEGIN, the
// lock, a guard that fails the transaction unless each value is still what
// the database holds (each artifact by ID, name and version, live; each
// lease by all its fields, or its absence; the head; the listeners; a
// clock the database's showed in the last 100 ms), the writes and the
// COMMIT. A refused guard writes nothing: the write runs again the usual
// way. A store predicts only after writes that found nobody else wrote
// since its last commit: 1 of them, 2, 4 ... up to 64 after each refusal,
// halving with each prediction committed.
// So an agent updating its own artifacts, or taking and releasing a lock,
// spends one round trip per write; a write racing another store's spends
// three more, rarely. Notes, tasks and claims are read the usual way.
//
// A failed Update (a serialization failure, a deadlock, a connection lost
// before the COMMIT was sent) is run again, a bounded number of times.
//
// Every statement names no schema: each transaction sets search_path locally
// (set_config(..., true)), which also works through transaction poolers and
// on a pool shared with other code (OpenPool). Behind pgbouncer in
// transaction mode, also add default_query_exec_mode=exec (or
// simple_protocol) to the DSN unless the pooler tracks prepared statements.
//
// Schema migrations (migrations/postgres) run a step per transaction, the
// version recorded in it, under a transaction-scoped advisory lock: a step
// killed part way leaves the schema at the version before, and concurrent
// `migrate up`s take turns. An empty schema is migrated on open, an older
// one only with ws_automigrate=true.
// A role that owns only its schema is enough; creating the schema on first
// open needs the CREATE privilege on the database, or an administrator
// creates it beforehand (CREATE SCHEMA team1 AUTHORIZATION agent).
package postgres

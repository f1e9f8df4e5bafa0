// Package jsonstore is the json: backend of agentspace: a workspace kept as
// a tree of plain files that people and file-tool agents can read with cat,
// ls and git diff. It lives in directory backend/json but is named
// jsonstore, so that it does not shadow encoding/json where both are used.
//
// Import it for its init, which registers the "json" scheme:
//
//	import _ "github.com/agentspace/agentspace/backend/json"
//
//	ws, err := workspace.Open(ctx, "json:./team-ws")
//
// or call Open with a directory.
//
// # The tree
//
//	DIR/
//	  FORMAT                     format version ("2"; "2 dirty" while a migration step runs)
//	  .lock                      flock target: exclusive for writes, shared for reads
//	  .journal                   the write-ahead log: transactions since the last checkpoint
//	  events.ndjson              the event log: one JSON event per line, seq ascending,
//	                             each with its "hash" in the chain (driver.ChainHash)
//	  floor.json                 {"floor": N, "hash": H} once the log was compacted below N
//	  artifacts/NAME             the head content of each live artifact, as a plain file:
//	                             cat DIR/artifacts/plans/auth-api.md
//	  meta/artifacts/ID.json     an artifact's name, deleted flag and its head version's metadata
//	  meta/versions/ID.ndjson    every version's metadata, one JSON line per version, appended
//	  blobs/ID/SHA256            each distinct content of an artifact, once (every version's bytes)
//	  tasks/ID.json              one task
//	  notes/KIND/KEY.json        one note (KEY encoded, see below)
//	  leases/RESOURCE.json       one lock's lease and newest token (RESOURCE encoded)
//	  idempotency/KEY.json       a stored batch result and its expiry (KEY encoded)
//
// Files are 0600 and directories 0700. Keys that are not file names already
// (note keys, lock resources, idempotency keys) are encoded: a-z, 0-9, '-',
// '_' and inner '.' stay, every other byte (upper case included) becomes
// %XX, and a result longer than 180 bytes becomes "~" and the key's SHA-256.
// Every file holds its key, so the encoding never has to be reversed.
//
// # Transactions and crash safety
//
// A write transaction takes this handle's mutex and then an exclusive flock
// on DIR/.lock (each handle opens its own file description, so handles in
// one process exclude each other too; the kernel drops the lock of a dead
// process, so there is never a stale lock). It runs on the handle's
// in-memory state, then commits: the whole transaction (record files, blobs,
// events) is appended to DIR/.journal, a write-ahead log, as one entry with
// a CRC-32C and fsynced (the commit point: the one fsync of a commit). Then
// the files are written without fsync: record files in place, artifacts'
// versions appended (at the offset the entry names), the readable copies
// under artifacts/ replaced atomically (temp file, rename) since people read
// them without the lock, the events appended to events.ndjson; and a marker
// after the entry says it was applied. Every changed file is visible before
// the lock is released. Once the journal passes 256 KiB, and when a handle
// closes, a checkpoint makes the files durable (one syncfs on Linux, else an
// fsync of every file and directory the entries name) and empties it.
//
// Recovery replays the journal's complete entries in order, idempotently:
// files are rewritten, appends are written again at their offset, events
// already in the log are skipped, a torn last log line is cut, temp files
// are swept; then it checkpoints. The next lock holder (a reader first
// upgrades to the exclusive lock) recovers when the journal ends with an
// unmarked entry (its writer was killed after the commit point) or a torn
// one (never acknowledged: dropped). Opening a handle always recovers a
// non-empty journal, as after a power cut the files of applied entries may
// be lost: only the journal was fsynced.
//
// The write transaction takes savepoints (driver.Savepointer): every
// write keeps an undo step, and a savepoint is a position in that list, so
// the handle's group commit puts concurrent writers in one transaction and
// one journal record, each rolled back alone if its conditions fail.
//
// Waiting for the file lock does not observe the context: locks are held
// for the few milliseconds of a commit, and the kernel frees a dead
// holder's. Readers take the shared flock, so they never see half a commit. Each
// handle keeps every record in memory and, under the lock, compares the
// log's size and inode with what it saw: new lines name the records other
// handles changed, which are read again; a rewritten log (compaction)
// reloads the tree.
//
// # Names
//
// Artifact names are validated by the workspace package (relative, no ".."
// segment, no backslash or control character). The backend further writes
// readable copies only through an os.Root on DIR/artifacts, so no name
// resolves outside it, refuses (ErrInvalid, nothing written) a
// transaction that would write through a symbolic link anywhere in the
// tree, reserves segments starting with ".agentspace-tmp-" (its temporary
// files), and, when the file system ignores case (probed at open), treats
// names equal but for case as the same name (ErrAlreadyExists). Content is
// always read from blobs/, never from the copies: a name that cannot get a
// copy (it is also a directory of another live name, "a" and "a/b") works
// normally but has no file under artifacts/; a warning is logged.
//
// # Limits
//
// Every record is held in memory, and the event log too; opening a handle
// reads the whole tree. A write costs one fsync (and a share of a
// checkpoint) whatever the size of the workspace or the number of an
// artifact's versions: an update rewrites the
// artifact's small head file and appends one line to its versions file
// (format 2; format 1 rewrote every version's metadata). Another handle
// reads only the appended lines. Lists
// are served from memory. See the README for measured figures. Use sqlite:
// past some tens of thousands of artifacts or for heavy write loads, and
// postgres: across hosts (flock is not reliable on network file systems).
package jsonstore

package driver

import (
	"context"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// Store is what a backend implements: transactional storage of records and
// the event log. The engine (engine.New, workspace.Open) does everything
// else: validation, version checks, locks and fencing, the task state
// machine, event construction, idempotency, subscriptions. A store trusts
// its input.
//
// Records passed to and returned by a store are plain values: times are UTC
// and truncated to microseconds (Tx.Now does that), maps and slices may be
// nil when empty.
type Store interface {
	// Update runs fn in a write transaction serialized with every other
	// Update on the same store, from any handle or process, and commits it
	// if fn returns nil. If fn returns an error nothing it wrote is kept and
	// that error is returned as is. The store may run fn again after a
	// retryable failure (a serialization failure, a busy database), so fn
	// must have no effects outside tx.
	Update(ctx context.Context, fn func(tx Tx) error) error
	// View runs fn on one consistent read-only snapshot.
	View(ctx context.Context, fn func(tx ReadTx) error) error
	// Close releases the store's resources.
	Close() error
}

// ReadHint names a record a transaction will most likely read: in a write
// (HintedUpdater), one its ops write; in a read (HintedViewer), the one it
// gets. One of its fields is set, Content only with Artifact.
type ReadHint struct {
	Artifact workspace.ArtifactRef // by ID or by name, as the op names it
	// Content, with Artifact, is for a read (ViewHinted): the head's
	// content will be read too.
	Content  bool
	NoteKind string // with NoteKey: a note
	NoteKey  string
	Task     string // a task's ID
	Lease    string // a lease's resource
	// Claim is a claim's first reads: the lapsed claims it reaps and the
	// ready task it would take, as they are when the transaction starts.
	Claim *workspace.ClaimRequest
}

// TaskResource is the lock resource that guards task id, as
// workspace.ArtifactResource guards an artifact: a live lease on it held by
// another owner refuses updates of the task, and workspace.UpdateTaskOp.Fence is
// checked against its tokens. Stores that read the lease with the record
// use it too.
func TaskResource(id string) string { return "task:" + id }

// HintedUpdater is an optional Store capability: UpdateHinted is Update for
// a transaction that will likely read the hints' records, in that order
// (a group commit's ops, the first op's first), which the store may read
// in the round trip that starts the transaction (Postgres reads them right
// after taking the writers' lock). A hint never changes a result: an early
// read is used only when it is the record then read, and nothing written
// since the transaction began has touched it.
type HintedUpdater interface {
	UpdateHinted(ctx context.Context, hints []ReadHint, fn func(tx Tx) error) error
}

// LateJoiner is an optional Store capability: JoinsLate reports that a
// group's transaction may take, before it commits, writes queued after it
// began, at no more cost than if they had been in it from the start,
// although their reads were not among its hints. Postgres has no such
// capability: a predicted group is built whole, its reads guarded, before
// its one round trip.
type LateJoiner interface {
	JoinsLate() bool
}

// JoinsLate reports whether st has LateJoiner and says yes: what a
// wrapper that keeps st's capabilities asks.
func JoinsLate(st Store) bool {
	lj, ok := st.(LateJoiner)
	return ok && lj.JoinsLate()
}

// ReadyLister is an optional ReadTx capability: ListReadyTasks returns
// the tasks ListTasks(f) would with f.Status pending that are ready as
// ReadyTask means it (every DependsOn done): ID > f.After, ordered by ID,
// at most f.Limit. The store answers it from its (status, id) index and
// stops at f.Limit, reading no more pending tasks than it passes over;
// without it the engine pages ListTasks and reads each dependency.
type ReadyLister interface {
	ListReadyTasks(ctx context.Context, f workspace.TaskFilter) ([]workspace.Task, error)
}

// HintedViewer is an optional Store capability: ViewHinted is View for a
// read that will likely read only the hints' records (the engine hints the
// Gets of one artifact's head, note, task or lease). The store may read
// them, and end the snapshot, in the round trip that starts it (one
// statement, for Postgres); should fn then read anything else, the store
// runs fn again in a plain View, so fn must have no effects outside tx, as
// for a View the store retries. A hint never changes a result.
type HintedViewer interface {
	ViewHinted(ctx context.Context, hints []ReadHint, fn func(tx ReadTx) error) error
}

// Notifier is an optional Store capability: word that another handle may
// have committed, so that waiters on this one wake without polling.
// Stores without it are polled (every Options.PollInterval while anyone
// waits).
type Notifier interface {
	// Notify is called once, by the engine, before it watches the store.
	// wanted reports whether anyone waits for a change now; it is safe to
	// call from any goroutine, at any time. A store may stop listening
	// while it is false (see Notifications.Wake); one that ignores it
	// listens from this call on.
	Notify(wanted func() bool) Notifications
}

// Notifications is what a Notifier's notifications offer. Changes is the
// capability; every other field refines it and may be left zero.
type Notifications struct {
	// Changes receives a value (coalesced: capacity 1 is enough) whenever
	// another handle may have committed, and after every reconnect. Nil
	// when the store cannot notify after all (a file system it cannot
	// watch, LISTEN turned off): the engine then polls, and ignores the
	// other fields.
	Changes <-chan struct{}
	// Wake is for a store that need not listen while no one waits
	// (listening costs it a connection and every commit a wake-up, and
	// lets other stores' writers skip notifying). The engine calls it each
	// time wanted's answer may have turned true. While that answer is
	// false the store may stop listening; once it listens again it must
	// send on Changes, as after a reconnect, so that whatever was
	// committed meanwhile is looked up in the store.
	Wake func()
	// Head is for a store whose notifications carry the seq they announce
	// (Postgres's NOTIFY payload): the highest seq announced since the
	// last reconnect, or 0 when there is none (then a change must be
	// looked up in the store). A notification is sent after its commit,
	// so the seq is readable.
	Head func() int64
	// Events, with Head, is for a store whose notifications can carry the
	// events they announce, so that a subscriber on another handle gets
	// them without reading the log: the events carried by the
	// notifications received since the last call, in the order they were
	// committed. Each notification that carries events carries every
	// event its commit appended to the log, exactly as the log holds
	// them; one that carries none (too large) leaves a gap, and the
	// engine reads what is in it.
	Events func() []workspace.Event
	// Early is set by a store whose notifications may come before the
	// change they announce can be read: a file watch sees SQLite's WAL
	// frames written before the commit's fsync ends and the commit is
	// published. The engine then reads a change that follows a quiet
	// spell once the notifications have been quiet for a moment, not at
	// once, and looks again at sub-millisecond intervals if it is not
	// there yet. It is ignored with Head.
	Early bool
	// Restarts, with Head, counts the times the store's notifications
	// started again after a lost connection. What was announced before a
	// restart may be of a server that is gone (a failed-over primary), so
	// the engine forgets the events and heads it kept from them and reads
	// the log.
	Restarts func() int64
}

// ReadTx reads inside a transaction. Every method returns an error matching
// workspace.ErrNotFound when the record does not exist.
type ReadTx interface {
	// Now is the store's clock (the database's for Postgres), UTC, truncated
	// to microseconds. It is read once per transaction.
	Now() time.Time

	// Artifact returns the head metadata (Content nil) of the live artifact
	// with ref.ID or ref.Name (ref.Version is ignored).
	Artifact(ctx context.Context, ref workspace.ArtifactRef) (workspace.Artifact, error)
	// ArtifactVersion returns the metadata of one version, even of a deleted artifact.
	ArtifactVersion(ctx context.Context, id string, version int64) (workspace.Artifact, error)
	// ArtifactVersions returns every version's metadata, oldest first.
	ArtifactVersions(ctx context.Context, id string) ([]workspace.Artifact, error)
	// Content returns the content of version version of artifact id, whose
	// hash is sha256 (a store may find it by either).
	Content(ctx context.Context, id string, version int64, sha256 string) ([]byte, error)
	// ListArtifacts returns live heads matching f with Name > f.After,
	// ordered by name, at most f.Limit.
	ListArtifacts(ctx context.Context, f workspace.ArtifactFilter) ([]workspace.Artifact, error)

	Task(ctx context.Context, id string) (workspace.Task, error)
	// ListTasks returns tasks matching f with ID > f.After, ordered by ID
	// (UUIDv7, so creation order), at most f.Limit.
	ListTasks(ctx context.Context, f workspace.TaskFilter) ([]workspace.Task, error)
	// ReadyTask returns the best claimable task: pending, every DependsOn
	// done, matching r.Labels and r.ParentID; highest Priority first, then
	// oldest (lowest ID). workspace.ErrNotFound if there is none.
	ReadyTask(ctx context.Context, r workspace.ClaimRequest) (workspace.Task, error)
	// ExpiredClaims returns in_progress tasks whose LeaseExpiresAt <= now, at most limit.
	ExpiredClaims(ctx context.Context, now time.Time, limit int) ([]workspace.Task, error)

	Note(ctx context.Context, kind, key string) (workspace.Note, error)
	// ListNotes returns notes of q.Kind (all kinds if empty) after
	// (q.AfterKind, q.AfterKey), ordered by kind then key (bytewise), at
	// most q.Limit. With q.Kind set, only that kind's notes are read (a
	// walk past its last note reads no other kind's), and q.BeforeKey,
	// when set, ends the walk before that key.
	ListNotes(ctx context.Context, q NoteQuery) ([]workspace.Note, error)

	// Lease returns the lease row for resource as stored, whether live,
	// expired or released (Owner empty): its Token is the newest issued.
	Lease(ctx context.Context, resource string) (workspace.Lease, error)
	// ListLeases returns leases with an Owner and ExpiresAt > now, by resource.
	ListLeases(ctx context.Context, now time.Time) ([]workspace.Lease, error)

	// Events returns events matching q with Seq > q.AfterSeq, ascending, at most q.Limit.
	Events(ctx context.Context, q workspace.EventQuery) ([]workspace.Event, error)
	// Head returns the newest seq, 0 if none was ever written.
	Head(ctx context.Context) (int64, error)
	// Floor returns the lowest seq not compacted away (1 if never compacted).
	Floor(ctx context.Context) (int64, error)

	// Idempotent returns the stored result for key if it has not expired at now.
	Idempotent(ctx context.Context, key string, now time.Time) ([]byte, error)
	// Counts returns the number of live artifacts, of notes, and of tasks per status.
	Counts(ctx context.Context) (Counts, error)

	// ArtifactIDs and LeaseRows are the store's inventory, which export
	// and gc read: the log names only what happened above its floor, so
	// once compaction removed every event about a deleted artifact or a
	// released lease, an export that read only the log would leave it
	// out, and a restore would lose the artifact's versions or issue the
	// lease's fencing tokens again from 1.
	//
	// ArtifactIDs returns the IDs of the artifacts, live and deleted,
	// greater than after, ascending (bytewise), at most limit.
	ArtifactIDs(ctx context.Context, after string, limit int) ([]string, error)
	// LeaseRows returns the lease rows (live, expired and released) whose
	// resource is greater than after, by resource (bytewise), at most limit.
	LeaseRows(ctx context.Context, after string, limit int) ([]workspace.Lease, error)

	// ChainEvents returns the events with Seq > after, ascending, at most
	// limit, each with its stored hash (see ChainHash): the log as Verify
	// and export read it.
	ChainEvents(ctx context.Context, after int64, limit int) ([]ChainedEvent, error)
	// ChainBase returns the hash the event at the floor chains from: that
	// of the last event compacted away, or ZeroChainHash.
	ChainBase(ctx context.Context) ([]byte, error)
}

// Tx is a write transaction: ReadTx plus writes, all kept or none.
type Tx interface {
	ReadTx
	// PutArtifact writes version a.Version of artifact a.ID and makes it the
	// head (creating the artifact if new). content is nil when content
	// with hash a.SHA256 is already stored for an earlier version of a.ID
	// (the head's, or a rollback's target), and the new version shares it;
	// otherwise content is stored for the version (a store may keep bytes
	// it already has once, or again).
	PutArtifact(ctx context.Context, a workspace.Artifact, content []byte) error
	// DeleteArtifact removes the artifact from the live set; its versions
	// and blobs stay readable by ID.
	DeleteArtifact(ctx context.Context, id string) error
	// PutTask inserts or replaces the task.
	PutTask(ctx context.Context, t workspace.Task) error
	// DeleteVersions removes the given versions of artifact id (never its
	// head: the caller checks) and the content no remaining version of it
	// uses (retention).
	DeleteVersions(ctx context.Context, id string, versions []int64) error
	// DeleteTask removes the task (retention) unless another task names it
	// in DependsOn or as ParentID; it reports whether it removed it.
	DeleteTask(ctx context.Context, id string) (bool, error)
	// PutNote inserts or replaces the note (Kind, Key).
	PutNote(ctx context.Context, n workspace.Note) error
	// DeleteNote removes the note (Kind, Key). For a note that is not
	// there it answers an error wrapping workspace.ErrNotFound or nil,
	// as the backend finds it: a caller that must know reads first.
	DeleteNote(ctx context.Context, kind, key string) error
	// PutLease inserts or replaces the lease row; Owner "" marks it released
	// (the row, with its Token, is kept so tokens keep increasing).
	PutLease(ctx context.Context, l workspace.Lease) error
	// PutIdempotent stores a result under key until expires.
	PutIdempotent(ctx context.Context, key string, result []byte, expires time.Time) error
	// PruneIdempotent drops keys that expired before now.
	PruneIdempotent(ctx context.Context, now time.Time) error
	// AppendEvents appends events with seqs head+1, head+2, ... and returns
	// the first. It is called at most once per transaction, after every
	// record write (only PutIdempotent may follow it). Events normally come
	// with Seq 0; an import passes explicit, increasing seqs above the head
	// (a compacted log starts above 1), and the store keeps them as given
	// and returns the first.
	AppendEvents(ctx context.Context, events []workspace.Event) (first int64, err error)
	// CompactEvents deletes events with Seq < floor and records the floor
	// and, as the chain's base, the hash of event floor-1.
	CompactEvents(ctx context.Context, floor int64) error
	// SetChainBase sets the hash that the next event appended chains from
	// and that ChainBase returns; an import calls it on an empty store
	// before it appends a compacted log's events.
	SetChainBase(ctx context.Context, hash []byte) error
}

// LogRewriter is an optional Store capability for stores whose
// CompactEvents rewrites the whole remaining log, so that it costs about
// the same whatever it removes (the json store's events.ndjson).
// RewritesLog reports whether this one's does; gc then compacts in one
// transaction rather than in short batches, each of which would rewrite it.
type LogRewriter interface {
	RewritesLog() bool
}

// BelowFloorDeleter is an optional Store capability for stores whose
// every read of the event log starts at or above the floor and whose
// writers only add rows at the head, so that the rows below the floor are
// nobody's. gc then compacts in two steps: its Tx (a FloorRaiser) moves
// the floor in one short write, and DeleteBelowFloor removes the rows
// from <= seq < to that are below the floor in a transaction of its own
// that takes no lock writers wait for, returning how many it removed.
// from 0 also removes rows an interrupted gc left below an older floor.
type BelowFloorDeleter interface {
	DeleteBelowFloor(ctx context.Context, from, to int64) (int64, error)
}

// FloorRaiser is the Tx capability of a BelowFloorDeleter's store:
// RaiseFloor moves the floor up to floor and the chain's base to the hash
// of event floor-1, deleting nothing.
type FloorRaiser interface {
	RaiseFloor(ctx context.Context, floor int64) error
}

// Checkpointer is an optional Store capability for stores with a
// write-ahead log that a commit may stop to copy back (SQLite's WAL
// auto-checkpoint runs inside the commit that fills it). Checkpoint copies
// what it can without taking the writers' lock; gc calls it between
// batches, so that the pages its deletes wrote are copied back by it, not
// inside a writer's commit.
type Checkpointer interface {
	Checkpoint(ctx context.Context) error
}

// Reclaimer is an optional Store capability for stores that keep freed
// space inside their file (SQLite's free list). Reclaim gives back up to
// pages pages to the file system in one short write, and returns the bytes
// it gave back and the free bytes still left; pages 0 only reports what is
// free. A store that cannot give space back in steps may do it all at
// once (SQLite's first VACUUM of an older file), and says so in its docs.
type Reclaimer interface {
	Reclaim(ctx context.Context, pages int64) (freed, left int64, err error)
}

// FileSnapshotter is an optional Store capability for stores kept in one
// file (SQLite's). SnapshotFile writes a consistent copy of the store, as
// of one read snapshot, to path, which must not exist, without holding up
// writers; checks the copy with the file format's own integrity check;
// and returns a read-only Store on the copy, which the caller closes.
type FileSnapshotter interface {
	SnapshotFile(ctx context.Context, path string) (Store, error)
}

// Savepointer is an optional Tx capability: nested points to roll back to.
// With it, a handle commits concurrent writes in one transaction (group
// commit), each job in its own savepoint; without it, one per transaction.
// Savepoints nest as a stack: each Savepoint is ended by exactly one
// RollbackSavepoint (undo the writes since, and pop) or ReleaseSavepoint
// (keep them, and pop). A store without true savepoints must not claim this.
type Savepointer interface {
	Savepoint(ctx context.Context) error
	RollbackSavepoint(ctx context.Context) error
	ReleaseSavepoint(ctx context.Context) error
}

// NoteQuery is ListNotes' filter: the public cursor, decoded.
type NoteQuery struct {
	Kind      string
	AfterKind string
	AfterKey  string
	// BeforeKey, with Kind set, bounds the keys listed: only keys less
	// than it (bytewise). Empty: no bound.
	BeforeKey string
	Limit     int
}

// KindStart is where a list of one kind (Kind set) starts, for a backend
// that reads only that kind's rows: after AfterKey when AfterKind is that
// kind (after is true), at the kind's first key when AfterKind comes
// before it; past is true when AfterKind comes after it, and the list is
// empty.
func (q NoteQuery) KindStart() (afterKey string, after, past bool) {
	switch {
	case q.AfterKind > q.Kind:
		return "", false, true
	case q.AfterKind == q.Kind:
		return q.AfterKey, true, false
	}
	return "", false, false
}

// Counts is what Tx.Counts returns.
type Counts struct {
	Artifacts int
	Notes     int
	Tasks     map[workspace.TaskStatus]int
}

// Driver opens a backend's stores: the engine makes a Backend of it
// (engine.Backend), which the backend registers for its schemes.
type Driver interface {
	// Open connects to the store cfg names. An empty store gets the current
	// schema; an older one gives a *SchemaError unless cfg.AutoMigrate.
	Open(ctx context.Context, cfg Config) (Store, error)
	// Probe reports whether cfg names a workspace that was created,
	// without creating or changing anything, for Options.MustExist: nil if
	// it exists (whatever its schema version: Open checks that), an error
	// matching workspace.ErrNoWorkspace (a *workspace.NoWorkspaceError
	// saying what is missing) if there is none, or another error if it
	// could not look. The engine probes, then opens: a store removed
	// between the two is created again by the open; the probe guards
	// against mistakes, not against a concurrent delete.
	Probe(ctx context.Context, cfg Config) error
	// Params lists the backend's own ws_ DSN parameters; any other ws_
	// parameter not known to this package is an error.
	Params() []string
}

// ExistingOpener is an optional Driver capability: OpenExisting is Probe
// then Open in one step, for Options.MustExist, for a driver whose probe
// costs what an open does: SQLite's opens a connection and parses the
// whole schema on it, Postgres's starts a server session. It refuses
// what Probe refuses, with the same errors, creating nothing, and opens
// what Probe accepts as Open would, reusing what the probe opened.
type ExistingOpener interface {
	OpenExisting(ctx context.Context, cfg Config) (Store, error)
}

// MigratingDriver is an optional Driver capability, used by
// workspace.OpenMigrator (`wsctl migrate`): the Backend the engine makes
// of it is a MigratingBackend.
type MigratingDriver interface {
	Driver
	OpenMigrator(ctx context.Context, cfg Config) (workspace.Migrator, error)
}

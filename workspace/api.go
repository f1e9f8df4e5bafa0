package workspace

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentspace/agentspace/internal/wsbridge"
)

// Workspace is a handle on one shared, persistent workspace: the external
// memory of a team of agents. It is safe for concurrent use by many
// goroutines, and many handles (in one process or many, on one host or
// many) may share one store.
//
// Obtain one with Open (by DSN) or with a backend's own constructor (for
// an existing *sql.DB or *pgxpool.Pool). Every handle validates its input
// before a backend sees it and normalises errors to this package's set.
// Operations a backend cannot do (a file backup of a server, say) return
// an error matching errors.ErrUnsupported. To write a backend, see package
// driver.
type Workspace struct {
	c conn
}

// conn is what a Workspace wraps: the engine's handle or the HTTP client
// (see internal/wsconn). The admin operations are optional interfaces of
// it, asserted by the methods that use them. It is an alias of an
// interface literal, as is internal/wsconn.Conn, so that the two are one
// type.
type conn = interface {
	Artifacts() Artifacts
	Tasks() Tasks
	Notes() Notes
	Locks() Locks
	Events() Events
	Commit(ctx context.Context, b Batch) (BatchResult, error)
	Status(ctx context.Context) (Status, error)
	Close() error
}

// bridge is what this package hands internal/wsconn through
// internal/wsbridge: the ways into and out of a *Workspace, and the
// principal a context carries, for the code that implements one, none of
// them in this package's API.
type bridge struct{}

func init() { wsbridge.Workspace = bridge{} }

// Wrap makes a *Workspace of c.
func (bridge) Wrap(c conn) *Workspace { return &Workspace{c: c} }

// Of returns the connection ws wraps (nil for nil).
func (bridge) Of(ws *Workspace) conn {
	if ws == nil {
		return nil
	}
	return ws.c
}

// NewSubscription is newSubscription.
func (bridge) NewSubscription(ctx context.Context, buffer int, run func(context.Context, func(Message) bool) error) *Subscription {
	return newSubscription(ctx, buffer, run)
}

// Serve makes Open and OpenMigrator call open and openMigrator. The
// registry of schemes calls it once, from its init.
func (bridge) Serve(open func(context.Context, string, []Options) (*Workspace, error), openMigrator func(context.Context, string, []Options) (Migrator, error)) {
	opener, migratorOpener = open, openMigrator
}

// Artifacts manages the workspace's versioned content.
func (ws *Workspace) Artifacts() Artifacts { return ws.c.Artifacts() }

// Tasks manages the team's work queue.
func (ws *Workspace) Tasks() Tasks { return ws.c.Tasks() }

// Notes manages shared context: decisions, constraints, glossary terms.
func (ws *Workspace) Notes() Notes { return ws.c.Notes() }

// Locks manages leases with fencing tokens.
func (ws *Workspace) Locks() Locks { return ws.c.Locks() }

// Events reads and follows the workspace's log.
func (ws *Workspace) Events() Events { return ws.c.Events() }

// Commit applies a batch of writes all or nothing, in one transaction.
func (ws *Workspace) Commit(ctx context.Context, b Batch) (BatchResult, error) {
	return ws.c.Commit(ctx, b)
}

// Status is the dashboard: counts, active tasks, live locks, recent events.
func (ws *Workspace) Status(ctx context.Context) (Status, error) { return ws.c.Status(ctx) }

// Close ends subscriptions, waits for the handle's goroutines, and closes
// the store (the last of a store's handles does).
func (ws *Workspace) Close() error { return ws.c.Close() }

// CommitStats are the group commit's counters of a store open in this
// process, since it opened: how many groups of writes it ran and how long
// it spent gathering and running them. Writers that arrive together share
// a group and its commit, and groups run one at a time, so Running plus
// Gathering over a stretch of wall time is how busy the store's one
// committer was, and Writes over Groups is how many writes shared each
// commit. Handles that share a store share its counters.
type CommitStats struct {
	// Groups counts the groups run. A group is one store transaction,
	// except one that runs again with a savepoint per write (after one of
	// its writes failed) or, on a store without savepoints, one per write.
	Groups int64
	// Writes counts the writes the groups carried; a batch is one, and
	// so is a write whose caller gave up before its group began.
	Writes int64
	// Running is the time the groups' transactions took, commits included.
	Running time.Duration
	// Gathering is the time spent between a group's first write in hand
	// and its transaction's start, waiting for the writers expected to
	// join it.
	Gathering time.Duration
}

// CommitStats returns the group commit's counters of the store ws writes
// to, and false for a workspace without one in this process (a client of
// a server: the server's /metrics has its store's).
func (ws *Workspace) CommitStats() (CommitStats, bool) {
	if s, ok := ws.c.(interface{ CommitStats() CommitStats }); ok {
		return s.CommitStats(), true
	}
	return CommitStats{}, false
}

// unsupported is the error of an admin operation the handle's backend
// cannot do.
func (ws *Workspace) unsupported(op string) error {
	return fmt.Errorf("%s: not supported by this workspace's backend (%T): %w", op, ws.c, errors.ErrUnsupported)
}

// Artifacts manages versioned content. Writes return metadata (Content nil).
type Artifacts interface {
	// Create stores version 1 of a new artifact. A live artifact with the same
	// name gives ErrAlreadyExists.
	Create(ctx context.Context, w Write, a NewArtifact) (Artifact, error)
	// Get returns the head (or ref.Version) with its content.
	Get(ctx context.Context, ref ArtifactRef) (Artifact, error)
	// Update writes a new version from the head and the change.
	Update(ctx context.Context, w Write, ref ArtifactRef, c ArtifactChange) (Artifact, error)
	// Delete removes the artifact from the live set; its name becomes free.
	// Its versions stay readable by ID until retention removes them.
	Delete(ctx context.Context, w Write, ref ArtifactRef) error
	// Rollback writes a new head version whose content and metadata are
	// version to's. History is never rewritten.
	Rollback(ctx context.Context, w Write, ref ArtifactRef, to int64) (Artifact, error)
	// Versions lists every version's metadata, oldest first.
	Versions(ctx context.Context, ref ArtifactRef) ([]Artifact, error)
	// List returns one page of live artifacts' metadata, ordered by name.
	List(ctx context.Context, f ArtifactFilter) (ArtifactPage, error)
}

// Tasks manages the team's work queue.
type Tasks interface {
	// Create adds a pending task. Every DependsOn and ParentID must exist.
	Create(ctx context.Context, w Write, t NewTask) (Task, error)
	Get(ctx context.Context, id string) (Task, error)
	// Update changes fields and status along the state machine (see TaskStatus).
	Update(ctx context.Context, w Write, id string, c TaskChange) (Task, error)
	// Claim atomically takes the best ready task (pending, every dependency
	// done; highest priority, then oldest) and sets it in_progress for the
	// actor, under a lease. No two claimers ever get the same task.
	Claim(ctx context.Context, r ClaimRequest) (Task, error)
	// Heartbeat extends the claim's lease. ErrLockLost once it lapsed.
	Heartbeat(ctx context.Context, w Write, id string, lease time.Duration) (Task, error)
	// Complete marks a claimed task done with its result.
	Complete(ctx context.Context, w Write, id string, r TaskResult) (Task, error)
	// Fail marks a claimed task failed with its result.
	Fail(ctx context.Context, w Write, id string, r TaskResult) (Task, error)
	// Release returns a claimed task to pending.
	Release(ctx context.Context, w Write, id string) (Task, error)
	List(ctx context.Context, f TaskFilter) (TaskPage, error)
}

// Notes manages shared context: decisions, constraints, glossary terms.
type Notes interface {
	// Put creates or updates the note (Kind, Key).
	Put(ctx context.Context, w Write, n NotePut) (Note, error)
	Get(ctx context.Context, kind, key string) (Note, error)
	Delete(ctx context.Context, w Write, kind, key string) error
	List(ctx context.Context, f NoteFilter) (NotePage, error)
}

// Locks manages leases with fencing tokens. An expired lease is free without
// anyone cleaning up.
//
// Leases are re-entrant by owner, and the owner is only a name: two calls
// with the same Owner string are the same holder, from whatever goroutine,
// handle, process or host they come. So agents that must exclude each other
// need distinct owner names (two copies of one agent program too); an agent
// that acquires again what it holds extends its lease and keeps its token.
type Locks interface {
	// Acquire takes the lease, or extends it (same token) if the same owner
	// holds it already. Held by another live owner: a *LockedError.
	Acquire(ctx context.Context, r AcquireRequest) (Lease, error)
	// Renew extends a live lease by ttl from now. ErrLockLost once it expired
	// and was taken; ErrNotHolder for a lease that is not the caller's.
	Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// Release frees the lease; only its owner, with its token.
	Release(ctx context.Context, l Lease) error
	// ForceRelease frees the lease whoever holds it, recorded as lock.forced,
	// and revokes its token: the resource's fence moves past it, so a write
	// the old holder makes with it as its Fence fails with ErrStaleFence.
	ForceRelease(ctx context.Context, w Write, resource string) error
	// Get returns the live lease on resource, or ErrNotFound.
	Get(ctx context.Context, resource string) (Lease, error)
	// List returns every live lease, ordered by resource.
	List(ctx context.Context) ([]Lease, error)
}

// Events reads and follows the workspace's log.
type Events interface {
	// Read returns one page of history. A query below the floor gives a *CompactedError.
	Read(ctx context.Context, q EventQuery) (EventPage, error)
	// Subscribe delivers every matching event with Seq > q.AfterSeq exactly
	// once, in order: the backlog, then live, with no gap between them.
	Subscribe(ctx context.Context, r SubscribeRequest) (*Subscription, error)
	// Head returns the newest seq (0 for an empty log).
	Head(ctx context.Context) (int64, error)
	// Compact removes events with Seq < floor. Readers asking for them get ErrCompacted.
	Compact(ctx context.Context, floor int64) error
}

// SubscribeRequest is what Events.Subscribe takes.
type SubscribeRequest struct {
	Query EventQuery
	// Heartbeat is how often an idle stream reports the head (default 5s; negative: never).
	Heartbeat time.Duration
	// Buffer is how many messages the stream holds ahead of its consumer
	// (default 16, at most 1024). A consumer that holds many idle streams, as a server's
	// event streams are, may ask for 1: each idle stream keeps its buffer,
	// and a smaller one delays the sender, never drops or reorders.
	Buffer int
}

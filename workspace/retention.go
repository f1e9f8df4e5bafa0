package workspace

import (
	"context"
	"fmt"
	"time"

	"github.com/agentspace/agentspace/internal/reserve"
)

// GCPolicy says what a garbage collection keeps. A zero field keeps
// everything of its kind; an event is kept when either event rule keeps it.
// Lease rows are never removed: a released lease's row keeps the newest
// fencing token it issued, so that tokens keep increasing. Expired
// idempotency keys are pruned by each collection that removes something
// (and by writers as they go).
type GCPolicy struct {
	// Actor is who runs it (recorded on its event).
	Actor string
	// KeepEvents keeps the newest N events.
	KeepEvents int64
	// KeepEventsFor keeps the events younger than this.
	KeepEventsFor time.Duration
	// KeepVersions keeps the newest N versions of each artifact (the head
	// always); older ones go with their content, except pinned versions
	// (Workspace.Pin, or an op's Pin, as a change set's promotion writes them)
	// and those a task's result names (the version that was the head when
	// the task was last updated). A deleted artifact, found through the
	// event log above its floor, is cut the same way, its last version
	// standing for the head. Zero keeps every version.
	KeepVersions int64
	// KeepTasksFor keeps finished tasks (done or cancelled) updated within
	// this long; older ones go, except those that a task which stays
	// depends on or has as its parent. Zero keeps every task.
	KeepTasksFor time.Duration
	// KeepMessagesFor keeps messages sent within this long; older ones
	// go with their index entries, except those that still owe an ack,
	// which are kept whatever their age. Zero keeps every message.
	KeepMessagesFor time.Duration
	// MinEvents: remove no events unless at least this many events would go.
	// A scheduled gc sets 2, so that the event each run records cannot by
	// itself make the next run remove one more.
	MinEvents int64
	// Reclaim gives the space freed inside the store back to the file
	// system where the store keeps it (SQLite: incremental vacuum in short
	// steps; a file created before auto_vacuum was on is rewritten once by
	// a VACUUM that holds the write lock while it runs). Postgres's
	// (auto)vacuum and the json store's rewritten files need no step.
	Reclaim bool
	// DryRun reports what would go and removes nothing.
	DryRun bool
	// Batch is the most events (or versions, or tasks) one transaction
	// removes (default 10,000;
	// on a store whose compaction rewrites its log, the json store's,
	// default all of them in one).
	Batch int64
	// BatchTime is how long one transaction should hold the store's write
	// lock (default 10ms, at most 1s): gc sizes each batch from the time
	// the last one took, and rests as long between them, so a writer waits
	// for one short batch at most.
	BatchTime time.Duration
}

// GCKind counts what a collection removed (or would) of one kind.
type GCKind struct {
	Count int64 `json:"count"`
	// Bytes is the size of what was counted, in the store-independent
	// canonical encoding (an event's body, a version's content).
	Bytes int64 `json:"bytes"`
}

// GCReport is what a collection removed, or would with DryRun.
type GCReport struct {
	DryRun bool `json:"dry_run"`
	// Floor is the event log's floor before, and FloorAfter after.
	Floor      int64  `json:"floor"`
	FloorAfter int64  `json:"floor_after"`
	Events     GCKind `json:"events"`
	// Versions are the artifact versions removed; Bytes counts the content
	// no kept version shares.
	Versions GCKind `json:"versions"`
	// Tasks are the finished tasks removed.
	Tasks GCKind `json:"tasks"`
	// Messages are the messages removed (none that still owes an ack).
	Messages GCKind `json:"messages"`
	// Reclaimed is the space given back to the file system (with
	// Reclaim), and Reclaimable the free space still inside the store's
	// files (a dry run's is before anything goes); 0 where the store
	// keeps none it could give back.
	Reclaimed   int64 `json:"reclaimed_bytes"`
	Reclaimable int64 `json:"reclaimable_bytes"`
	// Batches is the number of transactions that removed something, and
	// LongestBatch the longest time a transaction of gc's held the
	// store's write lock (on Postgres the events' deletes hold none: the
	// floor is raised in one short write, then the rows below it go).
	Batches      int           `json:"batches"`
	LongestBatch time.Duration `json:"longest_batch_ns,omitempty"`
	// Seq is the seq of the event recorded for it (0 for a dry run or
	// when nothing went).
	Seq int64 `json:"seq,omitempty"`
}

// collector is the conn capability GC uses.
type collector interface {
	GC(ctx context.Context, p GCPolicy) (GCReport, error)
}

// GC removes what policy p does not keep (see GCPolicy) from the store
// behind ws, in small transactions, and records what it removed as an
// EventGC event. Subscribers and readers that need removed events get a
// *CompactedError with the new floor.
func (ws *Workspace) GC(ctx context.Context, p GCPolicy) (GCReport, error) {
	c, ok := ws.c.(collector)
	if !ok {
		return GCReport{}, ws.unsupported("gc")
	}
	return c.GC(ctx, p)
}

// pinKey is the capability to write pin notes: the kind is reserved, so
// pins are put and removed only by Pin and Unpin.
var pinKey = reserve.Own(PinKind, nil)

// Pin keeps version of the live artifact name from retention until
// Unpin, by putting its pin note (so it is recorded as a note.put
// event, and works through every backend and the HTTP API). The version
// must still exist.
func (ws *Workspace) Pin(ctx context.Context, w Write, name string, version int64) (Note, error) {
	a, err := ws.Artifacts().Get(ctx, ArtifactRef{Name: name, Version: version})
	if err != nil {
		return Note{}, err
	}
	return ws.Notes().Put(pinKey.Grant(ctx), w, NotePut{Kind: PinKind, Key: reserve.PinKey(a.ID, version),
		Title: fmt.Sprintf("%s version %d", name, version), Body: a.SHA256})
}

// Unpin removes the pin of version of the live artifact name;
// ErrNotFound if it was not pinned.
func (ws *Workspace) Unpin(ctx context.Context, w Write, name string, version int64) error {
	a, err := ws.Artifacts().Get(ctx, ArtifactRef{Name: name})
	if err != nil {
		return err
	}
	return ws.Notes().Delete(pinKey.Grant(ctx), w, PinKind, reserve.PinKey(a.ID, version))
}

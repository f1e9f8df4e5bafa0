package engine

import (
	"context"

	"github.com/agentspace/agentspace/internal/wsconn"
	"github.com/agentspace/agentspace/workspace"
)

// SameStore reports whether two handles share one store, for the tests of
// package workspace_test.
func SameStore(a, b *workspace.Workspace) bool {
	ha, ok1 := wsconn.Of(a).(*handle)
	hb, ok2 := wsconn.Of(b).(*handle)
	return ok1 && ok2 && ha.core == hb.core
}

// SharedStores is how many stores Open is sharing right now.
func SharedStores() int {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	return len(sharedCores)
}

// QueuedWriters is how many writers of w's store are handing a job to its
// committer right now.
func QueuedWriters(w *workspace.Workspace) int64 { return wsconn.Of(w).(*handle).writers.queued.Load() }

// SettledReads is how many times w's watcher read its store once an early
// store's notifications had settled.
func SettledReads(w *workspace.Workspace) int64 {
	return wsconn.Of(w).(*handle).hub.settledReads.Load()
}

// Notifies reports whether w's store notifies of other handles' commits
// (else it is polled).
func Notifies(w *workspace.Workspace) bool { return wsconn.Of(w).(*handle).hub.changes != nil }

// NotifiesEarly reports whether w's store is watched by notifications that
// come before the change can be read (see Notifications.Early).
func NotifiesEarly(w *workspace.Workspace) bool { return wsconn.Of(w).(*handle).hub.early }

// OwnReads is how many times w's watcher read its store for changes it
// had put off as most likely its own commits.
func OwnReads(w *workspace.Workspace) int64 { return wsconn.Of(w).(*handle).hub.ownReads.Load() }

// ChangesTaken is how many of its store's notifications w's watcher has
// taken and dealt with.
func ChangesTaken(w *workspace.Workspace) int64 {
	return wsconn.Of(w).(*handle).hub.changesTaken.Load()
}

// PolicyReads is how many times w's store read the policy's head.
func PolicyReads(w *workspace.Workspace) int64 { return wsconn.Of(w).(*handle).policy.reads.Load() }

// PolicyJoins is how many operations on w's store waited for another's
// read of the policy's head.
func PolicyJoins(w *workspace.Workspace) int64 { return wsconn.Of(w).(*handle).policy.joins.Load() }

// PlantLastMessageID records id as the greatest message id w's store has
// given, as a server whose clock ran ahead would have.
func PlantLastMessageID(ctx context.Context, w *workspace.Workspace, id string) error {
	h := wsconn.Of(w).(*handle)
	return h.run(ctx, "test.plant", "test", func(x *exec) error {
		n, err := x.tx.Note(ctx, msgLastKind, msgLastKey)
		if err != nil {
			n = workspace.Note{Kind: msgLastKind, Key: msgLastKey, Author: "test", CreatedAt: x.now}
		}
		n.Title, n.Version, n.UpdatedAt, n.UpdatedBy = id, n.Version+1, x.now, "test"
		return x.tx.PutNote(ctx, n)
	})
}

// SuccessorV7 is successorV7, for its test.
var SuccessorV7 = successorV7

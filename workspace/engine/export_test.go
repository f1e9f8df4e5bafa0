package engine

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/agentspace/agentspace/internal/wsconn"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
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

// PauseReads is how many times w's store read the pauses.
func PauseReads(w *workspace.Workspace) int64 { return wsconn.Of(w).(*handle).pauses.reads.Load() }

// PauseJoins is how many writes on w's store waited for another's read of
// the pauses.
func PauseJoins(w *workspace.Workspace) int64 { return wsconn.Of(w).(*handle).pauses.joins.Load() }

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

// InboxPair reads one page of q.Actor's inbox, who holds roles, twice in
// one snapshot: as the engine reads it, and by inboxFull, the
// recomputation from every index entry that the engine's read must equal.
func InboxPair(ctx context.Context, w *workspace.Workspace, q workspace.InboxQuery, roles []string) (got, want workspace.InboxPage, err error) {
	h := wsconn.Of(w).(*handle)
	err = h.view(ctx, "test.inbox", func(tx driver.ReadTx) error {
		var err error
		if got, err = inbox(ctx, tx, q, roles); err != nil {
			return err
		}
		want, err = inboxFull(ctx, tx, q, roles)
		return err
	})
	return got, want, err
}

// inboxFull is the inbox read as it was before its walks were bounded:
// every index entry of every recipient listed, then paged.
func inboxFull(ctx context.Context, tx driver.ReadTx, q workspace.InboxQuery, roles []string) (workspace.InboxPage, error) {
	page, rcpts, err := inboxHead(ctx, tx, q, roles)
	if err != nil {
		return page, err
	}
	listAll := func(kind, r, after string) ([]string, error) {
		prefix := rcptKey(r) + "/"
		var ids []string
		err := eachNote(ctx, tx, kind, func(n workspace.Note) error {
			if id, ok := strings.CutPrefix(n.Key, prefix); ok && id > after {
				ids = append(ids, id)
			}
			return nil
		})
		return ids, err
	}
	gather := func(kind, after string) ([]string, error) {
		var all []string
		for _, r := range rcpts {
			ids, err := listAll(kind, r, after)
			if err != nil {
				return nil, err
			}
			all = append(all, ids...)
		}
		slices.Sort(all)
		return slices.Compact(all), nil
	}
	unread, err := gather(msgBoxKind, page.Cursor)
	if err != nil {
		return page, err
	}
	unacked, err := gather(msgWaitKind, "")
	if err != nil {
		return page, err
	}
	page.Unread, page.Unacked = len(unread), len(unacked)
	var ids []string
	switch {
	case q.Unacked:
		ids = unacked
		if q.Unread {
			ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id <= page.Cursor })
		}
	case q.Unread:
		ids = unread
	default:
		if ids, err = gather(msgBoxKind, ""); err != nil {
			return page, err
		}
	}
	start, _ := slices.BinarySearch(ids, q.After)
	if start < len(ids) && ids[start] == q.After {
		start++
	}
	for _, id := range ids[start:] {
		msg, err := getMsg(ctx, tx, id)
		if errors.Is(err, workspace.ErrNotFound) {
			continue
		}
		if err != nil {
			return page, err
		}
		if q.Thread != "" && msg.Thread != q.Thread {
			continue
		}
		page.Messages = append(page.Messages, msg)
		if len(page.Messages) == q.Limit {
			page.Next = id
			break
		}
	}
	return page, nil
}

// DropMessageCounters removes every message counter, as a store written
// before the counters has none.
func DropMessageCounters(ctx context.Context, w *workspace.Workspace) error {
	h := wsconn.Of(w).(*handle)
	return h.run(ctx, "test.drop", "test", func(x *exec) error {
		var keys []string
		if err := eachNote(ctx, x.tx, msgCountKind, func(n workspace.Note) error {
			keys = append(keys, n.Key)
			return nil
		}); err != nil {
			return err
		}
		for _, k := range keys {
			if err := x.tx.DeleteNote(ctx, msgCountKind, k); err != nil {
				return err
			}
		}
		return nil
	})
}

// MessageCounted reports whether w's store keeps the message counters.
func MessageCounted(ctx context.Context, w *workspace.Workspace) (bool, error) {
	h := wsconn.Of(w).(*handle)
	var ok bool
	err := h.view(ctx, "test.counted", func(tx driver.ReadTx) error {
		var err error
		ok, err = counted(ctx, tx)
		return err
	})
	return ok, err
}

// ListNotes is w's store's ListNotes, on a read snapshot.
func ListNotes(ctx context.Context, w *workspace.Workspace, q driver.NoteQuery) ([]workspace.Note, error) {
	h := wsconn.Of(w).(*handle)
	var out []workspace.Note
	err := h.storeView(ctx, nil, func(tx driver.ReadTx) error {
		var err error
		out, err = tx.ListNotes(ctx, q)
		return err
	})
	return out, err
}

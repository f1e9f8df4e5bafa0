package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// msgRemovable reports whether retention may remove m at now under p: it
// was sent longer ago than p.KeepMessagesFor and owes no ack (it needed
// none, or every obligation was answered). An unacknowledged message is
// kept whatever its age.
func msgRemovable(m workspace.Msg, now time.Time, p workspace.GCPolicy) bool {
	return p.KeepMessagesFor > 0 && len(m.Pending) == 0 && m.SentAt.Before(now.Add(-p.KeepMessagesFor))
}

// gcMessagePlan returns the IDs of the messages p removes, oldest first,
// and their sizes (their records' JSON), from one snapshot.
func gcMessagePlan(ctx context.Context, tx driver.ReadTx, p workspace.GCPolicy) ([]string, []int64, error) {
	if p.KeepMessagesFor <= 0 {
		return nil, nil, nil
	}
	now := tx.Now()
	var (
		ids   []string
		sizes []int64
	)
	q := driver.NoteQuery{Kind: msgKind, Limit: archivePage}
	for {
		page, err := tx.ListNotes(ctx, q)
		if err != nil {
			return nil, nil, err
		}
		for _, n := range page {
			m, err := getMsg(ctx, tx, n.Key)
			if err != nil {
				return nil, nil, err
			}
			if msgRemovable(m, now, p) {
				ids = append(ids, m.ID)
				sizes = append(sizes, int64(len(n.Body)))
			}
		}
		if len(page) < q.Limit {
			return ids, sizes, nil
		}
		q.AfterKind, q.AfterKey = msgKind, page[len(page)-1].Key
	}
}

// gcMessages removes the planned messages with every index entry of
// theirs, in short transactions paced as the tasks' are. A message that
// changed since the plan is checked again in its transaction.
func (h *handle) gcMessages(ctx context.Context, p workspace.GCPolicy, ids []string, sizes []int64, r *workspace.GCReport) error {
	return h.removeInBatches(ctx, p, len(ids), &r.Messages, r, func(ctx context.Context, tx driver.Tx, i int) (bool, int64, error) {
		m, err := getMsg(ctx, tx, ids[i])
		if err != nil || !msgRemovable(m, tx.Now(), p) {
			return false, 0, nil
		}
		return true, sizes[i], dropMsg(ctx, tx, m)
	})
}

// dropEntry removes recipient r's entry of message id in index kind (box
// or wait), if there is one, and uncounts it: putEntry's inverse. It reads
// before it deletes because a backend's DeleteNote of an absent note may
// answer nil (see driver.Tx), and a counter must move only for an entry
// that was there.
func dropEntry(ctx context.Context, tx driver.Tx, kind, r, id, by string, at time.Time) error {
	key := rcptKey(r) + "/" + id
	if _, err := tx.Note(ctx, kind, key); errors.Is(err, workspace.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	if err := tx.DeleteNote(ctx, kind, key); err != nil {
		return err
	}
	return countEntry(ctx, tx, kind, r, id, -1, by, at)
}

// dropMsg deletes m's record and every index entry sendMessage and its
// acks wrote: one box entry per recipient and per expanded role member
// (each named by an ack's For), its thread entry, and any wait or due
// entry left.
func dropMsg(ctx context.Context, tx driver.Tx, m workspace.Msg) error {
	rcpts := slices.Clone(m.To)
	for _, a := range m.Acks {
		if !strings.HasPrefix(a.For, "role:") && !slices.Contains(rcpts, a.For) {
			rcpts = append(rcpts, a.For)
		}
	}
	rcpts = append(rcpts, m.Pending...)
	del := func(kind, key string) error {
		if err := tx.DeleteNote(ctx, kind, key); err != nil && !errors.Is(err, workspace.ErrNotFound) {
			return err
		}
		return nil
	}
	if err := ensureCounted(ctx, tx, "gc", tx.Now()); err != nil {
		return err
	}
	for _, r := range rcpts {
		for _, kind := range []string{msgBoxKind, msgWaitKind} {
			if err := dropEntry(ctx, tx, kind, r, m.ID, "gc", tx.Now()); err != nil {
				return err
			}
		}
	}
	if !m.Deadline.IsZero() {
		if err := del(msgDueKind, dueKey(m.Deadline, m.ID)); err != nil {
			return err
		}
	}
	if err := del(msgThreadKind, m.Thread+"/"+m.ID); err != nil {
		return err
	}
	return del(msgKind, m.ID)
}

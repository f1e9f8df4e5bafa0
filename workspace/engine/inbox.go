package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentspace/agentspace/internal/wsconn"
	"github.com/agentspace/agentspace/policy"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// Messages returns the handle's message operations.
func (h *handle) Messages() workspace.Messages { return messages{h} }

type messages struct{ h *handle }

func (m messages) Send(ctx context.Context, w workspace.Write, n workspace.NewMsg) (workspace.Msg, error) {
	r, err := m.h.single(ctx, "messages.send", w, workspace.SendMessageOp{Message: n})
	if err != nil || r.Msg == nil {
		return workspace.Msg{}, err
	}
	return *r.Msg, nil
}

func (m messages) Ack(ctx context.Context, w workspace.Write, id, reply string) (workspace.Msg, error) {
	r, err := m.h.single(ctx, "messages.ack", w, workspace.AckMessageOp{ID: id, Reply: reply})
	if err != nil || r.Msg == nil {
		return workspace.Msg{}, err
	}
	return *r.Msg, nil
}

// reader is whom a read of actor's messages acts for, and whether it may:
// in process anyone reads any inbox (the actor is self-declared); behind a
// server only the principal's own, or any with the admin "tokens" right.
func (m messages) reader(ctx context.Context, actor string) (who, error) {
	w, err := m.h.who(ctx, "")
	if err != nil {
		return w, err
	}
	if !w.set || actor == "" || baseActor(actor) == baseActor(w.actor) {
		return w, nil
	}
	if !readsOthers(w) {
		return w, &workspace.ForbiddenError{Actor: w.actor, Roles: w.roles, Action: "message.read", Object: actor,
			Reason: "an agent reads only its own inbox (an operator needs the admin role)"}
	}
	return w, nil
}

// readsOthers reports whether w may read others' inboxes and messages:
// with a policy, its admin "tokens" right; without one, the admin role.
func readsOthers(w who) bool {
	return w.decide(policy.AdminTokens, "") == nil && (w.pol != nil || slices.Contains(w.roles, policy.AdminRole))
}

// rolesFor is the roles actor reads role messages by.
func rolesFor(w who, actor string) []string {
	if w.set && w.roles != nil && baseActor(actor) == baseActor(w.actor) {
		return w.roles
	}
	if w.pol != nil {
		return w.pol.RolesOf(actor)
	}
	return nil
}

func (m messages) Get(ctx context.Context, id string) (workspace.Msg, error) {
	if err := checkID("message id", id); err != nil {
		return workspace.Msg{}, err
	}
	w, err := m.reader(ctx, "")
	if err != nil {
		return workspace.Msg{}, wrapErr("messages.get", err)
	}
	var out workspace.Msg
	err = m.h.viewHinted(ctx, "messages.get", []driver.ReadHint{{NoteKind: msgKind, NoteKey: id}}, func(tx driver.ReadTx) error {
		var err error
		out, err = getMsg(ctx, tx, id)
		return err
	})
	if err != nil {
		return workspace.Msg{}, err
	}
	if w.set && !msgParticipant(out, w.actor, rolesFor(w, w.actor)) {
		if !readsOthers(w) {
			// Not one's own: as if it did not exist, which it does not for the reader.
			return workspace.Msg{}, fmt.Errorf("messages.get: message %s: %w", id, workspace.ErrNotFound)
		}
	}
	return out, nil
}

func (m messages) MarkRead(ctx context.Context, actor, id string) error {
	if err := checkActor(actor); err != nil {
		return err
	}
	if err := checkID("message id", id); err != nil {
		return err
	}
	if _, err := m.reader(ctx, actor); err != nil {
		return wrapErr("messages.read", err)
	}
	if p, _ := wsconn.PrincipalFrom(ctx); impersonation(p, actor) != nil {
		return impersonation(p, actor)
	}
	return m.h.run(ctx, "messages.read", actor, func(x *exec) error {
		if _, err := getMsg(ctx, x.tx, id); err != nil {
			return err
		}
		key := rcptKey(actor)
		n, err := x.tx.Note(ctx, msgCursorKind, key)
		switch {
		case errors.Is(err, workspace.ErrNotFound):
			n = workspace.Note{Kind: msgCursorKind, Key: key, Author: actor, CreatedAt: x.now}
		case err != nil:
			return err
		case n.Title >= id:
			return nil // a cursor never moves back
		}
		n.Title, n.Body = id, actor
		n.Version++
		n.UpdatedAt, n.UpdatedBy = x.now, actor
		if err := x.tx.PutNote(ctx, n); err != nil {
			return err
		}
		// An event, so that every store (the json one reloads what events
		// name) and every follower sees the cursor move.
		x.emit(workspace.EventMessageRead, workspace.Subject{Kind: workspace.SubjectMessage, ID: id}, n.Version, "")
		return nil
	})
}

func (m messages) Escalate(ctx context.Context, actor string) ([]workspace.Msg, error) {
	if err := checkActor(actor); err != nil {
		return nil, err
	}
	// A read first: a checker that runs every second (a server's) takes
	// the store's write path only when something is due.
	if due, err := m.due(ctx); err != nil || !due {
		return nil, err
	}
	var out []workspace.Msg
	err := m.h.run(ctx, "messages.escalate", actor, func(x *exec) error {
		var err error
		out, err = x.escalateDue(ctx)
		return err
	})
	return out, err
}

func (m messages) Inbox(ctx context.Context, q workspace.InboxQuery) (workspace.InboxPage, error) {
	if err := checkActor(q.Actor); err != nil {
		return workspace.InboxPage{}, err
	}
	if err := checkOptionalID("thread", q.Thread); err != nil {
		return workspace.InboxPage{}, err
	}
	if err := checkOptionalID("after", q.After); err != nil {
		return workspace.InboxPage{}, err
	}
	limit, err := checkLimit("limit", q.Limit, maxPageLimit)
	if err != nil {
		return workspace.InboxPage{}, err
	}
	q.Limit = limit
	var waiter *inboxWaiter
	defer func() {
		if waiter != nil {
			m.h.unregisterInbox(waiter)
		}
	}()
	for {
		w, err := m.reader(ctx, q.Actor)
		if err != nil {
			return workspace.InboxPage{}, wrapErr("messages.inbox", err)
		}
		roles := rolesFor(w, q.Actor)
		if q.Wait {
			// Registered before the read: a message sent after it wakes
			// this poll (inboxwake.go).
			if waiter != nil {
				m.h.unregisterInbox(waiter)
			}
			keys := []string{q.Actor}
			for _, r := range roles {
				keys = append(keys, "role:"+r)
			}
			if waiter, err = m.h.registerInbox(ctx, keys); err != nil {
				return workspace.InboxPage{}, wrapErr("messages.inbox", err)
			}
		}
		// The escalation is the reader's write: an admin reading another's
		// inbox escalates as itself, not as the inbox's owner.
		by := q.Actor
		if w.set && w.actor != "" {
			by = w.actor
		}
		if err := m.escalateIfDue(ctx, by); err != nil {
			return workspace.InboxPage{}, err
		}
		var page workspace.InboxPage
		err = m.h.view(ctx, "messages.inbox", func(tx driver.ReadTx) error {
			var err error
			page, err = inbox(ctx, tx, q, roles)
			return err
		})
		if err != nil || len(page.Messages) > 0 || !q.Wait {
			return page, err
		}
		// Woken by a message to this inbox, a change of the policy or a
		// deadline that passed (the dispatcher's); read again now and then
		// in any case.
		if err := waiter.wait(ctx, m.h.ctx.Done()); err != nil {
			return workspace.InboxPage{}, err
		}
	}
}

// escalateIfDue escalates what is due when anything is: a deadline is
// checked by whatever runs, the next read of an inbox included.
func (m messages) escalateIfDue(ctx context.Context, actor string) error {
	_, err := m.Escalate(ctx, actor)
	return err
}

// due reports whether a message's deadline has passed unescalated.
func (m messages) due(ctx context.Context) (bool, error) {
	var due bool
	err := m.h.view(ctx, "messages.escalate", func(tx driver.ReadTx) error {
		ns, err := tx.ListNotes(ctx, driver.NoteQuery{Kind: msgDueKind, Limit: 1})
		if err != nil || len(ns) == 0 {
			return err
		}
		now := tx.Now()
		if c := m.h.opts.Clock; c != nil {
			now = c().UTC()
		}
		due = ns[0].Key <= dueKey(now, "~")
		return nil
	})
	return due, err
}

// An idStream walks one recipient's entries of an index kind in id order,
// from after an id, a page of the store at a time: a read of an inbox
// lists only what it returns or counts, never the index from its start.
type idStream struct {
	ctx    context.Context
	tx     driver.ReadTx
	q      driver.NoteQuery
	prefix string
	buf    []string
	done   bool
}

func newIDStream(ctx context.Context, tx driver.ReadTx, kind, r, after string, page int) *idStream {
	prefix := rcptKey(r) + "/"
	return &idStream{ctx: ctx, tx: tx, prefix: prefix,
		q: driver.NoteQuery{Kind: kind, AfterKind: kind, AfterKey: prefix + after, BeforeKey: prefixEnd(prefix),
			Limit: min(max(page, 16), maxPageLimit)}}
}

// prefixEnd is the least key above every key that begins with prefix,
// whose last byte is '/'.
func prefixEnd(prefix string) string { return prefix[:len(prefix)-1] + "0" }

// peek returns the stream's next id, or "" at its end.
func (s *idStream) peek() (string, error) {
	for len(s.buf) == 0 && !s.done {
		page, err := s.tx.ListNotes(s.ctx, s.q)
		if err != nil {
			return "", err
		}
		for _, n := range page {
			id, ok := strings.CutPrefix(n.Key, s.prefix)
			if !ok {
				s.done = true
				break
			}
			s.buf = append(s.buf, id)
		}
		if len(page) < s.q.Limit {
			s.done = true
		} else {
			s.q.AfterKey = page[len(page)-1].Key
			// Later pages of a long walk are read whole.
			s.q.Limit = maxPageLimit
		}
	}
	if len(s.buf) == 0 {
		return "", nil
	}
	return s.buf[0], nil
}

// merged walks the union of streams in id order, each id once.
type merged []*idStream

// next returns the least id of the streams, past every stream's copy of
// it, or "" when all have ended.
func (m merged) next() (string, error) {
	least := ""
	for _, s := range m {
		id, err := s.peek()
		if err != nil {
			return "", err
		}
		if id != "" && (least == "" || id < least) {
			least = id
		}
	}
	if least == "" {
		return "", nil
	}
	for _, s := range m {
		if len(s.buf) > 0 && s.buf[0] == least {
			s.buf = s.buf[1:]
		}
	}
	return least, nil
}

// gatherIDs is the merged walk of kind's entries of rcpts after after.
func gatherIDs(ctx context.Context, tx driver.ReadTx, kind string, rcpts []string, after string, page int) merged {
	m := make(merged, len(rcpts))
	for i, r := range rcpts {
		m[i] = newIDStream(ctx, tx, kind, r, after, page)
	}
	return m
}

// count is how many ids the merged walk holds.
func (m merged) count() (int, error) {
	n := 0
	for {
		id, err := m.next()
		if err != nil || id == "" {
			return n, err
		}
		n++
	}
}

// inboxHead is what every read of q.Actor's inbox starts from: its
// recipients (the actor, and each role as role:NAME), and a page holding
// its read cursor and whether it is paused.
func inboxHead(ctx context.Context, tx driver.ReadTx, q workspace.InboxQuery, roles []string) (workspace.InboxPage, []string, error) {
	var page workspace.InboxPage
	rcpts := []string{q.Actor}
	for _, r := range roles {
		rcpts = append(rcpts, "role:"+r)
	}
	if c, err := tx.Note(ctx, msgCursorKind, rcptKey(q.Actor)); err == nil {
		page.Cursor = c.Title
	} else if !errors.Is(err, workspace.ErrNotFound) {
		return page, nil, err
	}
	p, err := paused(ctx, tx, q.Actor)
	if err != nil {
		return page, nil, err
	}
	page.Paused = p != nil
	return page, rcpts, nil
}

// inbox reads one page of q.Actor's inbox, its counts and its cursor.
func inbox(ctx context.Context, tx driver.ReadTx, q workspace.InboxQuery, roles []string) (workspace.InboxPage, error) {
	page, rcpts, err := inboxHead(ctx, tx, q, roles)
	if err != nil {
		return page, err
	}
	// A role obligation another member answered is gone from msg-wait; an
	// expanded member's own entry is under its name. Both are exact. A
	// store that keeps the counters (msgcount.go) is counted from them;
	// one written before them, by walking its entries.
	ok, err := counted(ctx, tx)
	switch {
	case err != nil:
		return page, err
	case ok:
		if page.Unread, page.Unacked, err = inboxCounts(ctx, tx, rcpts, page.Cursor); err != nil {
			return page, err
		}
	default:
		if page.Unread, err = gatherIDs(ctx, tx, msgBoxKind, rcpts, page.Cursor, maxPageLimit).count(); err != nil {
			return page, err
		}
		if page.Unacked, err = gatherIDs(ctx, tx, msgWaitKind, rcpts, "", maxPageLimit).count(); err != nil {
			return page, err
		}
	}
	// The page's walk starts at q.After (or the cursor, for unread
	// messages, when it is further) and ends at the page's last message.
	kind, after := msgBoxKind, q.After
	if q.Unacked {
		kind = msgWaitKind
	}
	if q.Unread && page.Cursor > after {
		after = page.Cursor
	}
	// A thread's page walks the thread's index, which holds fewer than the
	// inbox (and never more than the thread), and keeps what the inbox's
	// index of kind holds.
	var next func() (string, error)
	if q.Thread != "" {
		th := newIDStream(ctx, tx, msgThreadKind, "", after, q.Limit+1)
		th.prefix = q.Thread + "/"
		th.q.AfterKey, th.q.BeforeKey = th.prefix+after, prefixEnd(th.prefix)
		next = func() (string, error) {
			for {
				id, err := th.peek()
				if err != nil || id == "" {
					return "", err
				}
				th.buf = th.buf[1:]
				for _, r := range rcpts {
					_, err := tx.Note(ctx, kind, rcptKey(r)+"/"+id)
					if err == nil {
						return id, nil
					}
					if !errors.Is(err, workspace.ErrNotFound) {
						return "", err
					}
				}
			}
		}
	} else {
		next = gatherIDs(ctx, tx, kind, rcpts, after, q.Limit+1).next
	}
	for {
		id, err := next()
		if err != nil {
			return page, err
		}
		if id == "" {
			return page, nil
		}
		msg, err := getMsg(ctx, tx, id)
		if errors.Is(err, workspace.ErrNotFound) {
			continue // removed by retention since it was indexed
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
			return page, nil
		}
	}
}

package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// The message views read the engine, never a message's text: which
// messages exist comes from the typed events (message.sent,
// message.escalated), and each is then read with Messages().Get as the
// viewer, so the engine decides what the viewer sees (an agent its own
// messages, an admin every one). A message the viewer may not read is
// counted, not shown.

// Bounds of the message views.
const (
	// maxExamine is how many messages one page of the messages view or
	// one thread reads (a Get each) at most; past it, it says so.
	maxExamine = 2000
	// inboxRecent is how many of an agent's newest messages its page
	// shows; inboxScan how many of its inbox it reads to find them.
	inboxRecent = 20
	inboxScan   = 5000
	// awaitingShown is how many messages awaiting an agent's ack its page
	// lists (the count is exact).
	awaitingShown = 100
)

// msgRow is one message as a list shows it.
type msgRow struct {
	workspace.Msg
	URL     string // its thread, at the message
	Unread  bool   // after the inbox's read cursor (inbox rows only)
	Overdue bool   // its deadline has passed with an ack still owed
	Data    string // its data, indented; "" for none
}

// rowOf is m as a list shows it at now.
func rowOf(m workspace.Msg, now time.Time) msgRow {
	r := msgRow{Msg: m, URL: messageLink(m)}
	r.Overdue = m.RequiresAck && len(m.Pending) > 0 && !m.Deadline.IsZero() && !now.Before(m.Deadline)
	if len(m.Data) > 0 {
		var b bytes.Buffer
		if json.Indent(&b, m.Data, "", "  ") == nil {
			r.Data = b.String()
		} else {
			r.Data = string(m.Data)
		}
	}
	return r
}

// messageLink is the page of m's thread, at m.
func messageLink(m workspace.Msg) string {
	return "/ui/message?" + encode("id", m.ID) + "#msg-" + m.ID
}

// owes reports whether m still waits for an ack.
func owes(m workspace.Msg) bool { return m.RequiresAck && len(m.Pending) > 0 }

// messagesView is the messages page: the team's messages that still owe an
// ack or were escalated, newest first.
type messagesView struct {
	Rows     []msgRow
	Awaiting int // rows that still owe an ack
	Overdue  int // of them, past their deadline
	// Escalated counts the rows escalated.
	Escalated int
	Hidden    int  // messages named by the log the viewer may not read, or removed since
	Admin     bool // the viewer reads every message
	Examined  int
	Older     string // the next page back; "" at the floor
	Newest    string // the live first page, when this is an older one
}

// loadMessages reads /ui/messages: the message events going back from
// before= (the head by default), each message once, as the feed reads
// the log, keeping those that owe an ack or were escalated.
func (h *Handler) loadMessages(ctx context.Context, r *http.Request, id Identity) (any, error) {
	q := r.URL.Query()
	head, err := h.ws.Events().Head(ctx)
	if err != nil {
		return nil, err
	}
	hi := head + 1
	v := messagesView{Admin: id.Admin()}
	if s := q.Get("before"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			return nil, invalid("before %q: want a seq", truncate(s, 32))
		}
		hi = min(n, hi)
		v.Newest = "/ui/messages"
	}
	eq := workspace.EventQuery{Types: []string{workspace.EventMessageSent, workspace.EventMessageEscalated}}
	seen := map[string]bool{}
	now := h.now()
	floor := int64(0)
	top := hi // every seq at or above top was read
	full := false
	for top-1 > floor && !full && hi-top < feedScan {
		from := max(top-1-feedWindow, floor)
		batch, err := h.readRange(ctx, eq, from, top)
		var ce *workspace.CompactedError
		if errors.As(err, &ce) && ce.Floor-1 > floor {
			floor = ce.Floor - 1
			continue
		}
		if err != nil {
			return nil, err
		}
		top = from + 1
		for i := len(batch) - 1; i >= 0; i-- {
			e := batch[i]
			if seen[e.Subject.ID] {
				continue
			}
			if len(v.Rows) >= h.opts.PageSize || v.Examined >= maxExamine {
				// The older page starts at this event, which is not read.
				full, top = true, e.Seq+1
				break
			}
			seen[e.Subject.ID] = true
			v.Examined++
			m, err := h.ws.Messages().Get(ctx, e.Subject.ID)
			switch {
			case errors.Is(err, workspace.ErrNotFound), errors.Is(err, workspace.ErrForbidden):
				v.Hidden++
				continue
			case err != nil:
				return nil, err
			}
			if !owes(m) && m.EscalatedAt.IsZero() {
				continue
			}
			row := rowOf(m, now)
			if owes(m) {
				v.Awaiting++
			}
			if row.Overdue {
				v.Overdue++
			}
			if !m.EscalatedAt.IsZero() {
				v.Escalated++
			}
			v.Rows = append(v.Rows, row)
		}
	}
	if top-1 > floor {
		v.Older = "/ui/messages?" + encode("before", strconv.FormatInt(top, 10))
	}
	return v, nil
}

// threadView is a message's thread, its messages in sending order.
type threadView struct {
	Thread   string
	Focus    string // the message asked for
	Messages []msgRow
	Hidden   int  // thread messages named by the log the viewer may not read
	Partial  bool // more messages were sent since than one page reads
}

// loadMessage reads /ui/message?id=ID: the message (as the viewer may
// read it) and its thread. The thread's messages are found through the
// message.sent events from its first message's sending on.
func (h *Handler) loadMessage(ctx context.Context, r *http.Request, _ Identity) (any, error) {
	id := r.URL.Query().Get("id")
	if id == "" {
		return nil, invalid("id: missing")
	}
	m, err := h.getMessage(ctx, id)
	if err != nil {
		return nil, err
	}
	// The read starts at the thread's first message's sending, when the
	// viewer may read it (a message's event is written in the transaction
	// that sends it, at its SentAt; events keep microseconds), else at
	// the log's floor.
	var since time.Time
	if root, err := h.getMessage(ctx, m.Thread); err == nil {
		since = root.SentAt.Truncate(time.Millisecond)
	} else if !errors.Is(err, workspace.ErrNotFound) {
		return nil, err
	}
	v := threadView{Thread: m.Thread, Focus: m.ID}
	now := h.now()
	st, err := h.ws.Status(ctx)
	if err != nil {
		return nil, err
	}
	eq := workspace.EventQuery{Types: []string{workspace.EventMessageSent}, Since: since, AfterSeq: max(st.Floor-1, 0), Limit: 10_000}
	seen := map[string]bool{}
	examined := 0
read:
	for {
		p, err := h.ws.Events().Read(ctx, eq)
		if err != nil {
			return nil, err
		}
		for _, e := range p.Events {
			if seen[e.Subject.ID] || e.Subject.ID < m.Thread {
				continue // a thread's messages are sent after its first (UUIDv7)
			}
			if examined >= maxExamine {
				v.Partial = true
				break read
			}
			seen[e.Subject.ID] = true
			examined++
			t, err := h.ws.Messages().Get(ctx, e.Subject.ID)
			switch {
			case errors.Is(err, workspace.ErrNotFound):
				continue // not the viewer's, or removed: it cannot tell which thread
			case err != nil:
				return nil, err
			}
			if t.Thread == m.Thread {
				v.Messages = append(v.Messages, rowOf(t, now))
			}
		}
		if len(p.Events) < eq.Limit || p.Next == 0 || p.Next <= eq.AfterSeq {
			break
		}
		eq.AfterSeq = p.Next
	}
	if !slices.ContainsFunc(v.Messages, func(r msgRow) bool { return r.ID == m.ID }) {
		// Its event is older than the log keeps: it is shown all the same.
		v.Messages = append(v.Messages, rowOf(m, now))
		slices.SortFunc(v.Messages, func(a, b msgRow) int { return strings.Compare(a.ID, b.ID) })
	}
	return v, nil
}

// getMessage reads one message as the viewer; a malformed id is the
// caller's mistake.
func (h *Handler) getMessage(ctx context.Context, id string) (workspace.Msg, error) {
	m, err := h.ws.Messages().Get(ctx, id)
	if errors.Is(err, workspace.ErrInvalid) {
		return m, invalid("id %q: not a message id", truncate(id, 64))
	}
	return m, err
}

// inboxView is an agent's inbox on its page.
type inboxView struct {
	// Refused is the engine's refusal to read it for this viewer ("" when
	// read): another agent's inbox is an operator's view.
	Refused         string
	Unread, Unacked int
	Awaiting        []msgRow // what it owes an ack for, oldest first
	Recent          []msgRow // its newest messages, newest first
	Escalated       int      // of Awaiting, escalated
	Partial         bool     // its inbox holds more than inboxScan messages
}

// pauseView is whether an agent is paused, by whom and since when.
type pauseView struct {
	Paused bool
	By     string
	Since  time.Time
	Known  bool // By and Since were found among the events scanned
}

// loadInbox reads actor's inbox as the viewer (ctx's principal).
func (h *Handler) loadInbox(ctx context.Context, actor string) (inboxView, bool, error) {
	var v inboxView
	now := h.now()
	page, err := h.ws.Messages().Inbox(ctx, workspace.InboxQuery{Actor: actor, Unacked: true, Limit: awaitingShown})
	switch {
	case errors.Is(err, workspace.ErrForbidden):
		v.Refused = err.Error()
		return v, false, nil
	case errors.Is(err, errors.ErrUnsupported):
		v.Refused = "this workspace's store keeps no messages"
		return v, false, nil
	case err != nil:
		return v, false, err
	}
	v.Unread, v.Unacked = page.Unread, page.Unacked
	paused := page.Paused
	for _, m := range page.Messages {
		r := rowOf(m, now)
		r.Unread = m.ID > page.Cursor
		if !m.EscalatedAt.IsZero() {
			v.Escalated++
		}
		v.Awaiting = append(v.Awaiting, r)
	}
	// The inbox is read oldest first: its newest messages are its last.
	q := workspace.InboxQuery{Actor: actor, Limit: 1000}
	var recent []workspace.Msg
	for read := 0; ; {
		p, err := h.ws.Messages().Inbox(ctx, q)
		if err != nil {
			return v, false, err
		}
		recent = append(recent, p.Messages...)
		if len(recent) > inboxRecent {
			recent = recent[len(recent)-inboxRecent:]
		}
		read += len(p.Messages)
		if p.Next == "" {
			break
		}
		if read >= inboxScan {
			v.Partial = true
			break
		}
		q.After = p.Next
	}
	for i := len(recent) - 1; i >= 0; i-- {
		r := rowOf(recent[i], now)
		r.Unread = recent[i].ID > page.Cursor
		v.Recent = append(v.Recent, r)
	}
	return v, paused, nil
}

// loadPause finds actor's pause: whether it is paused (known, when its
// inbox was read, else from the newest pause or resume event), and by
// whom and since when from its newest actor.paused event.
func (h *Handler) loadPause(ctx context.Context, actor string, fromInbox *bool) (pauseView, error) {
	var v pauseView
	eq := workspace.EventQuery{Types: []string{workspace.EventActorPaused, workspace.EventActorResumed},
		SubjectKind: workspace.SubjectActor, SubjectID: laneOf(actor)}
	e, ok, err := h.newest(ctx, eq)
	if err != nil {
		return v, err
	}
	if fromInbox != nil {
		v.Paused = *fromInbox
	} else {
		v.Paused = ok && e.Type == workspace.EventActorPaused
	}
	if v.Paused && ok && e.Type == workspace.EventActorPaused {
		v.By, v.Since, v.Known = e.Actor, e.Time, true
	}
	return v, nil
}

// newest returns the newest event eq matches, reading the log back from
// its head in windows, at most feedScan seqs.
func (h *Handler) newest(ctx context.Context, eq workspace.EventQuery) (workspace.Event, bool, error) {
	head, err := h.ws.Events().Head(ctx)
	if err != nil {
		return workspace.Event{}, false, err
	}
	floor, top := int64(0), head+1
	for top-1 > floor && head+1-top < feedScan {
		from := max(top-1-feedWindow, floor)
		batch, err := h.readRange(ctx, eq, from, top)
		var ce *workspace.CompactedError
		if errors.As(err, &ce) && ce.Floor-1 > floor {
			floor = ce.Floor - 1
			continue
		}
		if err != nil {
			return workspace.Event{}, false, err
		}
		if len(batch) > 0 {
			return batch[len(batch)-1], true, nil
		}
		top = from + 1
	}
	return workspace.Event{}, false, nil
}

// pauseAgent pauses the agent the form names: a PauseActorOp committed as
// the operator, whose message asks the agent's ack within ack_timeout.
func (h *Handler) pauseAgent(r *http.Request, w workspace.Write) (string, error) {
	actor := r.PostForm.Get("actor")
	if actor == "" {
		return "", invalid("actor: missing")
	}
	var timeout time.Duration
	if s := strings.TrimSpace(r.PostForm.Get("ack_timeout")); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return "", invalid("ack timeout %q: want a duration such as 10m, or nothing for none", truncate(s, 32))
		}
		timeout = d
	}
	res, err := h.ws.Commit(r.Context(), workspace.Batch{Actor: w.Actor, Ops: []workspace.Op{
		workspace.PauseActorOp{Actor: actor, Message: strings.TrimSpace(r.PostForm.Get("message")), AckTimeout: timeout}}})
	if err != nil {
		return "", err
	}
	msg := "paused " + visible(actor)
	if !slices.ContainsFunc(res.Events, func(e workspace.Event) bool { return e.Type == workspace.EventActorPaused }) {
		// A pause of a paused actor writes nothing and returns the first's message.
		msg = visible(actor) + " was already paused"
	}
	if m := res.Results[0].Msg; m != nil {
		if m.Deadline.IsZero() {
			msg += "; its pause message awaits its ack, with no deadline"
		} else {
			msg += "; its pause message awaits its ack by " + m.Deadline.UTC().Format("15:04:05") + " UTC"
		}
	}
	return msg, nil
}

// resumeAgent lifts the pause of the agent the form names: a
// ResumeActorOp committed as the operator.
func (h *Handler) resumeAgent(r *http.Request, w workspace.Write) (string, error) {
	actor := r.PostForm.Get("actor")
	if actor == "" {
		return "", invalid("actor: missing")
	}
	_, err := h.ws.Commit(r.Context(), workspace.Batch{Actor: w.Actor, Ops: []workspace.Op{
		workspace.ResumeActorOp{Actor: actor, Message: strings.TrimSpace(r.PostForm.Get("message"))}}})
	if err != nil {
		return "", err
	}
	return "resumed " + visible(actor), nil
}

// escalationMarks reads the message of each escalation of f, as the
// viewer, and marks it on the lane of each that owed the ack when it was
// escalated: those it still waits for, and those that acked since. It
// returns how many it could not place: their messages are not the
// viewer's to read (or were removed).
func (h *Handler) escalationMarks(ctx context.Context, f *flow) (int, error) {
	unread := 0
	for _, esc := range f.escalations {
		m, err := h.ws.Messages().Get(ctx, esc.ID)
		switch {
		case errors.Is(err, workspace.ErrNotFound), errors.Is(err, workspace.ErrInvalid):
			unread++
			continue
		case err != nil:
			return 0, err
		}
		subject := m.Subject
		if subject == "" {
			subject = "(no subject)"
		}
		for _, owed := range owedAt(m) {
			lane := laneOf(owed)
			title := "escalated at " + esc.At.UTC().Format("15:04:05") + ": " + owed + " owed an ack to " + m.From + "'s " + strconv.Quote(subject)
			if !m.Deadline.IsZero() {
				title += " by " + m.Deadline.UTC().Format("15:04:05")
			}
			if slices.Contains(m.Pending, owed) {
				title += "; still owed"
			} else {
				title += "; acked since"
			}
			f.lanes[lane] = true
			if len(f.marks) >= maxMarks {
				f.DropMark++
				continue
			}
			f.marks = append(f.marks, mark{Actor: lane, Type: "escalated", At: esc.At, Subject: subject, URL: messageLink(m), Title: title})
		}
	}
	return unread, nil
}

// owedAt is whom m waited for when it was escalated: the obligations it
// still waits for, and those acked at or after its escalation (a role's
// by the member that answered it).
func owedAt(m workspace.Msg) []string {
	out := slices.Clone(m.Pending)
	for _, a := range m.Acks {
		if a.At.Before(m.EscalatedAt) {
			continue
		}
		who := a.For
		if strings.HasPrefix(who, "role:") {
			who = a.By
		}
		if !slices.Contains(out, who) {
			out = append(out, who)
		}
	}
	return out
}

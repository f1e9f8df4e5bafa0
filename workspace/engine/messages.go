package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agentspace/agentspace/internal/reserve"
	"github.com/agentspace/agentspace/policy"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// Messages are kept as sealed reserved notes that only this file writes and
// reads, so every store keeps them, exports them and fails over with them
// as it does notes, with no schema of their own:
//
//	msg         KEY = message ID           the record (its JSON in Body)
//	msg-box     KEY = rcpt/ID              delivered to rcpt (an actor or role:NAME)
//	msg-wait    KEY = rcpt/ID              rcpt still owes an ack
//	msg-due     KEY = deadline/ID          needs an ack by deadline, not escalated yet
//	msg-thread  KEY = thread/ID            a thread's messages
//	msg-cursor  KEY = actor                the actor's read cursor (Title: an ID)
//
// rcpt is a fixed-width hash of the recipient's name (any printable actor
// name fits a key, and no name's prefix is another's). IDs are UUIDv7, so
// each index lists its entries in sending order. Invariant: every index
// entry is written and removed in the transaction that changes the record
// it indexes, so an index never disagrees with the records.
const (
	msgKind       = "msg"
	msgBoxKind    = "msg-box"
	msgWaitKind   = "msg-wait"
	msgDueKind    = "msg-due"
	msgThreadKind = "msg-thread"
	msgCursorKind = "msg-cursor"
	pauseKind     = "pause"
)

func init() {
	for _, k := range []string{msgKind, msgBoxKind, msgWaitKind, msgDueKind, msgThreadKind, msgCursorKind, msgLastKind, msgCountKind, pauseKind} {
		reserve.Own(k, nil)
	}
}

// Limits of a message.
const (
	maxRecipients = 64
	maxReplyLen   = 4096
	maxDataLen    = 64 << 10
	// DefaultEscalateTo is whom a message that needs an ack by a deadline
	// is escalated to when it names no one.
	defaultEscalateTo = "role:" + policy.AdminRole
)

var roleNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`) })

func checkRecipient(field, r string) error {
	if name, ok := strings.CutPrefix(r, "role:"); ok {
		if !roleNameRE().MatchString(name) {
			return invalid(field, "%q: a role is role:NAME, NAME a lower-case word", truncate(r, 64))
		}
		return nil
	}
	if err := checkActor(r); err != nil {
		return invalid(field, "%q is not an actor name: %v", truncate(r, 64), err)
	}
	return nil
}

func checkRecipients(field string, rs []string, need bool) error {
	if need && len(rs) == 0 {
		return invalid(field, "a message needs at least one recipient (an actor, or role:NAME)")
	}
	if len(rs) > maxRecipients {
		return invalid(field, "%d recipients is over the limit of %d", len(rs), maxRecipients)
	}
	for i, r := range rs {
		if err := checkRecipient(field, r); err != nil {
			return err
		}
		if slices.Contains(rs[:i], r) {
			return invalid(field, "%q is named twice", truncate(r, 64))
		}
	}
	return nil
}

func checkSendMessage(_ *handle, o workspace.SendMessageOp) error {
	m := o.Message
	if err := checkRecipients("to", m.To, true); err != nil {
		return err
	}
	if err := checkRecipients("escalate to", m.EscalateTo, false); err != nil {
		return err
	}
	if err := checkOptionalID("reply to", m.ReplyTo); err != nil {
		return err
	}
	if m.Type != "" {
		if err := checkKind("type", m.Type); err != nil {
			return err
		}
	}
	switch m.Severity {
	case "", workspace.SeverityInfo, workspace.SeverityWarning, workspace.SeverityError, workspace.SeverityCritical:
	default:
		return invalid("severity", "%q: one of info, warning, error, critical", truncate(m.Severity, 32))
	}
	if err := checkPrintable("subject", m.Subject, false); err != nil {
		return err
	}
	if len(m.Subject) > workspace.MaxTitleLen {
		return invalid("subject", "longer than %d bytes", workspace.MaxTitleLen)
	}
	if strings.TrimSpace(m.Body) == "" {
		return invalid("body", "must not be empty: say what the recipients must know")
	}
	if len(m.Body) > workspace.MaxTextLen {
		return tooLarge("body", "%d bytes is over the limit of %d", len(m.Body), workspace.MaxTextLen)
	}
	if err := checkText("body", m.Body, workspace.MaxTextLen); err != nil {
		return err
	}
	if m.Data != nil {
		if len(m.Data) > maxDataLen {
			return tooLarge("data", "%d bytes is over the limit of %d", len(m.Data), maxDataLen)
		}
		var obj map[string]json.RawMessage
		if d := bytes.TrimSpace(m.Data); len(d) == 0 || d[0] != '{' || json.Unmarshal(d, &obj) != nil {
			return invalid("data", "must be a JSON object")
		}
	}
	if !m.RequiresAck && (!m.Deadline.IsZero() || len(m.EscalateTo) > 0) {
		return invalid("deadline", "a deadline or an escalation needs requires_ack")
	}
	return nil
}

// rcptKey is the fixed-width form of a recipient in index keys.
func rcptKey(r string) string {
	s := sha256.Sum256([]byte(r))
	return hex.EncodeToString(s[:16])
}

// dueKey orders msg-due entries by deadline.
func dueKey(t time.Time, id string) string {
	return t.UTC().Format("20060102T150405.000000Z") + "/" + id
}

func msgSubject(m *workspace.Msg) workspace.Subject {
	return workspace.Subject{Kind: workspace.SubjectMessage, ID: m.ID, Name: m.Subject}
}

// getMsg reads message id's record.
func getMsg(ctx context.Context, tx driver.ReadTx, id string) (workspace.Msg, error) {
	n, err := tx.Note(ctx, msgKind, id)
	if errors.Is(err, workspace.ErrNotFound) {
		return workspace.Msg{}, fmt.Errorf("message %s: %w", id, workspace.ErrNotFound)
	}
	if err != nil {
		return workspace.Msg{}, err
	}
	var m workspace.Msg
	if err := json.Unmarshal([]byte(n.Body), &m); err != nil {
		return workspace.Msg{}, fmt.Errorf("message %s: stored record is corrupt: %w", id, err)
	}
	m.Version = n.Version
	return m, nil
}

// putMsg writes m's record as version m.Version.
func (x *exec) putMsg(ctx context.Context, m *workspace.Msg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	n := workspace.Note{Kind: msgKind, Key: m.ID, Title: m.Subject, Body: string(b), Author: m.From,
		Version: m.Version, CreatedAt: m.SentAt, UpdatedAt: x.now, UpdatedBy: x.actor}
	return x.tx.PutNote(ctx, n)
}

// putIndex writes one index entry.
func (x *exec) putIndex(ctx context.Context, kind, key, title string) error {
	return x.tx.PutNote(ctx, workspace.Note{Kind: kind, Key: key, Title: title, Author: x.actor,
		Version: 1, CreatedAt: x.now, UpdatedAt: x.now, UpdatedBy: x.actor})
}

// putEntry writes recipient r's entry of message id in index kind (box
// or wait), and counts it.
func (x *exec) putEntry(ctx context.Context, kind, r, id string) error {
	if err := x.putIndex(ctx, kind, rcptKey(r)+"/"+id, r); err != nil {
		return err
	}
	return countEntry(ctx, x.tx, kind, r, id, 1, x.actor, x.now)
}

// dropIndex removes one index entry, if it is there.
func (x *exec) dropIndex(ctx context.Context, kind, key string) error {
	if err := x.tx.DeleteNote(ctx, kind, key); err != nil && !errors.Is(err, workspace.ErrNotFound) {
		return err
	}
	return nil
}

// knownRecipient refuses a recipient nobody could read: a role the policy
// does not define (admin is always defined), or an actor that has never
// written to the workspace and that the policy does not name.
func (x *exec) knownRecipient(ctx context.Context, field, r string) error {
	var pol *policy.Policy
	if x.who != nil {
		pol = x.who.pol
	}
	if role, ok := strings.CutPrefix(r, "role:"); ok {
		if role == policy.AdminRole || (pol != nil && pol.DefinesRole(role)) {
			return nil
		}
		return invalid(field, "unknown recipient %q: the policy defines no role %q", truncate(r, 64), role)
	}
	if r == x.actor || (pol != nil && pol.NamesActor(r)) {
		return nil
	}
	evs, err := x.tx.Events(ctx, workspace.EventQuery{Actor: r, Limit: 1})
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		return invalid(field, "unknown recipient %q: no agent of that name has written to this workspace, and the policy's [actors] does not name it", truncate(r, 64))
	}
	return nil
}

// sendMessage writes a new message from x.actor, and its index entries.
// thread, when set, is the thread an escalation joins.
func (x *exec) sendMessage(ctx context.Context, in workspace.NewMsg, from string) (*workspace.Msg, error) {
	return x.send(ctx, in, from, false)
}

// sendOperatorMessage is sendMessage for an operator op's own message (a
// resume answering its pause): the op's admin check stands for the read
// check of the thread it joins, so any operator may resume another's pause.
func (x *exec) sendOperatorMessage(ctx context.Context, in workspace.NewMsg) (*workspace.Msg, error) {
	return x.send(ctx, in, x.actor, true)
}

func (x *exec) send(ctx context.Context, in workspace.NewMsg, from string, operator bool) (*workspace.Msg, error) {
	if err := ensureCounted(ctx, x.tx, x.actor, x.now); err != nil {
		return nil, err
	}
	id, err := x.nextMsgID(ctx)
	if err != nil {
		return nil, err
	}
	if from == "" {
		from = x.actor
		for _, r := range in.To {
			if err := x.knownRecipient(ctx, "to", r); err != nil {
				return nil, err
			}
		}
		for _, r := range in.EscalateTo {
			if err := x.knownRecipient(ctx, "escalate to", r); err != nil {
				return nil, err
			}
		}
	}
	m := &workspace.Msg{ID: id, From: from, To: slices.Clone(in.To), Each: in.Each, ReplyTo: in.ReplyTo,
		Type: in.Type, Severity: in.Severity, Subject: in.Subject, Body: in.Body, Data: in.Data,
		RequiresAck: in.RequiresAck, Deadline: in.Deadline.UTC().Truncate(time.Microsecond),
		EscalateTo: slices.Clone(in.EscalateTo), Version: 1, SentAt: x.now}
	if m.Type == "" {
		m.Type = "note"
	}
	if m.Severity == "" {
		m.Severity = workspace.SeverityInfo
	}
	m.Thread = m.ID
	if m.ReplyTo != "" {
		parent, err := getMsg(ctx, x.tx, m.ReplyTo)
		if err != nil {
			return nil, err
		}
		if !operator && !x.mayRead(parent, x.actor) && from == x.actor {
			return nil, &workspace.ForbiddenError{Actor: x.actor, Action: string(policy.MessageSend), Object: parent.ID,
				Reason: "a reply joins a thread only its sender or a recipient of the parent can read"}
		}
		m.Thread = parent.Thread
	}
	if m.RequiresAck {
		if !m.Deadline.IsZero() && !m.Deadline.After(x.msgNow()) {
			return nil, invalid("deadline", "%s is not in the future", m.Deadline.Format(time.RFC3339))
		}
		if !m.Deadline.IsZero() && len(m.EscalateTo) == 0 {
			m.EscalateTo = []string{defaultEscalateTo}
		}
		m.Pending = x.obligations(m)
	}
	if err := x.putMsg(ctx, m); err != nil {
		return nil, err
	}
	for _, r := range m.To {
		if err := x.putEntry(ctx, msgBoxKind, r, m.ID); err != nil {
			return nil, err
		}
	}
	for _, p := range m.Pending {
		if err := x.putEntry(ctx, msgWaitKind, p, m.ID); err != nil {
			return nil, err
		}
		// An expanded role member reads the message through its own box.
		if !slices.Contains(m.To, p) {
			if err := x.putEntry(ctx, msgBoxKind, p, m.ID); err != nil {
				return nil, err
			}
		}
	}
	if m.RequiresAck && !m.Deadline.IsZero() {
		if err := x.putIndex(ctx, msgDueKind, dueKey(m.Deadline, m.ID), ""); err != nil {
			return nil, err
		}
	}
	if err := x.putIndex(ctx, msgThreadKind, m.Thread+"/"+m.ID, ""); err != nil {
		return nil, err
	}
	x.emit(workspace.EventMessageSent, msgSubject(m), m.Version, "to "+strings.Join(m.To, ", "))
	return m, nil
}

// The msg-last note holds the greatest message id the store has given.
// Inboxes page, and read cursors move, by id, so ids must follow commit
// order; a UUIDv7 alone follows the clock of the process that made it,
// and two servers (on two hosts, or in one millisecond on one) could
// give a later message a smaller id, which a reader already past it
// would never see. Sends are serialized by the store's write
// transaction, so each reads the last id and takes one above it.
const (
	msgLastKind = "msg-last"
	msgLastKey  = "last"
)

// nextMsgID returns a new message id above every id the store has given,
// and records it.
func (x *exec) nextMsgID(ctx context.Context) (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	n, err := x.tx.Note(ctx, msgLastKind, msgLastKey)
	switch {
	case errors.Is(err, workspace.ErrNotFound):
		n = workspace.Note{Kind: msgLastKind, Key: msgLastKey, Author: x.actor, CreatedAt: x.now}
	case err != nil:
		return "", err
	}
	if last, perr := uuid.Parse(n.Title); perr == nil && bytes.Compare(id[:], last[:]) <= 0 {
		id = successorV7(last)
	}
	n.Title = id.String()
	n.Version++
	n.UpdatedAt, n.UpdatedBy = x.now, x.actor
	if err := x.tx.PutNote(ctx, n); err != nil {
		return "", err
	}
	return n.Title, nil
}

// successorV7 is the least UUIDv7 above u: its random bits (rand_b's 62,
// then rand_a's 12) counted up by one, carrying into the timestamp.
func successorV7(u uuid.UUID) uuid.UUID {
	hi := binary.BigEndian.Uint64(u[0:8])
	lo := binary.BigEndian.Uint64(u[8:16])
	const randB = 1<<62 - 1
	if lo&randB != randB {
		lo++
	} else {
		lo &^= randB
		// rand_a is hi's low 12 bits; the version nibble above it stays.
		if hi&0xfff != 0xfff {
			hi++
		} else {
			ts := (hi >> 16) + 1
			hi = ts<<16 | hi&0xf000
		}
	}
	binary.BigEndian.PutUint64(u[0:8], hi)
	binary.BigEndian.PutUint64(u[8:16], lo)
	return u
}

// obligations are who owes an ack of m: each actor recipient, and each
// role recipient as one obligation any member meets, or with Each every
// member the policy names (the role itself when it names none).
func (x *exec) obligations(m *workspace.Msg) []string {
	var out []string
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, r := range m.To {
		role, isRole := strings.CutPrefix(r, "role:")
		if !isRole || !m.Each || x.who == nil || x.who.pol == nil {
			add(r)
			continue
		}
		members := x.who.pol.NamedMembers(role)
		if len(members) == 0 {
			add(r)
		}
		for _, a := range members {
			add(a)
		}
	}
	return out
}

// rolesOf is what roles actor holds for messages: its principal's when
// the caller is actor's bound principal, else the policy's.
func (x *exec) rolesOf(actor string) []string {
	if x.who == nil {
		return nil
	}
	if x.who.set && x.who.roles != nil && x.who.actor == actor {
		return x.who.roles
	}
	if x.who.pol != nil {
		return x.who.pol.RolesOf(actor)
	}
	return nil
}

// mayRead reports whether actor is m's sender or one of its recipients.
func (x *exec) mayRead(m workspace.Msg, actor string) bool {
	return msgParticipant(m, actor, x.rolesOf(actor))
}

func msgParticipant(m workspace.Msg, actor string, roles []string) bool {
	if m.From == actor || slices.Contains(m.To, actor) || slices.Contains(m.Pending, actor) {
		return true
	}
	for _, a := range m.Acks {
		if a.By == actor {
			return true
		}
	}
	for _, r := range roles {
		if slices.Contains(m.To, "role:"+r) {
			return true
		}
	}
	return false
}

// ackMessage records x.actor's ack of o.ID: exactly once per obligation.
func (x *exec) ackMessage(ctx context.Context, o workspace.AckMessageOp) (*workspace.Msg, error) {
	m, err := getMsg(ctx, x.tx, o.ID)
	if err != nil {
		return nil, err
	}
	if !m.RequiresAck {
		return nil, invalid("message id", "message %s does not need an ack", m.ID)
	}
	roles := x.rolesOf(x.actor)
	owed := -1
	for i, p := range m.Pending {
		if p == x.actor {
			owed = i
			break
		}
	}
	if owed < 0 {
		for i, p := range m.Pending {
			if role, ok := strings.CutPrefix(p, "role:"); ok && slices.Contains(roles, role) {
				owed = i
				break
			}
		}
	}
	if owed < 0 {
		// Answered already, by this actor or another member of the role
		// it answers for: the first ack's record is the answer.
		for _, a := range m.Acks {
			role, isRole := strings.CutPrefix(a.For, "role:")
			if a.By == x.actor || a.For == x.actor || (isRole && slices.Contains(roles, role)) {
				return &m, nil
			}
		}
		return nil, &workspace.ForbiddenError{Actor: x.actor, Roles: roles, Action: "message.ack", Object: m.ID,
			Reason: "only a recipient that owes the message an ack may ack it"}
	}
	if err := ensureCounted(ctx, x.tx, x.actor, x.now); err != nil {
		return nil, err
	}
	obligation := m.Pending[owed]
	m.Pending = slices.Delete(m.Pending, owed, owed+1)
	m.Acks = append(m.Acks, workspace.MsgAck{By: x.actor, For: obligation, At: x.now, Reply: o.Reply})
	m.Version++
	if err := x.putMsg(ctx, &m); err != nil {
		return nil, err
	}
	if err := dropEntry(ctx, x.tx, msgWaitKind, obligation, m.ID, x.actor, x.now); err != nil {
		return nil, err
	}
	if len(m.Pending) == 0 && !m.Deadline.IsZero() && m.EscalatedAt.IsZero() {
		if err := x.dropIndex(ctx, msgDueKind, dueKey(m.Deadline, m.ID)); err != nil {
			return nil, err
		}
	}
	msg := "for " + obligation
	if o.Reply != "" {
		msg += ": " + o.Reply
	}
	x.emit(workspace.EventMessageAcked, msgSubject(&m), m.Version, truncate(msg, 256))
	return &m, nil
}

// escalateDue escalates every message whose deadline is at or before now
// and that still owes an ack, once: the msg-due entry is removed in the
// same transaction, so a second checker finds nothing to do.
func (x *exec) escalateDue(ctx context.Context) ([]workspace.Msg, error) {
	now := x.msgNow()
	end := dueKey(now, "~")
	var out []workspace.Msg
	q := driver.NoteQuery{Kind: msgDueKind, Limit: 100}
	for {
		page, err := x.tx.ListNotes(ctx, q)
		if err != nil {
			return nil, err
		}
		var due []workspace.Note
		for _, n := range page {
			if n.Key > end {
				break
			}
			due = append(due, n)
		}
		for _, n := range due {
			_, id, _ := strings.Cut(n.Key, "/")
			if err := x.tx.DeleteNote(ctx, msgDueKind, n.Key); err != nil {
				return nil, err
			}
			m, err := getMsg(ctx, x.tx, id)
			if errors.Is(err, workspace.ErrNotFound) {
				continue // removed by retention
			}
			if err != nil {
				return nil, err
			}
			if len(m.Pending) == 0 || !m.EscalatedAt.IsZero() {
				continue
			}
			m.EscalatedAt = x.now
			m.Version++
			if err := x.putMsg(ctx, &m); err != nil {
				return nil, err
			}
			x.emit(workspace.EventMessageEscalated, msgSubject(&m), m.Version,
				fmt.Sprintf("no ack from %s by %s; escalated to %s", strings.Join(m.Pending, ", "),
					m.Deadline.Format(time.RFC3339), strings.Join(m.EscalateTo, ", ")))
			data, _ := json.Marshal(map[string]any{"message": m.ID, "pending": m.Pending, "deadline": m.Deadline, "from": m.From})
			sev := m.Severity
			if sev == workspace.SeverityInfo || sev == workspace.SeverityWarning {
				sev = workspace.SeverityError
			}
			if _, err := x.sendMessage(ctx, workspace.NewMsg{To: m.EscalateTo, ReplyTo: m.ID, Type: "escalation",
				Severity: sev, Subject: truncate("unacknowledged: "+m.Subject, workspace.MaxTitleLen),
				Body: fmt.Sprintf("%s sent %q to %s and asked for an ack by %s; %s has not acknowledged it.",
					m.From, m.Subject, strings.Join(m.To, ", "), m.Deadline.Format(time.RFC3339), strings.Join(m.Pending, ", ")),
				Data: data}, m.From); err != nil {
				return nil, err
			}
			out = append(out, m)
		}
		if len(due) < len(page) || len(page) < q.Limit {
			return out, nil
		}
		q.AfterKind, q.AfterKey = msgDueKind, page[len(page)-1].Key
	}
}

// msgNow is the time deadlines are set from and checked against: the
// handle's Clock if it has one (tests), else the store's.
func (x *exec) msgNow() time.Time {
	if c := x.h.opts.Clock; c != nil {
		return c().UTC().Truncate(time.Microsecond)
	}
	return x.now
}

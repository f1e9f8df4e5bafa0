package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Msg is a message: a record of the engine sent by one agent to others: it is
// committed in a batch (so it can ride with the write it is about), ordered
// in the log (message.sent), and, when it needs an acknowledgement, acked
// exactly once per obligation and escalated exactly once when its deadline
// passes unacknowledged.
//
// A recipient is an actor's name or "role:NAME", a role of the policy (or
// the built-in admin role): a role message is answered by any one of its
// members, unless Each asks every member the policy names for the role.
type Msg struct {
	ID       string          `json:"id"`     // UUIDv7: ordered by sending time
	Thread   string          `json:"thread"` // the thread's first message's ID
	ReplyTo  string          `json:"reply_to,omitempty"`
	From     string          `json:"from"` // the bound principal that sent it
	To       []string        `json:"to"`
	Each     bool            `json:"each,omitempty"`
	Type     string          `json:"type"`     // a lower-case word: "note", "question", "pause", "shadow_discarded", …
	Severity string          `json:"severity"` // info, warning, error or critical
	Subject  string          `json:"subject"`
	Body     string          `json:"body"`
	Data     json.RawMessage `json:"data,omitempty"` // a JSON object
	// RequiresAck asks each obligation (Pending) for an acknowledgement,
	// by Deadline if set; past it, the message is escalated to EscalateTo.
	RequiresAck bool      `json:"requires_ack"`
	Deadline    time.Time `json:"deadline,omitzero"`
	EscalateTo  []string  `json:"escalate_to,omitempty"`
	// Pending lists the recipients that still owe an ack: actors, and
	// "role:NAME" for a role any one member may answer for.
	Pending     []string  `json:"pending,omitempty"`
	Acks        []MsgAck  `json:"acks,omitempty"`
	EscalatedAt time.Time `json:"escalated_at,omitzero"`
	Version     int64     `json:"version"`
	SentAt      time.Time `json:"sent_at"`
}

// MsgAck is one recorded acknowledgement.
type MsgAck struct {
	By    string    `json:"by"`
	For   string    `json:"for"` // the obligation it answered: the actor, or "role:NAME"
	At    time.Time `json:"at"`
	Reply string    `json:"reply,omitempty"`
}

// NewMsg is what Messages.Send takes (and SendMessageOp carries).
// Type defaults to "note" and Severity to "info"; EscalateTo defaults to
// "role:admin" for a message that needs an ack by a deadline.
type NewMsg struct {
	To          []string
	Each        bool
	ReplyTo     string
	Type        string
	Severity    string
	Subject     string
	Body        string
	Data        json.RawMessage
	RequiresAck bool
	Deadline    time.Time
	EscalateTo  []string
}

// SendMessageOp sends a message as the batch's actor.
type SendMessageOp struct{ Message NewMsg }

// AckMessageOp acknowledges message ID as the batch's actor, with an
// optional short reply. A second ack of an obligation already answered
// writes nothing and returns the message with the first ack.
type AckMessageOp struct {
	ID    string
	Reply string
}

// PauseActorOp pauses Actor: until a ResumeActorOp, the engine refuses its
// writes with ErrPaused, except acks and the renewals that keep its claims
// and leases alive. The pause reaches Actor as a message that needs its
// ack within AckTimeout (none: no deadline). It needs the admin "tokens"
// right, as StopActorOp.
type PauseActorOp struct {
	Actor      string
	Message    string
	AckTimeout time.Duration
}

// ResumeActorOp lifts Actor's pause.
type ResumeActorOp struct {
	Actor   string
	Message string
}

func (SendMessageOp) opName() string { return "send message" }
func (AckMessageOp) opName() string  { return "ack message" }
func (PauseActorOp) opName() string  { return "pause actor" }
func (ResumeActorOp) opName() string { return "resume actor" }

// InboxQuery selects one page of Actor's inbox: the messages sent to it or
// to a role it holds, oldest first. Unread keeps those after its read
// cursor; Unacked those it still owes an ack; Thread one thread's. Wait
// blocks until the page would hold at least one message (or ctx ends).
type InboxQuery struct {
	Actor   string
	Unread  bool
	Unacked bool
	Thread  string
	After   string // a page's Next
	Limit   int    // default 100, at most 1000
	Wait    bool
}

// InboxPage is one page of an inbox, with the inbox's counts.
type InboxPage struct {
	Messages []Msg  `json:"messages"`
	Next     string `json:"next,omitempty"`
	Cursor   string `json:"cursor,omitempty"` // the last message marked read
	Unread   int    `json:"unread"`
	Unacked  int    `json:"unacked"`
	Paused   bool   `json:"paused,omitempty"` // Actor is paused
}

// Messages sends, reads and acknowledges messages between agents.
type Messages interface {
	// Send sends m as w.Actor (the bound principal behind a server).
	Send(ctx context.Context, w Write, m NewMsg) (Msg, error)
	// Get returns one message; only its sender, its recipients and an
	// admin may read it.
	Get(ctx context.Context, id string) (Msg, error)
	// Inbox returns one page of an inbox; an agent reads only its own.
	Inbox(ctx context.Context, q InboxQuery) (InboxPage, error)
	// MarkRead moves actor's read cursor to message id (never back).
	MarkRead(ctx context.Context, actor, id string) error
	// Ack acknowledges message id as w.Actor (AckMessageOp).
	Ack(ctx context.Context, w Write, id, reply string) (Msg, error)
	// Escalate escalates every message whose deadline has passed
	// unacknowledged, once each, recorded as by actor; it returns them.
	Escalate(ctx context.Context, actor string) ([]Msg, error)
}

// Messages sends, reads and acknowledges messages between agents.
func (ws *Workspace) Messages() Messages {
	if m, ok := ws.c.(interface{ Messages() Messages }); ok {
		return m.Messages()
	}
	return unsupportedMessages{ws}
}

type unsupportedMessages struct{ ws *Workspace }

func (u unsupportedMessages) Send(context.Context, Write, NewMsg) (Msg, error) {
	return Msg{}, u.ws.unsupported("messages.send")
}
func (u unsupportedMessages) Get(context.Context, string) (Msg, error) {
	return Msg{}, u.ws.unsupported("messages.get")
}
func (u unsupportedMessages) Inbox(context.Context, InboxQuery) (InboxPage, error) {
	return InboxPage{}, u.ws.unsupported("messages.inbox")
}
func (u unsupportedMessages) MarkRead(context.Context, string, string) error {
	return u.ws.unsupported("messages.read")
}
func (u unsupportedMessages) Ack(context.Context, Write, string, string) (Msg, error) {
	return Msg{}, u.ws.unsupported("messages.ack")
}
func (u unsupportedMessages) Escalate(context.Context, string) ([]Msg, error) {
	return nil, u.ws.unsupported("messages.escalate")
}

// PausedError reports a write refused because its actor is paused.
type PausedError struct {
	Actor string
	By    string    // who paused it
	Since time.Time // when
}

// Error says who is paused, by whom, and what to do.
func (e *PausedError) Error() string {
	return fmt.Sprintf("actor %q is paused by %q: its writes are refused until it is resumed; ack the pause message and wait (`wsctl inbox --wait`)", e.Actor, e.By)
}

// Is reports whether target is ErrPaused.
func (e *PausedError) Is(target error) bool { return target == ErrPaused }

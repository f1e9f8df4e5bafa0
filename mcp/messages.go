package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentspace/agentspace/workspace"
)

type inboxIn struct {
	Unacked     bool   `json:"unacked,omitempty" jsonschema:"those awaiting your ack, not the unread"`
	Thread      string `json:"thread,omitempty"`
	MarkRead    bool   `json:"mark_read,omitempty"`
	WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"max 60"`
}

type messageIn struct {
	Ack             string         `json:"ack,omitempty" jsonschema:"ack this message id; body is the reply"`
	To              []string       `json:"to,omitempty" jsonschema:"agents, or role:NAME"`
	Subject         string         `json:"subject,omitempty"`
	Body            string         `json:"body,omitempty"`
	Type            string         `json:"type,omitempty" jsonschema:"note, question..."`
	Severity        string         `json:"severity,omitempty"`
	Data            map[string]any `json:"data,omitempty"`
	RequiresAck     bool           `json:"requires_ack,omitempty"`
	DeadlineSeconds int            `json:"deadline_seconds,omitempty" jsonschema:"ack due in; then escalated"`
	ReplyTo         string         `json:"reply_to,omitempty" jsonschema:"id of the message answered"`
}

func (s *Server) addMessageTools() {
	tool(s, "inbox", "Your inbox",
		"Your unread messages, oldest first, with the counts; wait_seconds waits for one.",
		nil, s.inbox)
	tool(s, "message", "Send or ack a message",
		"Send a message (requires_ack when you need an answer), or ack one by id with an optional reply.",
		map[string][]any{"severity": {"info", "warning", "error", "critical"}}, s.message)
}

// inboxLimit is how many messages one inbox call returns: each costs the
// agent context; mark_read and another call read on.
const inboxLimit = 20

func (s *Server) inbox(ctx context.Context, actor string, in inboxIn) (any, error) {
	wait, err := seconds("wait_seconds", in.WaitSeconds, 0, maxWait)
	if err != nil {
		return nil, err
	}
	q := workspace.InboxQuery{Actor: actor, Unread: !in.Unacked, Unacked: in.Unacked, Thread: in.Thread, Limit: inboxLimit}
	msgs := s.ws.Messages()
	page, err := msgs.Inbox(ctx, q)
	if err == nil && len(page.Messages) == 0 && wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		q.Wait = true
		page, err = msgs.Inbox(wctx, q)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			q.Wait = false
			page, err = msgs.Inbox(ctx, q)
		}
	}
	if err != nil || !in.MarkRead || len(page.Messages) == 0 {
		return page, err
	}
	if err := msgs.MarkRead(ctx, actor, page.Messages[len(page.Messages)-1].ID); err != nil {
		return nil, err
	}
	after, err := msgs.Inbox(ctx, workspace.InboxQuery{Actor: actor, Unread: true, Limit: 1})
	page.Unread = after.Unread
	return page, err
}

func (s *Server) message(ctx context.Context, actor string, in messageIn) (any, error) {
	msgs := s.ws.Messages()
	w := workspace.Write{Actor: actor}
	if in.Ack != "" {
		if len(in.To) > 0 || in.Subject != "" || in.RequiresAck || in.Data != nil || in.DeadlineSeconds != 0 || in.ReplyTo != "" {
			return nil, badArg("ack", "an ack takes only a body (the reply)")
		}
		return msgs.Ack(ctx, w, in.Ack, in.Body)
	}
	m := workspace.NewMsg{To: in.To, ReplyTo: in.ReplyTo, Type: in.Type, Severity: in.Severity, Subject: in.Subject,
		Body: in.Body, RequiresAck: in.RequiresAck}
	if in.Data != nil {
		b, err := json.Marshal(in.Data)
		if err != nil {
			return nil, badArg("data", "%v", err)
		}
		m.Data = b
	}
	if in.DeadlineSeconds < 0 {
		return nil, badArg("deadline_seconds", "must not be negative")
	}
	if in.DeadlineSeconds > 0 {
		m.Deadline = time.Now().Add(time.Duration(in.DeadlineSeconds) * time.Second)
	}
	return msgs.Send(ctx, w, m)
}

// notice is the one short line a tool result carries for actor when its
// inbox asks for attention: a pause first (what to ack), else the unread
// and unacknowledged counts; "" when there is nothing, or no inbox to
// read (a store without messages). It costs one inbox read per call.
func (s *Server) notice(ctx context.Context, actor string) string {
	if actor == "" {
		return ""
	}
	msgs := s.ws.Messages()
	p, err := msgs.Inbox(ctx, workspace.InboxQuery{Actor: actor, Unacked: true, Limit: inboxLimit})
	if err != nil {
		return ""
	}
	if p.Paused {
		for _, m := range p.Messages {
			if m.Type == "pause" {
				return fmt.Sprintf("agentspace: you are paused by %s: your writes are refused until resumed; ack message %s (message tool), then wait", m.From, m.ID)
			}
		}
		return "agentspace: you are paused: your writes are refused until you are resumed; wait (inbox wait_seconds)"
	}
	var parts []string
	if p.Unread > 0 {
		parts = append(parts, fmt.Sprintf("%d unread", p.Unread))
	}
	if p.Unacked > 0 {
		parts = append(parts, fmt.Sprintf("%d awaiting your ack", p.Unacked))
	}
	if len(parts) == 0 {
		return ""
	}
	return "agentspace: you have " + joinAnd(parts) + " (inbox)"
}

func joinAnd(parts []string) string {
	if len(parts) == 2 {
		return parts[0] + " and " + parts[1]
	}
	return parts[0]
}

// withNotice adds line to r as a text of its own, after the result.
func withNotice(r *sdk.CallToolResult, line string) *sdk.CallToolResult {
	if line != "" {
		r.Content = append(r.Content, &sdk.TextContent{Text: line})
	}
	return r
}

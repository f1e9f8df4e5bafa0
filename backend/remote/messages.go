package remote

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// Messages returns the message facet: the server's /v1/messages and
// /v1/inbox routes, whose engine applies every rule (the sender is the
// request's actor; an agent reads and acks only its own messages).
func (c *Client) Messages() workspace.Messages { return messages{c} }

type messages struct{ c *Client }

func msgPath(id, action string) (string, error) {
	s, err := segment("message id", id)
	if err != nil {
		return "", err
	}
	p := "/v1/messages/" + s
	if action != "" {
		p += "/" + action
	}
	return p, nil
}

func (m messages) Send(ctx context.Context, w workspace.Write, n workspace.NewMsg) (workspace.Msg, error) {
	var out workspace.Msg
	body := wire.SendMessageBody{Actor: w.Actor, IdempotencyKey: w.IdempotencyKey, MessageBody: wire.MessageBodyOf(n)}
	err := m.c.callRetry(ctx, http.MethodPost, "/v1/messages", nil, body, &out, w.IdempotencyKey != "")
	return out, err
}

func (m messages) Get(ctx context.Context, id string) (workspace.Msg, error) {
	var out workspace.Msg
	p, err := msgPath(id, "")
	if err != nil {
		return out, err
	}
	err = m.c.call(ctx, http.MethodGet, p, nil, nil, &out)
	return out, err
}

func (m messages) Ack(ctx context.Context, w workspace.Write, id, reply string) (workspace.Msg, error) {
	var out workspace.Msg
	p, err := msgPath(id, "ack")
	if err != nil {
		return out, err
	}
	body := wire.AckMessageBody{Actor: w.Actor, Reply: reply, IdempotencyKey: w.IdempotencyKey}
	// An ack is recorded once: repeating it answers the first one's
	// record, so it is retried as a read is.
	err = m.c.callRetry(ctx, http.MethodPost, p, nil, body, &out, true)
	return out, err
}

// Inbox reads one page; with Wait, it long-polls until the page holds a
// message or ctx ends.
func (m messages) Inbox(ctx context.Context, q workspace.InboxQuery) (workspace.InboxPage, error) {
	v := url.Values{}
	setStr(v, "actor", q.Actor)
	setStr(v, "thread", q.Thread)
	setStr(v, "after", q.After)
	if q.Unread {
		v.Set("unread", "true")
	}
	if q.Unacked {
		v.Set("unacked", "true")
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Wait {
		v.Set("wait", longPoll.String())
	}
	for {
		var out workspace.InboxPage
		err := m.c.call(ctx, http.MethodGet, "/v1/inbox", v, nil, &out)
		if err != nil || !q.Wait || len(out.Messages) > 0 {
			return out, err
		}
		if ctx.Err() != nil {
			return workspace.InboxPage{}, ctx.Err()
		}
	}
}

func (m messages) MarkRead(ctx context.Context, actor, id string) error {
	// Moving a cursor forward twice moves it once: retried as a read is.
	return m.c.callRetry(ctx, http.MethodPost, "/v1/inbox/read", nil, wire.InboxReadBody{Actor: actor, ID: id}, nil, true)
}

// Escalate asks the server to escalate what is due now, by its clock
// (POST /v1/messages/escalate), recorded as actor.
func (m messages) Escalate(ctx context.Context, actor string) ([]workspace.Msg, error) {
	var out wire.Escalated
	err := m.c.call(ctx, http.MethodPost, "/v1/messages/escalate", nil, wire.EscalateBody{Actor: actor}, &out)
	return out.Messages, err
}

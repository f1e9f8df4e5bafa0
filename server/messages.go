package server

import (
	"context"
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// MessagePath names a message by id.
type MessagePath struct {
	ID string `path:"id" doc:"The message's id."`
}

type msgOut struct {
	Body workspace.Msg
}

// InboxParams select one page of an inbox (workspace.InboxQuery).
type InboxParams struct {
	Actor   string        `query:"actor" doc:"Whose inbox (default: the request's actor). Another's needs the admin role."`
	Unread  bool          `query:"unread" doc:"Only the messages after the read cursor."`
	Unacked bool          `query:"unacked" doc:"Only the messages the actor still owes an ack."`
	Thread  string        `query:"thread" doc:"Only one thread's messages (the thread's first message's id)."`
	After   string        `query:"after" doc:"A page's next: the page after it."`
	Limit   int           `query:"limit" minimum:"0" maximum:"1000"`
	Wait    wire.Duration `query:"wait" doc:"Long poll: wait up to this long for the page to hold a message (capped by the server's max wait); at the cap, the empty page with the inbox's counts."`
}

// messageRoutes serves messages, inboxes and the pause of an agent.
func (s *Server) messageRoutes() {
	send := s.op("sendMessage", http.MethodPost, "/v1/messages", "Send a message as the request's actor", "messages", http.StatusCreated)
	send.Description = "The sender is the request's actor (behind a token, the token's): a body whose actor or from names another is refused with 403 forbidden. " +
		"The policy's messages rule decides whom it may reach."
	huma.Register(s.api, send, func(ctx context.Context, in *struct{ Body wire.SendMessageBody }) (*msgOut, error) {
		named := in.Body.Actor
		if named == "" {
			named = in.Body.From
		}
		actor, err := actorFor(ctx, named)
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		if in.Body.From != "" && in.Body.From != actor {
			return nil, s.fail(ctx, fmt.Errorf("%w: a message is sent by the request's actor %q; it cannot name %q as its sender", wire.ErrForbidden, actor, truncate(in.Body.From, 64)))
		}
		m, err := s.ws.Messages().Send(ctx, workspace.Write{Actor: actor, IdempotencyKey: in.Body.IdempotencyKey}, in.Body.NewMsg())
		return answer(s, ctx, &msgOut{m}, err)
	})

	huma.Register(s.api, s.op("getMessage", http.MethodGet, "/v1/messages/{id}", "Get a message its reader sent or received", "messages", 0),
		func(ctx context.Context, in *struct{ MessagePath }) (*msgOut, error) {
			m, err := s.ws.Messages().Get(ctx, in.ID)
			return answer(s, ctx, &msgOut{m}, err)
		})

	ack := s.op("ackMessage", http.MethodPost, "/v1/messages/{id}/ack", "Acknowledge a message, with an optional reply", "messages", 0)
	ack.Description = "Recorded once per obligation: a second ack answers the first one's record and writes nothing. Only a recipient that owes an ack may give one."
	huma.Register(s.api, ack, func(ctx context.Context, in *struct {
		MessagePath
		Body wire.AckMessageBody
	}) (*msgOut, error) {
		actor, err := actorFor(ctx, in.Body.Actor)
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		m, err := s.ws.Messages().Ack(ctx, workspace.Write{Actor: actor, IdempotencyKey: in.Body.IdempotencyKey}, in.ID, in.Body.Reply)
		return answer(s, ctx, &msgOut{m}, err)
	})

	esc := s.op("escalateMessages", http.MethodPost, "/v1/messages/escalate", "Escalate every message whose ack deadline has passed, once each", "messages", 0)
	esc.Description = "The server does this itself every second (and an inbox read does when something is due): this asks for it now. " +
		"It answers the messages escalated by this call; two calls never escalate one message twice."
	huma.Register(s.api, esc, func(ctx context.Context, in *struct{ Body wire.EscalateBody }) (*struct{ Body wire.Escalated }, error) {
		actor, err := actorFor(ctx, in.Body.Actor)
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		ms, err := s.ws.Messages().Escalate(ctx, actor)
		if ms == nil {
			ms = []workspace.Msg{}
		}
		return answer(s, ctx, &struct{ Body wire.Escalated }{wire.Escalated{Messages: ms}}, err)
	})

	inbox := s.op("readInbox", http.MethodGet, "/v1/inbox", "One page of an inbox, with its counts; with wait, a long poll", "messages", 0)
	inbox.Description = "An agent reads only its own inbox. With wait, the answer comes as soon as the page would hold a message, " +
		"or at the wait (capped by the server's max wait) with the empty page and the inbox's counts: ask again."
	huma.Register(s.api, inbox, func(ctx context.Context, in *InboxParams) (*struct{ Body workspace.InboxPage }, error) {
		wait, err := in.Wait.Value("wait")
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		q := workspace.InboxQuery{Actor: in.Actor, Unread: in.Unread, Unacked: in.Unacked, Thread: in.Thread, After: in.After, Limit: in.Limit}
		if q.Actor == "" {
			q.Actor = principalFrom(ctx).actor
		}
		if wait <= 0 {
			p, err := s.ws.Messages().Inbox(ctx, q)
			return answer(s, ctx, &struct{ Body workspace.InboxPage }{emptyMessages(p)}, err)
		}
		wctx, cancel := s.waitContext(ctx, wait)
		defer cancel()
		q.Wait = true
		p, err := s.ws.Messages().Inbox(wctx, q)
		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
			// The wait ran out: one last look answers the empty page (or
			// the message that arrived at that instant).
			q.Wait = false
			p, err = s.ws.Messages().Inbox(ctx, q)
		}
		return answer(s, ctx, &struct{ Body workspace.InboxPage }{emptyMessages(p)}, err)
	})

	huma.Register(s.api, s.op("markInboxRead", http.MethodPost, "/v1/inbox/read", "Move one's read cursor to a message (never back)", "messages", http.StatusNoContent),
		func(ctx context.Context, in *struct{ Body wire.InboxReadBody }) (*struct{}, error) {
			actor, err := actorFor(ctx, in.Body.Actor)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			return answer(s, ctx, &struct{}{}, s.ws.Messages().MarkRead(ctx, actor, in.Body.ID))
		})

	s.mux.HandleFunc(inboxStreamRoute, s.streamInbox)
	s.served = append(s.served, inboxStreamRoute)
	s.documentInboxStream()

	s.pauseRoutes()
}

// emptyMessages answers an empty page with an empty list, not null.
func emptyMessages(p workspace.InboxPage) workspace.InboxPage {
	if p.Messages == nil {
		p.Messages = []workspace.Msg{}
	}
	return p
}

// pauseRoutes serves the pause and the resume of an agent: one batch op
// each (PauseActorOp, ResumeActorOp), which the engine checks for the
// admin.tokens right.
func (s *Server) pauseRoutes() {
	pause := s.op("pauseAgent", http.MethodPost, "/v1/agents/{actor}/pause", "Pause an agent: its writes are refused until it is resumed, except acks and renewals", "agents", 0)
	pause.Description = "Needs the admin.tokens right. The agent gets a pause message that needs its ack (by ack_timeout, if given; escalated past it); " +
		"meanwhile its writes answer 423 with code paused. Pausing a paused agent changes nothing and answers the first pause's message."
	huma.Register(s.api, pause, func(ctx context.Context, in *struct {
		AgentPath
		Body wire.PauseAgentBody
	}) (*struct{ Body wire.AgentPause }, error) {
		by, err := actorFor(ctx, in.Body.Actor)
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		timeout, err := in.Body.AckTimeout.Value("ack_timeout")
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		res, err := s.ws.Commit(ctx, workspace.Batch{Actor: by, Ops: []workspace.Op{
			workspace.PauseActorOp{Actor: in.Actor, Message: in.Body.Message, AckTimeout: timeout}}})
		return answer(s, ctx, &struct{ Body wire.AgentPause }{agentPause(in.Actor, res)}, err)
	})

	resume := s.op("resumeAgent", http.MethodPost, "/v1/agents/{actor}/resume", "Resume a paused agent", "agents", 0)
	resume.Description = "Needs the admin.tokens right. The agent gets a resume message in the pause's thread; an agent that is not paused answers 404."
	huma.Register(s.api, resume, func(ctx context.Context, in *struct {
		AgentPath
		Body wire.ResumeAgentBody
	}) (*struct{ Body wire.AgentPause }, error) {
		by, err := actorFor(ctx, in.Body.Actor)
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		res, err := s.ws.Commit(ctx, workspace.Batch{Actor: by, Ops: []workspace.Op{
			workspace.ResumeActorOp{Actor: in.Actor, Message: in.Body.Message}}})
		return answer(s, ctx, &struct{ Body wire.AgentPause }{agentPause(in.Actor, res)}, err)
	})
}

// agentPause reads what a pause or resume batch did.
func agentPause(actor string, res workspace.BatchResult) wire.AgentPause {
	out := wire.AgentPause{Actor: actor, Events: res.Events}
	if out.Events == nil {
		out.Events = []workspace.Event{}
	}
	if len(res.Results) > 0 {
		out.Message = res.Results[0].Msg
	}
	return out
}

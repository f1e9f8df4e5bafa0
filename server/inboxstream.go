package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// inboxStreamRoute is the inbox stream's pattern: a plain handler, as the
// event stream is, described in the OpenAPI document by hand.
const inboxStreamRoute = "GET /v1/inbox/stream"

// inboxEventTypes are the events that change what an inbox holds.
var inboxEventTypes = []string{workspace.EventMessageSent, workspace.EventMessageAcked, workspace.EventMessageEscalated}

// inboxStreamParams are the query parameters the inbox stream takes.
var inboxStreamParams = map[string]bool{"actor": true, "after": true, "heartbeat": true}

// streamInbox sends one actor's inbox as Server-Sent Events: it follows
// the log's message events from the cursor (a subscription: gap-free and
// in order), and for each reads the message through the engine's Get,
// with the request's principal, so that the stream shows only what the
// reader may read; of that, only the messages sent to the actor, to a
// role it holds, or owed by it. Each record's id is its event's seq, and
// an idle stream's heartbeat carries the seq reached, so a reconnect with
// Last-Event-ID resumes with no gap and no repeat. The stream runs on the
// handler's goroutine and ends with the request, its token, or Drain.
func (s *Server) streamInbox(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	fail := func(err error) { writeProblem(w, s.fail(ctx, err)) }
	v := r.URL.Query()
	for k := range v {
		if !inboxStreamParams[k] {
			fail(&workspace.InvalidError{Field: truncate(k, 64), Reason: "is not a parameter of the inbox stream"})
			return
		}
	}
	actor := v.Get("actor")
	if actor == "" {
		actor = principalFrom(ctx).actor
	}
	var after int64
	for _, a := range []struct{ field, val string }{{"after", v.Get("after")}, {"Last-Event-ID", r.Header.Get("Last-Event-ID")}} {
		if a.val == "" {
			continue
		}
		n, err := strconv.ParseInt(a.val, 10, 64)
		if err != nil || n < 0 {
			fail(&workspace.InvalidError{Field: a.field, Reason: "not a seq (a whole number, 0 or more)"})
			return
		}
		after = n
	}
	heartbeat, err := s.streamHeartbeat(v)
	if err != nil {
		fail(err)
		return
	}
	if s.drain.Err() != nil {
		writeProblem(w, wire.NewProblem(wire.CodeUnavailable, "the server is shutting down"))
		return
	}
	// The engine decides whose inbox the request may read (its own, or
	// any with the admin role), before anything is streamed.
	if _, err := s.ws.Messages().Inbox(ctx, workspace.InboxQuery{Actor: actor, Limit: 1}); err != nil {
		fail(err)
		return
	}
	roles, err := s.inboxRoles(ctx, actor)
	if err != nil {
		fail(err)
		return
	}
	req := workspace.SubscribeRequest{
		Query:     workspace.EventQuery{AfterSeq: after, SubjectKind: workspace.SubjectMessage, Types: inboxEventTypes},
		Heartbeat: heartbeat, Buffer: streamBuffer}
	first := ": agentspace inbox of " + strconv.Quote(actor) + " after " + strconv.FormatInt(after, 10) + "\nretry: 1000\n\n"
	if canTakeOver(w, r) {
		s.takeOverInbox(w, r, req, actor, roles, []byte(first))
		return
	}
	sctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.drain, cancel)
	defer func() { stop(); cancel() }()
	sub, err := s.ws.Events().Subscribe(sctx, req)
	if err != nil {
		fail(err)
		return
	}
	defer func() { _ = sub.Close() }()
	s.metrics.streams.Inc()
	defer s.metrics.streams.Dec()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(w)
	// The server's read timeout guards request bodies; a stream has none.
	_ = rc.SetReadDeadline(time.Time{})
	w.WriteHeader(http.StatusOK)
	out := []byte(first)
	write := func() bool {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		_, err := w.Write(out)
		out = out[:0]
		return err == nil && rc.Flush() == nil
	}
	if !write() {
		return
	}
	for m := range sub.C() {
		if m.Progress {
			out = append(out, ": heartbeat\nid: "...)
			out = strconv.AppendInt(out, m.Head, 10)
			out = append(out, "\n\n"...)
		} else {
			rec, ok, err := s.inboxRecord(sctx, m.Event, actor, roles)
			if err != nil {
				s.endInbox(ctx, w, rc, err)
				return
			}
			if !ok {
				continue
			}
			out = append(out, "id: "...)
			out = strconv.AppendInt(out, m.Event.Seq, 10)
			out = append(out, "\ndata: "...)
			out = append(out, rec...)
			out = append(out, "\n\n"...)
			s.metrics.events.Inc()
		}
		if !write() {
			return
		}
	}
	s.endInbox(ctx, w, rc, sub.Err())
}

// inboxRecord is the stream's record of ev when its message is in actor's
// inbox, read with the request's principal: a message the reader may not
// read (not found for it) is not the reader's to see.
func (s *Server) inboxRecord(ctx context.Context, ev workspace.Event, actor string, roles []string) ([]byte, bool, error) {
	msg, err := s.ws.Messages().Get(ctx, ev.Subject.ID)
	if errors.Is(err, workspace.ErrNotFound) || errors.Is(err, workspace.ErrForbidden) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if !addressedTo(msg, actor, roles) {
		return nil, false, nil
	}
	b, err := json.Marshal(wire.InboxEvent{Seq: ev.Seq, Type: ev.Type, Message: msg})
	return b, err == nil, err
}

// addressedTo reports whether m is in the inbox of actor, who holds roles:
// sent to it or to one of its roles, or owed by it.
func addressedTo(m workspace.Msg, actor string, roles []string) bool {
	if slices.Contains(m.To, actor) || slices.Contains(m.Pending, actor) {
		return true
	}
	for _, r := range roles {
		if slices.Contains(m.To, "role:"+r) {
			return true
		}
	}
	return false
}

// inboxRoles are the roles actor reads role messages by, as the engine
// takes them: the token's role for the token's own actor, else the
// policy's roles of actor.
func (s *Server) inboxRoles(ctx context.Context, actor string) ([]string, error) {
	if p := principalFrom(ctx); p.bound() && p.actor == actor && p.role != "" {
		return []string{p.role}, nil
	}
	pol, err := s.ws.Policy(ctx)
	if err != nil || pol == nil {
		return nil, err
	}
	return pol.RolesOf(actor), nil
}

// endInbox writes why the stream ended, where the client is to be told:
// as the event stream does, an error record for a compacted or rewound
// log, an ended token or a failed read, a comment for a drain.
func (s *Server) endInbox(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, err error) {
	b := s.inboxEnd(ctx, nil, err)
	if len(b) == 0 {
		return
	}
	_ = rc.SetWriteDeadline(time.Now().Add(streamDrainGrace))
	if _, err := w.Write(b); err == nil {
		_ = rc.Flush()
	}
}

// inboxEnd appends to b the inbox stream's last record, given why its
// subscription or a read ended (err) and its context: nothing when the
// client went or the context ended otherwise.
func (s *Server) inboxEnd(ctx context.Context, b []byte, err error) []byte {
	if e := tokenEnded(ctx); e != nil {
		err = e
	}
	switch {
	case s.drain.Err() != nil && !errors.Is(err, wire.ErrUnauthorized):
		b = append(b, ": the server is shutting down; reconnect with Last-Event-ID\n\n"...)
	case err != nil && (ctx.Err() == nil || errors.Is(err, wire.ErrUnauthorized)):
		j, _ := json.Marshal(s.fail(ctx, err))
		b = append(append(append(b, "event: error\ndata: "...), j...), "\n\n"...)
	}
	return b
}

// takeOverInbox runs the inbox stream of a request whose connection can
// be taken over as the event stream's is (stream.go), so that an idle
// inbox stream keeps what an idle event stream keeps and not net/http's
// goroutines and buffers for its connection. It writes the same records
// in the same order as the loop of streamInbox: each message event the
// actor's inbox holds, read with the request's principal, in seq order,
// then heartbeats with the seq reached, and at the end inboxEnd's record.
// Its context is the event stream's (streamContext): Drain, and for a
// token-bound request the token's end, end it; an event committed after
// the token ended is not sent (stream.add).
func (s *Server) takeOverInbox(w http.ResponseWriter, r *http.Request, req workspace.SubscribeRequest, actor string, roles []string, first []byte) {
	fail := func(ctx context.Context, err error) { writeProblem(w, s.fail(ctx, err)) }
	ctx, release, err := s.streamContext(r)
	if err != nil {
		fail(r.Context(), err)
		return
	}
	sub, err := s.ws.Events().Subscribe(ctx, req)
	if err != nil {
		fail(ctx, err)
		if release != nil {
			release()
		}
		return
	}
	st := &stream{s: s, ctx: ctx, sub: sub, release: release,
		bound: principalFrom(r.Context()).bound(),
		record: func(ctx context.Context, ev workspace.Event) ([]byte, bool, error) {
			return s.inboxRecord(ctx, ev, actor, roles)
		},
	}
	s.metrics.streams.Inc()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	own, err := st.takeOver(w, r, first)
	switch {
	case own && err != nil:
		st.close()
	case own:
		go st.run()
	default:
		// Not taken over after all (Drain began, or the hijack failed):
		// written through w, on this goroutine, as openStream does.
		st.w, st.rc = w, http.NewResponseController(w)
		_ = st.rc.SetReadDeadline(time.Time{})
		w.WriteHeader(http.StatusOK)
		st.begin()
		*st.buf = append(*st.buf, first...)
		if !st.flush(false) {
			st.close()
			return
		}
		st.run()
	}
}

// documentInboxStream adds the inbox stream to the OpenAPI document.
func (s *Server) documentInboxStream() {
	oapi := s.api.OpenAPI()
	recSchema := oapi.Components.Schemas.Schema(reflectInboxEvent, true, "InboxEvent")
	problem := oapi.Components.Schemas.Schema(reflectProblem, true, "wire.Problem")
	oapi.AddOperation(&huma.Operation{
		OperationID: "streamInbox",
		Method:      http.MethodGet,
		Path:        "/v1/inbox/stream",
		Summary:     "Follow one's inbox as Server-Sent Events",
		Description: "Each message sent to the actor or a role it holds, and each ack or escalation of one, is `id: SEQ` (the log's seq) and `data: INBOX-EVENT-JSON`, " +
			"the message as it stands when the stream reads it. Idle streams get a `: heartbeat` comment with an `id:` holding the seq reached. " +
			"A reconnect with Last-Event-ID resumes with no gap and no duplicate. An agent follows only its own inbox (an admin any).",
		Tags: []string{"messages"},
		Parameters: []*huma.Param{
			{Name: "actor", In: "query", Description: "Whose inbox (default: the request's actor).", Schema: &huma.Schema{Type: "string"}},
			{Name: "after", In: "query", Description: "Only events with seq > after (Last-Event-ID, when sent, takes its place).", Schema: &huma.Schema{Type: "integer", Format: "int64", Minimum: ptr(0.0)}},
			{Name: "heartbeat", In: "query", Description: "How often an idle stream sends a heartbeat (at least 10ms; at most, and by default, the server's --heartbeat).", Schema: &huma.Schema{Type: "string"}},
			{Name: "Last-Event-ID", In: "header", Description: "The last id received: the stream resumes after it.", Schema: &huma.Schema{Type: "string"}},
		},
		Responses: map[string]*huma.Response{
			"200": {Description: "The stream", Content: map[string]*huma.MediaType{"text/event-stream": {Schema: recSchema}}},
			"400": {Description: "Bad query", Content: map[string]*huma.MediaType{"application/problem+json": {Schema: problem}}},
			"403": {Description: "Another's inbox", Content: map[string]*huma.MediaType{"application/problem+json": {Schema: problem}}},
			"410": {Description: "Compacted", Content: map[string]*huma.MediaType{"application/problem+json": {Schema: problem}}},
		},
	})
}

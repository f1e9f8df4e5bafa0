package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// eventsRoute is the event stream's pattern: a plain handler (huma's SSE
// support has no comment lines), described in the OpenAPI document by hand.
const eventsRoute = "GET /v1/events"

// streamWriteTimeout drops a subscriber that cannot take one message in
// this long, so a stuck client holds no goroutine for ever.
const streamWriteTimeout = 30 * time.Second

// EventQueryParams are the event filters, as query parameters.
type EventQueryParams struct {
	After       int64    `query:"after" minimum:"0" doc:"Only events with seq > after."`
	Type        []string `query:"type,explode" doc:"Event types; repeat or separate with commas."`
	Actor       string   `query:"actor"`
	SubjectKind string   `query:"subject_kind" enum:"artifact,task,note,lock,message,actor"`
	SubjectID   string   `query:"subject_id"`
	SubjectName string   `query:"subject_name"`
	Since       string   `query:"since" doc:"RFC 3339 time: events at or after it."`
	Until       string   `query:"until" doc:"RFC 3339 time: events before it."`
}

func (p EventQueryParams) query() (workspace.EventQuery, error) {
	q := workspace.EventQuery{AfterSeq: p.After, Actor: p.Actor, SubjectKind: p.SubjectKind, SubjectID: p.SubjectID, SubjectName: p.SubjectName}
	for _, t := range p.Type {
		for _, one := range strings.Split(t, ",") {
			if one = strings.TrimSpace(one); one != "" {
				q.Types = append(q.Types, one)
			}
		}
	}
	for _, tm := range []struct {
		field string
		in    string
		out   *time.Time
	}{{"since", p.Since, &q.Since}, {"until", p.Until, &q.Until}} {
		if tm.in == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, tm.in)
		if err != nil {
			return q, &workspace.InvalidError{Field: tm.field, Reason: "not an RFC 3339 time"}
		}
		*tm.out = t
	}
	return q, nil
}

// streamParams are the query parameters the event stream takes.
var streamParams = map[string]bool{"after": true, "type": true, "actor": true, "subject_kind": true, "subject_id": true, "subject_name": true, "since": true, "until": true, "heartbeat": true}

// minHeartbeat bounds how often a stream may ask to be told the head.
const minHeartbeat = 10 * time.Millisecond

// streamHeartbeat is the heartbeat a stream asked for with heartbeat=DUR:
// never longer than the server's own (which keeps proxies from closing an
// idle stream), never shorter than minHeartbeat.
func (s *Server) streamHeartbeat(v url.Values) (time.Duration, error) {
	hb := s.opts.Heartbeat
	if a := v.Get("heartbeat"); a != "" {
		d, err := time.ParseDuration(a)
		if err != nil || d < minHeartbeat {
			return 0, &workspace.InvalidError{Field: "heartbeat", Reason: "want a duration of at least 10ms, such as 5s"}
		}
		hb = min(d, hb)
	}
	return hb, nil
}

func eventParams(v url.Values) (EventQueryParams, error) {
	for k := range v {
		if !streamParams[k] {
			return EventQueryParams{}, &workspace.InvalidError{Field: truncate(k, 64), Reason: "is not a parameter of the event stream"}
		}
	}
	p := EventQueryParams{Type: v["type"], Actor: v.Get("actor"), SubjectKind: v.Get("subject_kind"), SubjectID: v.Get("subject_id"), SubjectName: v.Get("subject_name"), Since: v.Get("since"), Until: v.Get("until")}
	if a := v.Get("after"); a != "" {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil || n < 0 {
			return p, &workspace.InvalidError{Field: "after", Reason: "not a seq (a whole number, 0 or more)"}
		}
		p.After = n
	}
	return p, nil
}

func (s *Server) eventRoutes() {
	huma.Register(s.api, s.op("readEvents", http.MethodGet, "/v1/events/history", "Read one page of the event log", "events", 0),
		func(ctx context.Context, in *struct {
			EventQueryParams
			Limit int `query:"limit" minimum:"0" maximum:"10000"`
		}) (*struct{ Body workspace.EventPage }, error) {
			q, err := in.query()
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			q.Limit = in.Limit
			p, err := s.ws.Events().Read(ctx, q)
			return answer(s, ctx, &struct{ Body workspace.EventPage }{p}, err)
		})

	type head struct {
		Head int64 `json:"head"`
	}
	huma.Register(s.api, s.op("eventsHead", http.MethodGet, "/v1/events/head", "The newest seq (0 for an empty log)", "events", 0),
		func(ctx context.Context, _ *struct{}) (*struct{ Body head }, error) {
			h, err := s.ws.Events().Head(ctx)
			return answer(s, ctx, &struct{ Body head }{head{h}}, err)
		})

	huma.Register(s.api, s.op("compactEvents", http.MethodPost, "/v1/events/compact", "Remove events below floor", "events", http.StatusNoContent),
		func(ctx context.Context, in *struct{ Body wire.CompactBody }) (*struct{}, error) {
			return answer(s, ctx, &struct{}{}, s.ws.Events().Compact(ctx, in.Body.Floor))
		})

	s.mux.HandleFunc(eventsRoute, s.streamEvents)
	s.served = append(s.served, eventsRoute)
	s.documentStream()
}

// streamEvents sends the log as Server-Sent Events: the backlog after the
// cursor, then live. Each event's id is its seq; a heartbeat is a comment
// and an id-only record with the seq the stream has reached, so a client
// that reconnects with Last-Event-ID resumes past events that did not
// match its filter. The stream is the library's subscription: gap-free
// and in order, so resuming after the last id misses nothing and repeats
// nothing.
//
// Over HTTP/1.x the stream takes its connection over (stream.go) and runs
// on a goroutine of its own, started here with a fresh stack, so that
// what an idle stream keeps is its small loop and not net/http's
// connection: the handler returns at once. Otherwise it runs here.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) {
	st, own := s.openStream(w, r)
	switch {
	case st == nil:
	case own:
		go st.run()
	default:
		st.run()
	}
}

// openStream checks the request, subscribes and writes the stream's
// head and first comment; nil when it answered the request otherwise.
// own is whether the stream has taken its connection over.
//
//go:noinline
func (s *Server) openStream(w http.ResponseWriter, r *http.Request) (st *stream, own bool) {
	params, err := eventParams(r.URL.Query())
	if err != nil {
		writeProblem(w, s.fail(r.Context(), err))
		return nil, false
	}
	q, err := params.query()
	if err != nil {
		writeProblem(w, s.fail(r.Context(), err))
		return nil, false
	}
	heartbeat, err := s.streamHeartbeat(r.URL.Query())
	if err != nil {
		writeProblem(w, s.fail(r.Context(), err))
		return nil, false
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil || n < 0 {
			writeProblem(w, s.fail(r.Context(), &workspace.InvalidError{Field: "Last-Event-ID", Reason: "not a seq"}))
			return nil, false
		}
		q.AfterSeq = n
	}
	if s.drain.Err() != nil {
		writeProblem(w, wire.NewProblem(wire.CodeUnavailable, "the server is shutting down"))
		return nil, false
	}
	// A token's place among its streams is taken here and handed to the
	// stream, whose close gives it back; given back here when no stream
	// was made.
	token, handed := "", false
	if p := principalFrom(r.Context()); p.bound() {
		if !s.perToken.enter(p.token, s.opts.MaxStreamsPerToken) {
			writeProblem(w, wire.NewProblem(wire.CodeTooMany, fmt.Sprintf(
				"this token has %d event streams open on this server, the most it may (wsctl serve --max-streams-per-token): close one, or share one stream between readers",
				s.opts.MaxStreamsPerToken)))
			return nil, false
		}
		token = p.token
		defer func() {
			if !handed {
				s.perToken.leave(token)
			}
		}()
	}
	takeOver := canTakeOver(w, r)
	var (
		ctx     context.Context
		release func()
	)
	if takeOver {
		ctx, release, err = s.streamContext(r)
		if err != nil {
			writeProblem(w, s.fail(r.Context(), err))
			return nil, false
		}
	} else {
		// Written through w, the stream also ends with the request.
		c, cancel := context.WithCancel(r.Context())
		stop := context.AfterFunc(s.drain, cancel)
		ctx, release = c, func() { stop(); cancel() }
	}
	sub, err := s.ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: q, Heartbeat: heartbeat, Buffer: streamBuffer})
	if err != nil {
		writeProblem(w, s.fail(ctx, err))
		if release != nil {
			release()
		}
		return nil, false
	}
	handed = true
	st = &stream{s: s, ctx: ctx, sub: sub, release: release, token: token,
		// A token-bound stream's context ends when the token does (revoke.go).
		bound: principalFrom(r.Context()).bound(),
	}
	s.metrics.streams.Inc()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	first := []byte(": agentspace events after " + strconv.FormatInt(q.AfterSeq, 10) + "\nretry: 1000\n\n")
	if takeOver {
		if own, err = st.takeOver(w, r, first); own {
			if err != nil {
				st.close()
				return nil, false
			}
			return st, true
		}
		// Not taken over after all (Drain began, or the hijack failed):
		// written through w, the stream ends with its context, and a gone
		// client is noticed when a write fails.
	}
	st.w, st.rc = w, http.NewResponseController(w)
	// The server's read timeout guards request bodies; a stream has none
	// and lives longer.
	_ = st.rc.SetReadDeadline(time.Time{})
	w.WriteHeader(http.StatusOK)
	st.begin()
	*st.buf = append(*st.buf, first...)
	if !st.flush(false) {
		st.close()
		return nil, false
	}
	return st, false
}

// documentStream adds the event stream to the OpenAPI document.
func (s *Server) documentStream() {
	oapi := s.api.OpenAPI()
	evSchema := oapi.Components.Schemas.Schema(reflectEvent, true, "Event")
	params := []*huma.Param{
		{Name: "after", In: "query", Description: "Only events with seq > after (Last-Event-ID, when sent, takes its place).", Schema: &huma.Schema{Type: "integer", Format: "int64", Minimum: ptr(0.0)}},
		{Name: "type", In: "query", Description: "Event types; repeat or separate with commas.", Explode: ptr(true), Schema: &huma.Schema{Type: "array", Items: &huma.Schema{Type: "string"}}},
		{Name: "actor", In: "query", Schema: &huma.Schema{Type: "string"}},
		{Name: "subject_kind", In: "query", Schema: &huma.Schema{Type: "string", Enum: []any{"artifact", "task", "note", "lock", "message", "actor"}}},
		{Name: "subject_id", In: "query", Schema: &huma.Schema{Type: "string"}},
		{Name: "subject_name", In: "query", Schema: &huma.Schema{Type: "string"}},
		{Name: "since", In: "query", Schema: &huma.Schema{Type: "string", Format: "date-time"}},
		{Name: "until", In: "query", Schema: &huma.Schema{Type: "string", Format: "date-time"}},
		{Name: "heartbeat", In: "query", Description: "How often an idle stream sends a heartbeat (at least 10ms; at most, and by default, the server's --heartbeat).", Schema: &huma.Schema{Type: "string"}},
		{Name: "Last-Event-ID", In: "header", Description: "The last id received: the stream resumes after it.", Schema: &huma.Schema{Type: "string"}},
	}
	problem := oapi.Components.Schemas.Schema(reflectProblem, true, "wire.Problem")
	oapi.AddOperation(&huma.Operation{
		OperationID: "streamEvents",
		Method:      http.MethodGet,
		Path:        "/v1/events",
		Summary:     "Follow the event log as Server-Sent Events",
		Description: "Each event is `id: SEQ` and `data: EVENT-JSON`. Idle streams get a `: heartbeat` comment with an `id:` holding the seq reached. " +
			"A reconnect with Last-Event-ID resumes with no gap and no duplicate. A compacted start answers 410; compaction during the stream ends it with `event: error`.",
		Tags:       []string{"events"},
		Parameters: params,
		Responses: map[string]*huma.Response{
			"200": {Description: "The stream", Content: map[string]*huma.MediaType{"text/event-stream": {Schema: evSchema}}},
			"400": {Description: "Bad query", Content: map[string]*huma.MediaType{"application/problem+json": {Schema: problem}}},
			"410": {Description: "Compacted", Content: map[string]*huma.MediaType{"application/problem+json": {Schema: problem}}},
			"429": {Description: "The token has as many streams open as it may (too_many)", Content: map[string]*huma.MediaType{"application/problem+json": {Schema: problem}}},
		},
	})
}

func ptr[T any](v T) *T { return &v }

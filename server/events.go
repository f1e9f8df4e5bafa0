package server

import (
	"context"
	"encoding/json"
	"errors"
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
	SubjectKind string   `query:"subject_kind" enum:"artifact,task,note,lock"`
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
// A stream is opened (openStream) and then run (stream.run) by separate
// functions, so that what stays on the connection's goroutine while a
// stream idles is the small frame of run, not the large one of the
// request's checks: a parked goroutine's stack is halved by the garbage
// collector only while it uses under a quarter of it, and the handler's
// whole chain with one large frame kept an idle stream's goroutine at 16
// KiB of stack where 8 KiB do (wsctl bench's SSE row measures it).
// Invariant: the records written, their order and their flushes are
// what the one function wrote.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) {
	st := s.openStream(w, r)
	if st == nil {
		return
	}
	defer st.close()
	st.run()
}

// stream is one open event stream.
type stream struct {
	s     *Server
	w     http.ResponseWriter
	rc    *http.ResponseController
	ctx   context.Context
	sub   *workspace.Subscription
	bound bool   // token-bound: an event waits for the revocation watcher
	buf   []byte // the record being written
	close func()
}

// openStream checks the request, subscribes and writes the stream's
// header and first comment; nil when it answered the request otherwise.
//
//go:noinline
func (s *Server) openStream(w http.ResponseWriter, r *http.Request) *stream {
	params, err := eventParams(r.URL.Query())
	if err != nil {
		writeProblem(w, s.fail(r.Context(), err))
		return nil
	}
	q, err := params.query()
	if err != nil {
		writeProblem(w, s.fail(r.Context(), err))
		return nil
	}
	heartbeat, err := s.streamHeartbeat(r.URL.Query())
	if err != nil {
		writeProblem(w, s.fail(r.Context(), err))
		return nil
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil || n < 0 {
			writeProblem(w, s.fail(r.Context(), &workspace.InvalidError{Field: "Last-Event-ID", Reason: "not a seq"}))
			return nil
		}
		q.AfterSeq = n
	}
	if s.drain.Err() != nil {
		writeProblem(w, wire.NewProblem(wire.CodeUnavailable, "the server is shutting down"))
		return nil
	}
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.drain, cancel)
	sub, err := s.ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: q, Heartbeat: heartbeat})
	if err != nil {
		writeProblem(w, s.fail(ctx, err))
		stop()
		cancel()
		return nil
	}
	st := &stream{s: s, w: w, rc: http.NewResponseController(w), ctx: ctx, sub: sub,
		// A token-bound stream's context ends when the token does (revoke.go).
		bound: principalFrom(ctx).bound(),
	}
	// The server's read timeout guards request bodies; a stream has none
	// and lives longer.
	_ = st.rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s.metrics.streams.Inc()
	st.close = func() {
		s.metrics.streams.Dec()
		_ = sub.Close()
		stop()
		cancel()
	}
	_ = st.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if _, err := fmt.Fprintf(w, ": agentspace events after %d\nretry: 1000\n\n", q.AfterSeq); err != nil || st.rc.Flush() != nil {
		st.close()
		return nil
	}
	return st
}

// run sends the stream's messages until it ends.
func (st *stream) run() {
	for {
		m, err := st.sub.Next(st.ctx)
		if err != nil {
			st.end(err)
			return
		}
		if !st.send(&m) {
			return
		}
		// Flush when nothing more is waiting: a backlog goes out in
		// large writes, a live event at once.
		if len(st.sub.C()) == 0 && st.rc.Flush() != nil {
			return
		}
	}
}

// send writes one message: an event, or a heartbeat. False when the
// stream is to end.
//
//go:noinline
func (st *stream) send(m *workspace.Message) bool {
	_ = st.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	b := st.buf[:0]
	if m.Progress {
		b = append(b, ": heartbeat\nid: "...)
		b = strconv.AppendInt(b, m.Head, 10)
		b = append(b, "\n\n"...)
	} else {
		if st.bound && st.s.revoke.waitPast(st.ctx, m.Event.Seq) != nil {
			// The token ended before this event: end the stream (run's
			// next Next writes why) without sending it.
			return true
		}
		ev, err := json.Marshal(m.Event)
		if err != nil {
			return false
		}
		b = append(b, "id: "...)
		b = strconv.AppendInt(b, m.Event.Seq, 10)
		b = append(b, "\ndata: "...)
		b = append(b, ev...)
		b = append(b, "\n\n"...)
		st.s.metrics.events.Inc()
	}
	st.buf = b
	_, err := st.w.Write(b)
	return err == nil
}

// end writes why the stream ended, where the client is to be told.
//
//go:noinline
func (st *stream) end(err error) {
	_ = st.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	var ce *workspace.CompactedError
	if e := tokenEnded(st.ctx); e != nil {
		err = e
	}
	switch {
	case errors.As(err, &ce), errors.Is(err, wire.ErrUnauthorized), errors.Is(err, workspace.ErrRewound):
		p, _ := wire.ProblemOf(err)
		b, _ := json.Marshal(p)
		_, _ = fmt.Fprintf(st.w, "event: error\ndata: %s\n\n", b)
	case st.s.drain.Err() != nil:
		_, _ = fmt.Fprint(st.w, ": the server is shutting down; reconnect with Last-Event-ID\n\n")
	}
	_ = st.rc.Flush()
}

// documentStream adds the event stream to the OpenAPI document.
func (s *Server) documentStream() {
	oapi := s.api.OpenAPI()
	evSchema := oapi.Components.Schemas.Schema(reflectEvent, true, "Event")
	params := []*huma.Param{
		{Name: "after", In: "query", Description: "Only events with seq > after (Last-Event-ID, when sent, takes its place).", Schema: &huma.Schema{Type: "integer", Format: "int64", Minimum: ptr(0.0)}},
		{Name: "type", In: "query", Description: "Event types; repeat or separate with commas.", Explode: ptr(true), Schema: &huma.Schema{Type: "array", Items: &huma.Schema{Type: "string"}}},
		{Name: "actor", In: "query", Schema: &huma.Schema{Type: "string"}},
		{Name: "subject_kind", In: "query", Schema: &huma.Schema{Type: "string", Enum: []any{"artifact", "task", "note", "lock"}}},
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
		},
	})
}

func ptr[T any](v T) *T { return &v }

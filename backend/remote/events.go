package remote

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentspace/agentspace/internal/wsconn"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

type events struct{ c *Client }

// eventQuery is q's filters as query parameters (after and limit apart).
// An empty type (which the server would drop from its comma-separated
// list) is refused as the library refuses it.
func eventQuery(q workspace.EventQuery) (url.Values, error) {
	v := url.Values{}
	if q.AfterSeq < 0 {
		return nil, &workspace.InvalidError{Field: "after", Reason: "must not be negative"}
	}
	for _, t := range q.Types {
		if t == "" || strings.Contains(t, ",") {
			return nil, &workspace.InvalidError{Field: "types", Reason: fmt.Sprintf("%q is not an event type", t)}
		}
		v.Add("type", t)
	}
	setStr(v, "actor", q.Actor)
	setStr(v, "subject_kind", q.SubjectKind)
	setStr(v, "subject_id", q.SubjectID)
	setStr(v, "subject_name", q.SubjectName)
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.UTC().Format(time.RFC3339Nano))
	}
	return v, nil
}

func (e events) Read(ctx context.Context, q workspace.EventQuery) (workspace.EventPage, error) {
	v, err := eventQuery(q)
	if err != nil {
		return workspace.EventPage{}, err
	}
	setInt(v, "after", q.AfterSeq)
	setInt(v, "limit", int64(q.Limit))
	var out workspace.EventPage
	err = e.c.call(ctx, http.MethodGet, "/v1/events/history", v, nil, &out)
	return out, err
}

func (e events) Head(ctx context.Context) (int64, error) {
	var out struct {
		Head int64 `json:"head"`
	}
	err := e.c.call(ctx, http.MethodGet, "/v1/events/head", nil, nil, &out)
	return out.Head, err
}

func (e events) Compact(ctx context.Context, floor int64) error {
	return e.c.call(ctx, http.MethodPost, "/v1/events/compact", nil, wire.CompactBody{Floor: floor}, nil)
}

// streamHeartbeat is asked of the server when the caller wants none: the
// stream still needs heartbeats to tell a dead connection from a quiet log.
const streamHeartbeat = 15 * time.Second

// Subscribe follows the log over Server-Sent Events. The first connection
// is made here, so a bad query or a compacted start fails the call; after
// that, a dropped connection is made again, resuming after the last id
// received, until ctx ends or the subscription or client is closed.
func (e events) Subscribe(ctx context.Context, r workspace.SubscribeRequest) (*workspace.Subscription, error) {
	c := e.c
	q, err := eventQuery(r.Query)
	if err != nil {
		return nil, err
	}
	hb := r.Heartbeat
	if hb == 0 {
		hb = workspace.DefaultHeartbeat
	}
	if hb > 0 {
		q.Set("heartbeat", max(hb, 10*time.Millisecond).String())
	} else {
		q.Set("heartbeat", streamHeartbeat.String())
	}
	// The stream's requests live as long as the stream: until ctx ends,
	// the subscription is closed (run's context), or the client is.
	sctx, scancel := context.WithCancel(ctx)
	if !c.track() {
		scancel()
		return nil, workspace.ErrClosed
	}
	stopLife := context.AfterFunc(c.life, scancel)
	body, err := c.openStream(sctx, q, r.Query.AfterSeq)
	if err != nil {
		stopLife()
		scancel()
		c.subs.Done()
		if c.isClosed() {
			return nil, workspace.ErrClosed
		}
		return nil, err
	}
	s := &stream{c: c, q: q, last: r.Query.AfterSeq, progress: r.Heartbeat >= 0, idle: 3*max(hb, time.Second) + 5*time.Second}
	if hb < 0 {
		s.idle = 3*streamHeartbeat + 5*time.Second
	}
	return subscription(sctx, r.Buffer, func(rctx context.Context, send func(workspace.Message) bool) error {
		defer c.subs.Done()
		defer stopLife()
		defer scancel()
		stop := context.AfterFunc(rctx, scancel)
		defer stop()
		err := s.run(sctx, body, send)
		if c.isClosed() {
			return workspace.ErrClosed
		}
		if err == nil {
			return ctx.Err()
		}
		return err
	}), nil
}

// track registers a stream with the client, unless it is closed.
func (c *Client) track() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.isClosed() {
		return false
	}
	c.subs.Add(1)
	return true
}

// openStream connects to /v1/events, resuming after seq after.
func (c *Client) openStream(ctx context.Context, q url.Values, after int64) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/events?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	} else if p, ok := wsconn.PrincipalFrom(ctx); ok && p.Actor != "" {
		// The stream leaves out what this actor may not read, as a page does.
		req.Header.Set(wire.ActorHeader, p.Actor)
	}
	resp, err := c.stream.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, decode(resp, nil)
	}
	return resp.Body, nil
}

// stream is one subscription's reading state.
type stream struct {
	c        *Client
	q        url.Values
	last     int64         // the last id received: where a reconnect resumes
	progress bool          // forward heartbeats as Progress messages
	idle     time.Duration // silence longer than this is a dead connection
}

// run reads body, then reconnects after each drop, until ctx ends (nil)
// or the stream ends for good (its error).
func (s *stream) run(ctx context.Context, body io.ReadCloser, send func(workspace.Message) bool) error {
	backoff := 20 * time.Millisecond
	for {
		err := s.read(ctx, body, send)
		_ = body.Close()
		if err != nil || ctx.Err() != nil {
			return err
		}
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			body, err = s.c.openStream(ctx, s.q, s.last)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return nil
			}
			if !transient(err) {
				return err
			}
		}
		backoff = 20 * time.Millisecond
	}
}

// transient reports whether a failed (re)connection is worth retrying: the
// server is down, restarting or draining, rather than refusing the stream.
func transient(err error) bool {
	var se *wire.StatusError
	switch {
	case errors.Is(err, wire.ErrUnavailable), errors.Is(err, workspace.ErrClosed):
		return true
	case errors.As(err, &se):
		return se.Status >= 500
	}
	var ie *workspace.InvalidError
	var ce *workspace.CompactedError
	return !errors.As(err, &ie) && !errors.As(err, &ce) && !errors.Is(err, wire.ErrUnauthorized) && !errors.Is(err, wire.ErrForbidden)
}

// read delivers the messages of one connection. It returns nil when the
// connection ends (to be made again) and the stream's error when the
// server ends it with one (event: error).
func (s *stream) read(ctx context.Context, body io.Reader, send func(workspace.Message) bool) error {
	// A connection silent for longer than a few heartbeats is dead (a
	// half-open TCP connection never says so): closing it makes the read
	// fail, and the stream reconnects.
	rc, _ := body.(io.Closer)
	watchdog := time.AfterFunc(s.idle, func() {
		if rc != nil {
			_ = rc.Close()
		}
	})
	defer watchdog.Stop()
	br := bufio.NewReaderSize(body, 64<<10)
	var (
		id, event string
		data      []byte
	)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil
		}
		watchdog.Reset(s.idle)
		line = strings.TrimRight(line, "\r\n")
		if line != "" {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				id = value
			case "event":
				event = value
			case "data":
				data = append(data, value...)
			}
			continue
		}
		// A blank line ends a message.
		if event == "error" {
			return wire.DecodeError(http.StatusGone, data)
		}
		if id != "" {
			seq, err := strconv.ParseInt(id, 10, 64)
			if err != nil {
				return fmt.Errorf("event stream: bad id %q", id)
			}
			if len(data) > 0 {
				var ev workspace.Event
				if err := json.Unmarshal(data, &ev); err != nil {
					return fmt.Errorf("event stream: %w", err)
				}
				// The server's stream is gap-free and duplicate-free; a
				// resumed one starts after last, so nothing repeats.
				if ev.Seq > s.last {
					s.last = ev.Seq
					if !send(workspace.Message{Event: ev}) {
						return nil
					}
				}
			} else if seq >= s.last {
				s.last = seq
				if s.progress && !send(workspace.Message{Progress: true, Head: seq}) {
					return nil
				}
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		id, event, data = "", "", data[:0]
	}
}

// subscription starts the *workspace.Subscription run feeds, holding
// buffer messages ahead of its consumer (SubscribeRequest.Buffer).
func subscription(ctx context.Context, buffer int, run func(context.Context, func(workspace.Message) bool) error) *workspace.Subscription {
	return wsconn.NewSubscription(ctx, buffer, run)
}

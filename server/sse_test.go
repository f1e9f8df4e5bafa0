package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// sseRecord is one record of an event stream: an event, or (Data empty) a
// heartbeat's id.
type sseRecord struct {
	ID      int64
	Data    string
	Comment bool
}

// stream opens /v1/events (with the headers hdr, name then value) and
// returns its records as they come.
func stream(t *testing.T, base, query string, lastID int64, hdr ...string) (<-chan sseRecord, func()) {
	t.Helper()
	ch, cancel, _ := streamWith(t, http.DefaultClient, base, query, lastID, hdr...)
	return ch, cancel
}

// streamWith is stream through client; it also returns the response.
func streamWith(t *testing.T, client *http.Client, base, query string, lastID int64, hdr ...string) (<-chan sseRecord, func(), *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/events"+query, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if lastID >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	ch := make(chan sseRecord, 100)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var rec sseRecord
		have := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if have {
					ch <- rec
				}
				rec, have = sseRecord{}, false
			case strings.HasPrefix(line, ":"):
				rec.Comment = true
			case strings.HasPrefix(line, "id: "):
				rec.ID, _ = strconv.ParseInt(line[4:], 10, 64)
				have = true
			case strings.HasPrefix(line, "data: "):
				rec.Data = line[6:]
				have = true
			}
		}
	}()
	return ch, cancel, resp
}

func putNotes(t *testing.T, ws *workspace.Workspace, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		_, err := ws.Notes().Put(context.Background(), workspace.Write{Actor: "ann"}, workspace.NotePut{Kind: "decision", Key: fmt.Sprint("k", i), Body: "b"})
		require.NoError(t, err)
	}
}

func next(t *testing.T, ch <-chan sseRecord) (sseRecord, bool) {
	t.Helper()
	select {
	case r, ok := <-ch:
		return r, ok
	case <-time.After(10 * time.Second):
		t.Fatal("no record from the stream in 10s")
		return sseRecord{}, false
	}
}

// TestStreamResumesAcrossARestartWithoutGapOrDuplicate follows the log
// from one server, stops it mid-stream (the stream ends cleanly), and
// resumes with Last-Event-ID on a new server over the same store: every
// event arrives once, in order.
func TestStreamResumesAcrossARestartWithoutGapOrDuplicate(t *testing.T) {
	dsn := sqliteDSN(t)
	e1 := newEnv(t, dsn, server.Options{})
	putNotes(t, e1.ws, 0, 5)
	ch, cancel := stream(t, e1.hs.URL, "", -1)
	defer cancel()
	var seen []int64
	for len(seen) < 3 {
		r, ok := next(t, ch)
		require.True(t, ok)
		if r.Data == "" {
			continue
		}
		var ev workspace.Event
		require.NoError(t, json.Unmarshal([]byte(r.Data), &ev))
		assert.Equal(t, r.ID, ev.Seq)
		seen = append(seen, r.ID)
	}
	e1.close()
	for range ch { // the stream ends: no hang
	}

	e2 := newEnv(t, dsn, server.Options{})
	putNotes(t, e2.ws, 5, 4)
	head := e2.head()
	ch2, cancel2 := stream(t, e2.hs.URL, "", seen[len(seen)-1])
	defer cancel2()
	for seen[len(seen)-1] < head {
		r, ok := next(t, ch2)
		require.True(t, ok)
		if r.Data != "" {
			seen = append(seen, r.ID)
		}
	}
	want := make([]int64, head)
	for i := range want {
		want[i] = int64(i + 1)
	}
	assert.Equal(t, want, seen)
}

// TestHeartbeatCarriesTheSeqReached checks that a filtered, idle stream
// sends heartbeats whose id is the seq it has examined, so a client that
// resumes from it skips what did not match.
func TestHeartbeatCarriesTheSeqReached(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{Heartbeat: 50 * time.Millisecond})
	putNotes(t, e.ws, 0, 3)
	ch, cancel := stream(t, e.hs.URL, "?type=task.created", 0)
	defer cancel()
	for {
		r, ok := next(t, ch)
		require.True(t, ok)
		require.Empty(t, r.Data, "no event matches the filter")
		if r.Comment && r.ID == 3 {
			return
		}
	}
}

func TestStreamBelowTheFloorIsGone(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{})
	putNotes(t, e.ws, 0, 5)
	require.NoError(t, e.ws.Events().Compact(context.Background(), 4))
	err := e.fails(410, "GET", "/v1/events?after=1", nil)
	var ce *workspace.CompactedError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, int64(4), ce.Floor)
}

// openStreams reads the server's gauge of open event streams.
func (e *env) openStreams() int {
	e.t.Helper()
	status, body := e.do("GET", "/metrics", nil)
	require.Equal(e.t, 200, status)
	const name = "agentspace_http_open_streams"
	n, ok := metricValues(string(body), name)[name]
	require.True(e.t, ok, "no %s in /metrics", name)
	return int(n)
}

// rawStream sends GET /v1/events?after=0 in proto (HTTP/1.1 or HTTP/1.0),
// with the headers hdr (name then value), on a connection of its own and
// returns the response, read as any client reads it.
func rawStream(t *testing.T, e *env, proto string, hdr ...string) *http.Response {
	t.Helper()
	addr := e.hs.Listener.Addr().String()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	var extra strings.Builder
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&extra, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	_, err = fmt.Fprintf(conn, "GET /v1/events?after=0 %s\r\nHost: %s\r\nAccept: text/event-stream\r\n%s\r\n", proto, addr, extra.String())
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	return resp
}

// readEvents reads body until it has seen n events' ids, and returns them.
func readEvents(t *testing.T, body *bufio.Reader, n int) []int64 {
	t.Helper()
	var ids []int64
	for len(ids) < n {
		line, err := body.ReadString('\n')
		require.NoError(t, err)
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			require.NoError(t, err)
			ids = append(ids, id)
		}
	}
	return ids
}

// TestTakenOverStreamAnswersAsNetHTTPWouldAndEndsOnDrain reads an
// HTTP/1.1 stream off the wire: the status and headers net/http wrote
// (the connection closing with the stream), a chunked body holding the
// backlog, then on Drain the farewell and a clean end of the body;
// Drain returns with the connection closed and the stream counted out.
func TestTakenOverStreamAnswersAsNetHTTPWouldAndEndsOnDrain(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{})
	putNotes(t, e.ws, 0, 3)
	resp := rawStream(t, e, "HTTP/1.1")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "HTTP/1.1", resp.Proto)
	for name, want := range map[string]string{
		"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
		"X-Accel-Buffering": "no", "X-Content-Type-Options": "nosniff",
	} {
		assert.Equal(t, want, resp.Header.Get(name), name)
	}
	assert.NotEmpty(t, resp.Header.Get("Date"))
	assert.Equal(t, []string{"chunked"}, resp.TransferEncoding)
	assert.True(t, resp.Close, "Connection: close")
	body := bufio.NewReader(resp.Body)
	assert.Equal(t, []int64{1, 2, 3}, readEvents(t, body, 3))
	assert.Equal(t, 1, e.openStreams())

	start := time.Now()
	e.srv.Drain()
	assert.Less(t, time.Since(start), 5*time.Second)
	rest, err := io.ReadAll(body)
	require.NoError(t, err, "the chunked body ends cleanly")
	assert.Contains(t, string(rest), ": the server is shutting down; reconnect with Last-Event-ID\n\n")
	assert.Equal(t, 0, e.openStreams())
}

// TestTakenOverStreamEndsOnRevocation revokes the token a taken-over
// stream was opened with: the stream ends with the typed error, having
// sent no event at or after the revocation, and its body ends cleanly.
func TestTakenOverStreamEndsOnRevocation(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{RequireToken: true})
	ctx := context.Background()
	tok, info, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "ann"})
	require.NoError(t, err)
	putNotes(t, e.ws, 0, 2)
	resp := rawStream(t, e, "HTTP/1.1", bearer(tok)...)
	require.Equal(t, 200, resp.StatusCode)
	require.True(t, resp.Close, "taken over: Connection: close")
	body := bufio.NewReader(resp.Body)
	assert.Equal(t, []int64{1, 2}, readEvents(t, body, 2))

	_, err = e.srv.Tokens().Revoke(ctx, "admin", info.ID)
	require.NoError(t, err)
	revokedAt := e.head()
	putNotes(t, e.ws, 2, 3)
	rest, err := io.ReadAll(body)
	require.NoError(t, err, "the chunked body ends cleanly")
	assert.Contains(t, string(rest), "event: error\ndata: ")
	assert.Contains(t, string(rest), `"code":"unauthorized"`)
	for _, line := range strings.Split(string(rest), "\n") {
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			assert.Less(t, id, revokedAt, "no event at or after the revocation")
		}
	}
	require.Eventually(t, func() bool { return e.openStreams() == 0 }, 5*time.Second, 20*time.Millisecond)
}

// TestTakenOverHTTP10StreamEndsByClosing: an HTTP/1.0 client gets no
// chunks, and the body ends when the connection closes.
func TestTakenOverHTTP10StreamEndsByClosing(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{})
	putNotes(t, e.ws, 0, 2)
	resp := rawStream(t, e, "HTTP/1.0")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "HTTP/1.0", resp.Proto)
	assert.Empty(t, resp.TransferEncoding)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	body := bufio.NewReader(resp.Body)
	assert.Equal(t, []int64{1, 2}, readEvents(t, body, 2))
	e.srv.Drain()
	rest, err := io.ReadAll(body)
	require.NoError(t, err)
	assert.Contains(t, string(rest), ": the server is shutting down")
}

// TestStreamDeliversALargeBacklogInOrder resumes from 0 over more events
// than one write holds: each arrives once, in order.
func TestStreamDeliversALargeBacklogInOrder(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{})
	const n = 1500
	for from := 0; from < n; from += 500 {
		b := workspace.Batch{Actor: "ann"}
		for i := from; i < from+500; i++ {
			b.Ops = append(b.Ops, workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: fmt.Sprint("k", i), Body: strings.Repeat("b", 40)}})
		}
		_, err := e.ws.Commit(context.Background(), b)
		require.NoError(t, err)
	}
	ch, cancel := stream(t, e.hs.URL, "", 0)
	defer cancel()
	var got []int64
	for len(got) < n {
		r, ok := next(t, ch)
		require.True(t, ok)
		if r.Data != "" {
			got = append(got, r.ID)
		}
	}
	for i, id := range got {
		require.Equal(t, int64(i+1), id)
	}
}

// TestAGoneClientsStreamEndsWithinAHeartbeat closes a client just after a
// heartbeat: the server notices before the next one is due to be written
// twice (a write to a closed TCP peer succeeds once), and the stream's
// goroutine ends, counted out.
func TestAGoneClientsStreamEndsWithinAHeartbeat(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{})
	const hb = time.Second
	ch, cancel := stream(t, e.hs.URL, "?heartbeat="+hb.String(), -1)
	r, ok := next(t, ch)
	require.True(t, ok)
	require.True(t, r.Comment, "a heartbeat")
	require.Equal(t, 1, e.openStreams())
	cancel()
	gone := time.Now()
	for e.openStreams() != 0 {
		require.Less(t, time.Since(gone), hb+hb/2, "the stream outlived its client by more than a heartbeat")
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTakenOverStreamOverTLS: an HTTP/1.1 stream over TLS takes its TLS
// connection over, delivers, and notices its client go.
func TestTakenOverStreamOverTLS(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{})
	hs := httptest.NewUnstartedServer(e.srv)
	hs.StartTLS() // HTTP/1.1 only: EnableHTTP2 is unset
	t.Cleanup(hs.Close)
	putNotes(t, e.ws, 0, 2)
	ch, cancel, resp := streamWith(t, hs.Client(), hs.URL, "?heartbeat=100ms", 0)
	assert.Equal(t, 1, resp.ProtoMajor)
	assert.True(t, resp.Close, "taken over: Connection: close")
	for _, want := range []int64{1, 2} {
		r, ok := next(t, ch)
		require.True(t, ok)
		assert.Equal(t, want, r.ID)
	}
	cancel()
	require.Eventually(t, func() bool { return e.openStreams() == 0 }, 5*time.Second, 20*time.Millisecond)
}

// plainWriter hides the ResponseWriter's connection: a stream through it
// cannot take the connection over.
type plainWriter struct{ w http.ResponseWriter }

func (p plainWriter) Header() http.Header         { return p.w.Header() }
func (p plainWriter) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p plainWriter) WriteHeader(code int)        { p.w.WriteHeader(code) }
func (p plainWriter) Flush()                      { p.w.(http.Flusher).Flush() }

// TestStreamsThatCannotTakeTheConnectionOverStillStream: over HTTP/2,
// and through a writer that hides its connection, a stream is written
// through the ResponseWriter. It delivers, ends on Drain, and ends with
// its request when the client goes.
func TestStreamsThatCannotTakeTheConnectionOverStillStream(t *testing.T) {
	for _, c := range []struct {
		name  string
		start func(t *testing.T, srv *server.Server) *httptest.Server
		proto int
	}{
		{"HTTP/2", func(t *testing.T, srv *server.Server) *httptest.Server {
			hs := httptest.NewUnstartedServer(srv)
			hs.EnableHTTP2 = true
			hs.StartTLS()
			return hs
		}, 2},
		{"hidden connection", func(t *testing.T, srv *server.Server) *httptest.Server {
			return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				srv.ServeHTTP(plainWriter{w}, r)
			}))
		}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, sqliteDSN(t), server.Options{})
			hs := c.start(t, e.srv)
			t.Cleanup(hs.Close)
			putNotes(t, e.ws, 0, 2)

			ch, cancel, resp := streamWith(t, hs.Client(), hs.URL, "?heartbeat=10s", 0)
			assert.Equal(t, c.proto, resp.ProtoMajor)
			for _, want := range []int64{1, 2} {
				r, ok := next(t, ch)
				require.True(t, ok)
				assert.Equal(t, want, r.ID)
			}
			require.Equal(t, 1, e.openStreams())
			cancel()
			require.Eventually(t, func() bool { return e.openStreams() == 0 }, 5*time.Second, 20*time.Millisecond,
				"the stream ends with its request, long before a heartbeat")

			ch, cancel, _ = streamWith(t, hs.Client(), hs.URL, "", 2)
			defer cancel()
			putNotes(t, e.ws, 2, 1)
			r, ok := next(t, ch)
			require.True(t, ok)
			assert.Equal(t, int64(3), r.ID)
			e.srv.Drain()
			for range ch { // the stream ends
			}
			assert.Equal(t, 0, e.openStreams())
		})
	}
}

// TestEventStreamsPerTokenAreCapped: a token keeps at most
// MaxStreamsPerToken event streams open; one more is 429 too_many, which
// neither another token's streams nor streams without a token meet, and
// closing one of the token's streams frees its place.
func TestEventStreamsPerTokenAreCapped(t *testing.T) {
	const limit = 3
	e := newEnv(t, sqliteDSN(t), server.Options{MaxStreamsPerToken: limit})
	ctx := context.Background()
	ann, _, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "ann"})
	require.NoError(t, err)
	bob, _, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "bob"})
	require.NoError(t, err)

	var closers []func()
	for range limit {
		_, cancel := stream(t, e.hs.URL, "?heartbeat=10ms", -1, bearer(ann)...)
		t.Cleanup(cancel)
		closers = append(closers, cancel)
	}
	err = e.fails(http.StatusTooManyRequests, "GET", "/v1/events?after=0", nil, bearer(ann)...)
	var se *wire.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, wire.CodeTooMany, se.Code)
	assert.Contains(t, se.Detail, "--max-streams-per-token")

	_, cancel := stream(t, e.hs.URL, "", -1, bearer(bob)...)
	t.Cleanup(cancel)
	_, cancel = stream(t, e.hs.URL, "", -1, wire.ActorHeader, "carol")
	t.Cleanup(cancel)
	require.Equal(t, limit+2, e.openStreams())

	// The server notices the closed connection at the stream's next
	// heartbeat, then the place is free again.
	closers[0]()
	require.Eventually(t, func() bool { return e.openStreams() == limit+1 }, 30*time.Second, 10*time.Millisecond)
	_, cancel = stream(t, e.hs.URL, "", -1, bearer(ann)...)
	t.Cleanup(cancel)
	e.fails(http.StatusTooManyRequests, "GET", "/v1/events?after=0", nil, bearer(ann)...)
}

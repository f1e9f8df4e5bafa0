package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// What idle agents cost the server (docs/performance.md, "Idle agents"):
// each test holds many idle clients on one server in this process, reads
// the live Go heap plus goroutine stacks after a GC before and after
// (the growth per client), then checks that every client is still served.
// The clients are bare connections with no goroutine or buffer of their
// own, so what grows is the server's, plus each client's socket (a few
// hundred bytes): the figure errs high.

// idleStreams is how many event streams TestIdleStreamsGetEveryEvent holds.
const idleStreams = 1000

// idleStreamBound is the documented bound on what an idle event stream
// keeps in the server's Go heap and stacks.
const idleStreamBound = 16 << 10

// idleClients is how many idle clients a test holds: n, or
// AGENTSPACE_IDLE_CLIENTS when set (docs/performance.md's figures are
// from 1000).
func idleClients(t *testing.T, n int) int {
	if v := os.Getenv("AGENTSPACE_IDLE_CLIENTS"); v != "" {
		c, err := strconv.Atoi(v)
		require.NoError(t, err, "AGENTSPACE_IDLE_CLIENTS")
		require.Positive(t, c, "AGENTSPACE_IDLE_CLIENTS")
		return c
	}
	return n
}

// live is a reading of the live Go heap and goroutine stacks, in bytes.
type live struct{ heap, stacks int64 }

// liveBytes reads them after GCs that empty the sync.Pools (which keep
// what they hold through one) and return what is free to the OS.
func liveBytes() live {
	time.Sleep(50 * time.Millisecond) // let goroutines just started park
	runtime.GC()
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return live{int64(ms.HeapAlloc), int64(ms.StackInuse)} // #nosec G115 -- memory sizes fit int64
}

// per is the growth from l to m per one of n clients, in bytes: heap
// and stacks, heap, stacks.
func (m live) per(l live, n int) (all, heap, stacks float64) {
	heap = float64(m.heap-l.heap) / float64(n)
	stacks = float64(m.stacks-l.stacks) / float64(n)
	return heap + stacks, heap, stacks
}

// waitParked waits until n goroutines' stacks each hold every one of
// funcs: the clients' handlers, waiting.
func waitParked(t *testing.T, n int, funcs ...string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := parked(funcs...)
		if got == n {
			return
		}
		require.True(t, time.Now().Before(deadline), "%d of %d goroutines in %v after 30s", got, n, funcs)
	}
}

// parked counts the goroutines whose stack holds every one of funcs.
func parked(funcs ...string) int {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	n := 0
	for _, rec := range strings.Split(b.String(), "\n\n") {
		count, _, ok := strings.Cut(rec, " @ ")
		if !ok {
			continue
		}
		all := true
		for _, f := range funcs {
			all = all && strings.Contains(rec, f)
		}
		if c, err := strconv.Atoi(count); err == nil && all {
			n += c
		}
	}
	return n
}

// rawRequest dials e's server and sends one HTTP/1.1 request with no
// body, leaving the connection to the caller.
func rawRequest(t *testing.T, e *env, target string, hdr ...string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", e.hs.Listener.Addr().String())
	require.NoError(t, err)
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\n", target, e.hs.Listener.Addr())
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	b.WriteString("\r\n")
	_, err = io.WriteString(c, b.String())
	require.NoError(t, err)
	return c
}

// readUntil reads c until what it read holds want, and returns it all.
func readUntil(c net.Conn, want string) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var got []byte
	buf := make([]byte, 512)
	for !bytes.Contains(got, []byte(want)) {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return string(got), fmt.Errorf("read %q, want %q: %w", got, want, err)
		}
	}
	return string(got), nil
}

// sseIDs are the ids of the events (not heartbeats) in an SSE body read
// raw, chunk framing and all.
func sseIDs(body string) []int64 {
	var ids []int64
	lines := strings.Split(body, "\n")
	for i, l := range lines {
		if v, ok := strings.CutPrefix(strings.TrimRight(l, "\r"), "id: "); ok && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "data: ") {
			n, _ := strconv.ParseInt(v, 10, 64)
			ids = append(ids, n)
		}
	}
	return ids
}

// TestIdleStreamsGetEveryEvent holds 1,000 idle event streams on one
// server, reports what each keeps, then commits events and checks that
// every stream receives every one, in order, once. The bound asserted is
// the documented one (16 KiB of heap and stacks per idle stream), in a
// build without the race detector.
func TestIdleStreamsGetEveryEvent(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	commit := func(i int) int64 {
		res, err := e.ws.Commit(ctx, workspace.Batch{Actor: "w", Ops: []workspace.Op{workspace.PutNoteOp{Note: workspace.NotePut{Kind: "idle", Key: "k", Body: strconv.Itoa(i)}}}})
		require.NoError(t, err)
		return res.Events[0].Seq
	}
	// Warm up: one stream through one event, so that what the server
	// keeps after its first stream is not counted as the streams'.
	warm := rawRequest(t, e, "/v1/events?after="+strconv.FormatInt(e.head(), 10), "X-Agentspace-Actor", "r")
	_, err := readUntil(warm, "retry: 1000\n\n")
	require.NoError(t, err)
	_, err = readUntil(warm, "id: "+strconv.FormatInt(commit(0), 10)+"\n")
	require.NoError(t, err)
	require.NoError(t, warm.Close())

	head := e.head()
	before := liveBytes()
	conns := make([]net.Conn, idleStreams)
	for i := range conns {
		conns[i] = rawRequest(t, e, "/v1/events?after="+strconv.FormatInt(head, 10), "X-Agentspace-Actor", "r")
		// The stream's first record is written once it is subscribed.
		_, err := readUntil(conns[i], "retry: 1000\n\n")
		require.NoError(t, err)
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	per, heap, stacks := liveBytes().per(before, idleStreams)
	t.Logf("an idle event stream: %.1f KiB of heap and stacks (%.1f + %.1f; %d streams)", per/1024, heap/1024, stacks/1024, idleStreams)

	const events = 5
	var want []int64
	for i := 1; i <= events; i++ {
		want = append(want, commit(i))
	}
	last := "id: " + strconv.FormatInt(want[events-1], 10) + "\n"
	for i, c := range conns {
		body, err := readUntil(c, last)
		require.NoError(t, err, "stream %d", i)
		require.Equal(t, want, sseIDs(body), "stream %d: every event, in order, once", i)
	}
	if !raceBuild {
		// The bound is the server's as built: the race detector's
		// instrumentation grows each stream's goroutine stacks.
		assert.LessOrEqual(t, per, float64(idleStreamBound), "heap and stacks per idle stream")
	}
}

// TestIdleLongPollsAnswerWhenTheMessageComes holds idle inbox long polls
// (GET /v1/inbox?wait=), one per agent, on one server, reports what each
// keeps, then sends each agent a message and checks that every poll
// answers with it.
func TestIdleLongPollsAnswerWhenTheMessageComes(t *testing.T) {
	polls := idleClients(t, 200)
	e := newEnv(t, sqliteDSN(t), server.Options{Logger: slog.New(slog.DiscardHandler), MaxWait: time.Minute})
	ctx := context.Background()
	send := func(i int) {
		_, err := e.ws.Messages().Send(ctx, workspace.Write{Actor: "lead"}, workspace.NewMsg{To: []string{agent(i)}, Subject: "go " + strconv.Itoa(i), Body: "start"})
		require.NoError(t, err)
	}
	// A message goes only to an agent known to the workspace.
	for i := -1; i < polls; i++ {
		_, err := e.ws.Commit(ctx, workspace.Batch{Actor: agent(i), Ops: []workspace.Op{workspace.PutNoteOp{Note: workspace.NotePut{Kind: "idle", Key: agent(i), Body: "here"}}}})
		require.NoError(t, err)
	}
	// Warm up: one poll answered.
	warm := rawRequest(t, e, "/v1/inbox?wait=30s", "X-Agentspace-Actor", agent(-1))
	time.Sleep(50 * time.Millisecond)
	send(-1)
	_, err := readUntil(warm, "go -1")
	require.NoError(t, err)
	require.NoError(t, warm.Close())

	before := liveBytes()
	conns := make([]net.Conn, polls)
	for i := range conns {
		conns[i] = rawRequest(t, e, "/v1/inbox?wait=50s", "X-Agentspace-Actor", agent(i))
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	// A poll is idle once its handler waits for a message to its inbox: wait
	// for every one to (no answer comes before a message).
	waitParked(t, polls, "engine.(*inboxWaiter).wait", "server.(*Server).messageRoutes")
	per, heap, stacks := liveBytes().per(before, polls)
	t.Logf("an idle long poll: %.1f KiB of heap and stacks (%.1f + %.1f; %d polls)", per/1024, heap/1024, stacks/1024, polls)

	// One batch sends them all: each poll wakes once, not once per send.
	sendEachAGo(t, ctx, e.ws, len(conns))
	for i, c := range conns {
		body, err := readUntil(c, `"subject":"go `+strconv.Itoa(i)+`"`)
		require.NoError(t, err, "poll %d", i)
		require.True(t, strings.HasPrefix(body, "HTTP/1.1 200 "), "poll %d: %s", i, body)
	}
}

// TestIdleInboxStreamsGetTheirMessages holds idle inbox streams (GET
// /v1/inbox/stream), one per agent, on one server, reports what each
// keeps, then sends each agent a message and checks that every stream
// gets its own.
func TestIdleInboxStreamsGetTheirMessages(t *testing.T) {
	streams := idleClients(t, 200)
	e := newEnv(t, sqliteDSN(t), server.Options{Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	for i := -1; i < streams; i++ {
		_, err := e.ws.Commit(ctx, workspace.Batch{Actor: agent(i), Ops: []workspace.Op{workspace.PutNoteOp{Note: workspace.NotePut{Kind: "idle", Key: agent(i), Body: "here"}}}})
		require.NoError(t, err)
	}
	head := strconv.FormatInt(e.head(), 10)
	open := func(i int) net.Conn {
		c := rawRequest(t, e, "/v1/inbox/stream?after="+head, "X-Agentspace-Actor", agent(i))
		_, err := readUntil(c, "retry: 1000\n\n")
		require.NoError(t, err)
		return c
	}
	// Warm up: one stream through one message.
	warm := open(-1)
	_, err := e.ws.Messages().Send(ctx, workspace.Write{Actor: "lead"}, workspace.NewMsg{To: []string{agent(-1)}, Subject: "go -1", Body: "start"})
	require.NoError(t, err)
	_, err = readUntil(warm, `"subject":"go -1"`)
	require.NoError(t, err)
	require.NoError(t, warm.Close())

	before := liveBytes()
	conns := make([]net.Conn, streams)
	for i := range conns {
		conns[i] = open(i)
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	per, heap, stacks := liveBytes().per(before, streams)
	t.Logf("an idle inbox stream: %.1f KiB of heap and stacks (%.1f + %.1f; %d streams)", per/1024, heap/1024, stacks/1024, streams)

	sendEachAGo(t, ctx, e.ws, len(conns))
	for i, c := range conns {
		body, err := readUntil(c, `"subject":"go `+strconv.Itoa(i)+`"`)
		require.NoError(t, err, "stream %d", i)
		require.NotContains(t, body, `"subject":"go `+strconv.Itoa(i+1)+`"`, "stream %d: another's message", i)
	}
	if !raceBuild {
		assert.LessOrEqual(t, per, float64(idleStreamBound), "heap and stacks per idle inbox stream")
	}
}

// TestIdleMCPSessionsStayServed opens MCP sessions over streamable HTTP
// (initialize, then the initialized notification, each on a connection
// of its own that closes), reports what an idle session keeps, then what
// each keeps with its standalone notification stream (GET /mcp) open,
// and checks that every session still answers a ping.
func TestIdleMCPSessionsStayServed(t *testing.T) {
	sessions := idleClients(t, 200)
	e := newEnv(t, sqliteDSN(t), server.Options{Logger: slog.New(slog.DiscardHandler), MCP: mcpAt})
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	// Each session is another agent's: one agent keeps at most
	// mcp.DefaultMaxSessionsPerCaller.
	post := func(actor, session, body string) (string, string) {
		req, err := http.NewRequest(http.MethodPost, e.hs.URL+"/mcp", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-Agentspace-Actor", actor)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := hc.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Less(t, resp.StatusCode, 300, "%s", b)
		return resp.Header.Get("Mcp-Session-Id"), string(b)
	}
	actor := func(i int) string { return "m-" + strconv.Itoa(i) }
	open := func(i int) string {
		id, _ := post(actor(i), "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"idle","version":"0"}}}`)
		require.NotEmpty(t, id)
		post(actor(i), id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		return id
	}
	ping := func(i int, id string) {
		_, body := post(actor(i), id, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
		require.Contains(t, body, `"result":{}`)
	}
	ping(-1, open(-1)) // warm up
	hc.CloseIdleConnections()

	before := liveBytes()
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = open(i)
	}
	mid := liveBytes()
	conns := make([]net.Conn, sessions)
	for i, id := range ids {
		conns[i] = rawRequest(t, e, "/mcp", "X-Agentspace-Actor", actor(i), "Accept", "text/event-stream",
			"Mcp-Session-Id", id, "Mcp-Protocol-Version", "2025-06-18")
		head, err := readUntil(conns[i], "\r\n\r\n")
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(head, "HTTP/1.1 200 "), "%s", head)
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	after := liveBytes()
	idle, ih, is := mid.per(before, sessions)
	streamed, sh, ss := after.per(before, sessions)
	t.Logf("an idle MCP session: %.1f KiB of heap and stacks (%.1f + %.1f); with its GET stream open: %.1f KiB (%.1f + %.1f; %d sessions)",
		idle/1024, ih/1024, is/1024, streamed/1024, sh/1024, ss/1024, sessions)
	for i, id := range ids {
		ping(i, id)
	}
}

// TestRevokedTokenEndsItsInboxStream: an inbox stream, which takes its
// connection over as the event stream does, ends with an unauthorized
// error record when its token is revoked, and sends no message committed
// after; another token's inbox stream goes on.
func TestRevokedTokenEndsItsInboxStream(t *testing.T) {
	dsn := sqliteDSN(t)
	e := newEnv(t, dsn, server.Options{RequireToken: true, Heartbeat: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	send := func(to string, i int) {
		_, err := e.ws.Messages().Send(ctx, workspace.Write{Actor: "lead"}, workspace.NewMsg{To: []string{to}, Subject: "m" + strconv.Itoa(i), Body: "b"})
		require.NoError(t, err)
	}
	for _, a := range []string{"ann", "bob", "lead"} {
		_, err := e.ws.Commit(ctx, workspace.Batch{Actor: a, Ops: []workspace.Op{workspace.PutNoteOp{Note: workspace.NotePut{Kind: "idle", Key: a, Body: "here"}}}})
		require.NoError(t, err)
	}
	tok, info, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "ann"})
	require.NoError(t, err)
	other, _, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "bob"})
	require.NoError(t, err)
	ch, cancel := inboxStream(t, e.hs.URL, -1, bearer(tok)...)
	defer cancel()
	kept, cancelKept := inboxStream(t, e.hs.URL, -1, bearer(other)...)
	defer cancelKept()
	send("ann", 1)

	cli, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	defer cli.Close()
	_, err = agents.NewTokens(cli).Revoke(ctx, "admin", info.ID)
	require.NoError(t, err)
	revokedAt := e.head()
	send("ann", 2)
	send("bob", 3)

	got := drainStream(t, ch)
	require.NotEmpty(t, got)
	last := got[len(got)-1]
	assert.Zero(t, last.ID, "the stream ends with an error record")
	assert.Contains(t, last.Data, `"code":"unauthorized"`)
	for _, r := range got[:len(got)-1] {
		assert.Less(t, r.ID, revokedAt, "no message at or after the revocation")
	}
	for {
		r, ok := next(t, kept)
		require.True(t, ok)
		if strings.Contains(r.Data, `"subject":"m3"`) {
			break
		}
	}
}

// sendEachAGo sends agent(i) the message "go i", for i below n, in one
// batch from lead: each agent's wait wakes once.
func sendEachAGo(t *testing.T, ctx context.Context, ws *workspace.Workspace, n int) {
	t.Helper()
	var ops []workspace.Op
	for i := range n {
		ops = append(ops, workspace.SendMessageOp{Message: workspace.NewMsg{To: []string{agent(i)}, Subject: "go " + strconv.Itoa(i), Body: "start"}})
	}
	_, err := ws.Commit(ctx, workspace.Batch{Actor: "lead", Ops: ops})
	require.NoError(t, err)
}

// agent is the name of the idle tests' i-th agent.
func agent(i int) string { return "agent-" + strconv.Itoa(i) }

// Package cluster_test runs several real `wsctl serve` processes on one
// PostgreSQL schema, directly and behind pgbouncer in transaction mode,
// and checks that they act as one server (DESIGN.md "Many servers, one
// store"; docs/postgres.md "Many servers"): a write through any reaches a
// stream on every other; a stream or a long poll resumed on another server
// after its own was killed misses nothing and repeats nothing; a revoked
// token, a stopped or a paused agent is refused on every server; what a
// server reports of an agent is the same on all; an MCP session is bound
// to the server that opened it.
//
// The test only asserts correctness. The times it measures (propagation
// from one server's write to another's stream, how long until the others
// refuse a revoked token) are logged, and docs/postgres.md gives them.
package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
)

// TestThreeServersOnePostgres: three servers on one schema, straight to
// PostgreSQL.
func TestThreeServersOnePostgres(t *testing.T) {
	t.Parallel()
	runCluster(t, pgtest.NewDSN(t))
}

// TestThreeServersBehindPgbouncer: the same, each server's pool through
// pgbouncer in transaction mode (LISTEN on a direct connection, as
// docs/postgres.md says).
func TestThreeServersBehindPgbouncer(t *testing.T) {
	t.Parallel()
	p := pgtest.StartPgbouncer(t, pgtest.PoolerOptions{Mode: "transaction"})
	runCluster(t, p.DSN(t))
}

// The waits of the test: correctness bounds only, far above what is
// measured, so a slow CI machine does not fail it.
const (
	eventually = 30 * time.Second
	loadBefore = 400 * time.Millisecond // load before the kill
	loadAfter  = 600 * time.Millisecond // and after it
)

func runCluster(t *testing.T, dsn string) {
	c := newCluster(t, dsn, 3, "--touch-every", "1h", "--heartbeat", "1s")
	op, _ := c.cliToken(t, "op", "admin")

	t.Run("propagation", func(t *testing.T) { propagation(t, c, op) })
	t.Run("revoke-stop-pause", func(t *testing.T) { refusals(t, c, op) })
	t.Run("agent-state", func(t *testing.T) { agentState(t, c, op) })
	t.Run("mcp-affinity", func(t *testing.T) { mcpAffinity(t, c, op) })
	// Last: it kills server 0.
	t.Run("kill-under-load", func(t *testing.T) { killUnderLoad(t, c, op) })
}

// propagation writes through server 0 and times the event's arrival on a
// stream on each server, server 0's own included: the bound on another
// server is the bound on one.
func propagation(t *testing.T, c *cluster, op string) {
	w, _ := c.token(t, "prop", "")
	streams := make([]*sse, len(c.servers))
	for i, s := range c.servers {
		streams[i] = openStream(t, c.hc, s.URL, "/v1/events?subject_kind=note&heartbeat=1s", op, 0)
	}
	const n = 60
	lat := make([][]time.Duration, len(c.servers))
	for k := range n {
		key := fmt.Sprintf("p-%d", k)
		start := time.Now()
		c.must(t, 0, http.StatusOK, http.MethodPut, "/v1/notes/prop/"+key, w, map[string]string{"body": "x"}, nil)
		for i, st := range streams {
			at, ok := st.waitFor(eventually, func(e workspace.Event) bool { return e.Subject.ID == "prop/"+key })
			if !ok {
				t.Fatalf("the write of %s through server 0 never reached the stream on server %d (%v)", key, i, st.err)
			}
			lat[i] = append(lat[i], at.Sub(start))
		}
	}
	for i := range lat {
		t.Logf("write through server 0 -> stream on server %d: p50 %v p99 %v (n=%d)", i,
			quantile(lat[i], .5).Round(10*time.Microsecond), quantile(lat[i], .99).Round(10*time.Microsecond), n)
	}
}

// refusals revokes a token (wsctl token revoke, on the store), stops one
// agent and pauses another through server 0, and measures how long until
// servers 1 and 2 refuse them: a new request, and a stream already open.
func refusals(t *testing.T, c *cluster, op string) {
	ctx := context.Background()
	others := []int{1, 2}

	// A token revoked: a new request anywhere is refused; a stream open on
	// another server ends.
	rv, rvID := c.cliToken(t, "revoked", "")
	c.must(t, 1, http.StatusOK, http.MethodGet, "/v1/whoami", rv, nil, nil)
	rvStreams := []*sse{openStream(t, c.hc, c.servers[1].URL, "/v1/events", rv, 0), openStream(t, c.hc, c.servers[2].URL, "/v1/events", rv, 0)}
	c.wsctl(t, "token", "revoke", rvID)
	measureRefusal(t, c, "token revoke", time.Now(), rv, others, rvStreams)

	// An agent stopped through server 0.
	st, _ := c.token(t, "stopped", "")
	c.must(t, 1, http.StatusOK, http.MethodPut, "/v1/notes/work/stopped", st, map[string]string{"body": "x"}, nil)
	stStreams := []*sse{openStream(t, c.hc, c.servers[1].URL, "/v1/events", st, 0), openStream(t, c.hc, c.servers[2].URL, "/v1/events", st, 0)}
	c.must(t, 0, http.StatusOK, http.MethodPost, "/v1/agents/stopped/stop", op, map[string]string{"message": "test"}, nil)
	measureRefusal(t, c, "agent stop", time.Now(), st, others, stStreams)
	for i := range c.servers {
		var a agents.Agent
		c.must(t, i, http.StatusOK, http.MethodGet, "/v1/agents/stopped", op, nil, &a)
		if a.State != agents.Gone {
			t.Errorf("server %d says the stopped agent is %s, want gone", i, a.State)
		}
	}

	// An agent paused through server 0: its writes are refused (423) on
	// the others, its reads are not; resumed through server 2, it writes
	// through server 1 again.
	pz, _ := c.token(t, "paused", "")
	c.must(t, 1, http.StatusOK, http.MethodPut, "/v1/notes/work/paused", pz, map[string]string{"body": "x"}, nil)
	c.must(t, 0, http.StatusOK, http.MethodPost, "/v1/agents/paused/pause", op, map[string]string{"message": "hold"}, nil)
	paused := time.Now()
	for _, i := range others {
		at, code, n := firstStatus(ctx, c, i, http.MethodPut, "/v1/notes/work/paused", pz, map[string]string{"body": "y"}, http.StatusLocked)
		if code != http.StatusLocked {
			t.Fatalf("a paused agent's write through server %d: %d, want 423", i, code)
		}
		t.Logf("agent pause through server 0 -> write refused on server %d after %v (%d writes passed before)", i, at.Sub(paused).Round(10*time.Microsecond), n)
		var page workspace.InboxPage
		c.must(t, i, http.StatusOK, http.MethodGet, "/v1/inbox", pz, nil, &page)
		if !page.Paused {
			t.Errorf("server %d's inbox of the paused agent does not say paused", i)
		}
	}
	c.must(t, 2, http.StatusOK, http.MethodPost, "/v1/agents/paused/resume", op, map[string]string{}, nil)
	resumed := time.Now()
	at, code, n := firstStatus(ctx, c, 1, http.MethodPut, "/v1/notes/work/paused", pz, map[string]string{"body": "z"}, http.StatusOK)
	if code != http.StatusOK {
		t.Fatalf("a resumed agent's write through server 1: %d, want 200", code)
	}
	t.Logf("agent resume through server 2 -> write accepted on server 1 after %v (%d refused before)", at.Sub(resumed).Round(10*time.Microsecond), n)
}

// measureRefusal waits until each server in others refuses tok (401) on a
// new request and each stream has ended, and logs how long after since.
func measureRefusal(t *testing.T, c *cluster, what string, since time.Time, tok string, others []int, streams []*sse) {
	t.Helper()
	ctx := context.Background()
	for _, i := range others {
		at, code, n := firstStatus(ctx, c, i, http.MethodGet, "/v1/whoami", tok, nil, http.StatusUnauthorized)
		if code != http.StatusUnauthorized {
			t.Fatalf("%s: server %d still answers the token: %d", what, i, code)
		}
		t.Logf("%s -> new request refused on server %d after %v (%d answered before)", what, i, at.Sub(since).Round(10*time.Microsecond), n)
	}
	for k, st := range streams {
		at, ok := st.endedWithin(eventually)
		if !ok {
			t.Fatalf("%s: the token's stream on server %d is still open after %v", what, others[k], eventually)
		}
		t.Logf("%s -> open stream on server %d ended after %v (%v)", what, others[k], at.Sub(since).Round(10*time.Microsecond), st.err)
	}
}

// firstStatus repeats a request until it answers want (or eventually
// passes) and returns when it did, the last status, and how many answers
// came before it.
func firstStatus(ctx context.Context, c *cluster, i int, method, path, tok string, body any, want int) (time.Time, int, int) {
	deadline := time.Now().Add(eventually)
	for n := 0; ; n++ {
		code, err := c.call(ctx, i, method, path, tok, body, nil)
		if code == want || time.Now().After(deadline) || errors.Is(err, errTransport) {
			return time.Now(), code, n
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// agentState: an agent that claims a task through server 0 and then calls
// servers 1 and 2 is the same agent on all three (state, last seen, its
// claim), and its use of three servers renews its claim no more often
// than its use of one would: the renewal cap (--touch-every) is the
// actor's, not each server's.
func agentState(t *testing.T, c *cluster, op string) {
	ag, _ := c.token(t, "agent", "")
	var task workspace.Task
	c.must(t, 0, http.StatusCreated, http.MethodPost, "/v1/tasks", op, map[string]string{"title": "t"}, &task)
	var claimed workspace.Task
	c.must(t, 0, http.StatusOK, http.MethodPost, "/v1/tasks/claim", ag, map[string]string{"lease": "1h"}, &claimed)
	if claimed.ID != task.ID {
		t.Fatalf("claimed %s, want %s", claimed.ID, task.ID)
	}
	for i := range c.servers {
		c.must(t, i, http.StatusOK, http.MethodGet, "/v1/whoami", ag, nil, nil)
	}
	var first agents.Agent
	for i := range c.servers {
		var a agents.Agent
		c.must(t, i, http.StatusOK, http.MethodGet, "/v1/agents/agent", op, nil, &a)
		if i == 0 {
			first = a
			if a.State != agents.Working || len(a.Claims) != 1 {
				t.Errorf("server 0: the agent is %s with %d claims, want working with 1", a.State, len(a.Claims))
			}
			continue
		}
		if a.State != first.State || !a.LastSeen.Equal(first.LastSeen) || len(a.Claims) != len(first.Claims) {
			t.Errorf("server %d says %s, last seen %v, %d claims; server 0 says %s, %v, %d", i,
				a.State, a.LastSeen, len(a.Claims), first.State, first.LastSeen, len(first.Claims))
		}
	}
	var page workspace.EventPage
	c.must(t, 1, http.StatusOK, http.MethodGet, "/v1/events/history?subject_kind=task&subject_id="+url.QueryEscape(task.ID), op, nil, &page)
	var renewals int
	for _, e := range page.Events {
		if e.Type == workspace.EventTaskUpdated && e.Actor == "agent" {
			renewals++
		}
	}
	if renewals != 0 {
		t.Errorf("the agent's calls on three servers renewed its fresh claim %d times within --touch-every (want 0: the cap is per actor)", renewals)
	}
}

// mcpAffinity: an MCP session (the protocol versions with sessions) lives
// in the server that opened it. Another server answers its id with 404,
// the MCP transport's "session not found", on which a client starts a new
// session; that one works on any server. docs/postgres.md says so.
func mcpAffinity(t *testing.T, c *cluster, op string) {
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	post := func(i int, session, body string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, c.servers[i].URL+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+op)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
	}
	code, session := post(0, "", init)
	if code != http.StatusOK || session == "" {
		t.Fatalf("initialize on server 0: %d, session %q", code, session)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if code, _ := post(0, session, list); code != http.StatusOK {
		t.Fatalf("tools/list in its session on server 0: %d", code)
	}
	if code, _ := post(1, session, list); code != http.StatusNotFound {
		t.Errorf("server 1 answered another server's MCP session with %d, want 404 (session not found: the client starts a new one)", code)
	}
	code, again := post(1, "", init)
	if code != http.StatusOK || again == "" {
		t.Fatalf("a new session on server 1: %d", code)
	}
	if code, _ := post(1, again, list); code != http.StatusOK {
		t.Errorf("tools/list in the new session on server 1: %d", code)
	}
}

// killUnderLoad: writers and message senders work through all three
// servers; an event stream and an inbox long poll run on server 0, which
// is killed (SIGKILL) midway. The writers move to the servers left; the
// stream resumes on server 1 (Last-Event-ID), the long poll on server 2
// (after=). Every acknowledged write is in the log, the stream delivers
// every event of the log once, in order, and the long poll every message
// sent once.
func killUnderLoad(t *testing.T, c *cluster, op string) {
	ctx := context.Background()
	reader, _ := c.token(t, "reader", "")
	c.must(t, 1, http.StatusOK, http.MethodPut, "/v1/notes/work/reader", reader, map[string]string{"body": "here"}, nil)
	sender, _ := c.token(t, "sender", "")
	var h struct {
		Head int64 `json:"head"`
	}
	c.must(t, 1, http.StatusOK, http.MethodGet, "/v1/events/head", op, nil, &h)
	from := h.Head

	var dead atomic.Bool // server 0 was killed
	alive := func(i int) int {
		if i%3 == 0 && dead.Load() {
			return i%3 + 1
		}
		return i % 3
	}

	// The stream, on server 0.
	stream := openStream(t, c.hc, c.servers[0].URL, "/v1/events?heartbeat=100ms", op, from)

	// The long poll, on server 0 until it dies.
	var (
		pollMu   sync.Mutex
		received []string
	)
	stopPoll := make(chan struct{})
	pollDone := make(chan error, 1)
	go func() {
		at, after := 0, ""
		for {
			select {
			case <-stopPoll:
				pollDone <- nil
				return
			default:
			}
			var page workspace.InboxPage
			q := "/v1/inbox?wait=500ms"
			if after != "" {
				q += "&after=" + url.QueryEscape(after)
			}
			code, err := call(ctx, c.hc, c.servers[at].URL, http.MethodGet, q, reader, nil, &page)
			if errors.Is(err, errTransport) {
				at = 2 // resumed on server 2
				continue
			}
			if err != nil || code != http.StatusOK {
				pollDone <- fmt.Errorf("inbox long poll on server %d: %d %v", at, code, err)
				return
			}
			pollMu.Lock()
			for _, m := range page.Messages {
				received = append(received, m.ID)
				after = m.ID
			}
			pollMu.Unlock()
		}
	}()

	// The writers, two on each server, and three senders.
	const writers = 6
	toks := make([]string, writers)
	for i := range toks {
		toks[i], _ = c.token(t, fmt.Sprintf("w%d", i), "")
	}
	var (
		ackMu  sync.Mutex
		acked  = map[string]bool{} // note subject ids
		sent   = map[string]bool{} // message ids
		failed atomic.Int64        // requests without an answer
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d-%d", i, n)
				code, err := c.call(ctx, alive(i+n), http.MethodPut, "/v1/notes/load/"+key, toks[i], map[string]string{"body": key}, nil)
				switch {
				case errors.Is(err, errTransport):
					failed.Add(1)
				case err != nil || code != http.StatusOK:
					t.Errorf("write %s: %d %v", key, code, err)
					return
				default:
					ackMu.Lock()
					acked["load/"+key] = true
					ackMu.Unlock()
				}
			}
		})
	}
	for k := range 3 { // three senders, one starting on each server
		wg.Go(func() {
			for n := k; ; n += 3 {
				select {
				case <-stop:
					return
				default:
				}
				var m workspace.Msg
				code, err := c.call(ctx, alive(n), http.MethodPost, "/v1/messages", sender, map[string]any{"to": []string{"reader"}, "body": fmt.Sprint(n)}, &m)
				switch {
				case errors.Is(err, errTransport):
					failed.Add(1)
				case err != nil || code != http.StatusCreated:
					t.Errorf("send %d: %d %v", n, code, err)
					return
				default:
					ackMu.Lock()
					sent[m.ID] = true
					ackMu.Unlock()
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}

	time.Sleep(loadBefore)
	dead.Store(true)
	c.servers[0].Kill()
	killed := time.Now()
	if _, ok := stream.endedWithin(eventually); !ok {
		t.Fatal("the stream on the killed server did not end")
	}
	before := stream.got()
	resumeAt := stream.lastID()
	resumed := openStream(t, c.hc, c.servers[1].URL, "/v1/events?heartbeat=100ms", op, resumeAt)
	t.Logf("killed server 0 under load; its stream resumed on server 1 after seq %d, %v after the kill", resumeAt, time.Since(killed).Round(time.Millisecond))
	time.Sleep(loadAfter)
	close(stop)
	wg.Wait()

	c.must(t, 1, http.StatusOK, http.MethodGet, "/v1/events/head", op, nil, &h)
	head := h.Head
	if _, ok := resumed.waitFor(eventually, func(e workspace.Event) bool { return e.Seq >= head }); !ok && resumed.lastID() < head {
		t.Fatalf("the resumed stream did not reach the head %d (at %d): %v", head, resumed.lastID(), resumed.err)
	}

	// The log as server 2 reads it, from the stream's start to the head.
	var logged []workspace.Event
	for after := from; after < head; {
		var page workspace.EventPage
		c.must(t, 2, http.StatusOK, http.MethodGet, fmt.Sprintf("/v1/events/history?after=%d&limit=1000", after), op, nil, &page)
		for _, e := range page.Events {
			if e.Seq <= head {
				logged = append(logged, e)
			}
		}
		if page.Next <= after {
			break
		}
		after = page.Next
	}
	inLog := map[string]bool{}
	for _, e := range logged {
		if e.Type == workspace.EventNotePut {
			inLog[e.Subject.ID] = true
		}
	}
	ackMu.Lock()
	nAcked, nSent := len(acked), len(sent)
	for key := range acked {
		if !inLog[key] {
			t.Errorf("the acknowledged write %s is not in the log", key)
		}
	}
	ackMu.Unlock()

	// The stream: before the kill and after the resume, every event of the
	// log once, in order.
	var streamed []workspace.Event
	streamed = append(streamed, before...)
	for _, e := range resumed.got() {
		if e.Seq <= head {
			streamed = append(streamed, e)
		}
	}
	if len(streamed) != len(logged) {
		t.Errorf("the stream delivered %d events of (%d, %d], the log holds %d", len(streamed), from, head, len(logged))
	}
	for k := range min(len(streamed), len(logged)) {
		if streamed[k].Seq != logged[k].Seq {
			t.Errorf("event %d of the stream is seq %d, the log's is %d (a gap or a repeat)", k, streamed[k].Seq, logged[k].Seq)
			break
		}
	}

	// The long poll: every message sent, once.
	deadline := time.Now().Add(eventually)
	for {
		pollMu.Lock()
		n := len(received)
		pollMu.Unlock()
		if n >= nSent || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stopPoll)
	if err := <-pollDone; err != nil {
		t.Error(err)
	}
	pollMu.Lock()
	seen := map[string]int{}
	for _, id := range received {
		seen[id]++
		if seen[id] == 2 {
			t.Errorf("the long poll delivered message %s twice", id)
		}
	}
	pollMu.Unlock()
	ackMu.Lock()
	for id := range sent {
		if seen[id] == 0 {
			t.Errorf("the long poll never delivered the acknowledged message %s", id)
		}
	}
	ackMu.Unlock()
	t.Logf("under load: %d writes and %d messages acknowledged, %d requests unanswered (the kill), %d events streamed across the kill",
		nAcked, nSent, failed.Load(), len(streamed))
	if nAcked == 0 || nSent == 0 || len(before) == 0 {
		t.Errorf("the load did nothing: %d writes, %d messages, %d events before the kill", nAcked, nSent, len(before))
	}
}

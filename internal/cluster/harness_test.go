package cluster_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentspace/agentspace/agents"
	_ "github.com/agentspace/agentspace/backend/postgres"
	"github.com/agentspace/agentspace/internal/wsctltest"
	"github.com/agentspace/agentspace/workspace"
)

// cluster is N `wsctl serve` processes on one store, as a deployment runs
// them: each a process of its own, all with --require-token.
type cluster struct {
	ws      *workspace.Workspace // the test's own handle on the store
	bin     string
	dsn     string
	servers []*wsctltest.Server
	hc      *http.Client
}

// newCluster makes dsn's workspace and starts n servers on it.
func newCluster(t *testing.T, dsn string, n int, args ...string) *cluster {
	t.Helper()
	c := &cluster{bin: wsctltest.Binary(t), dsn: dsn,
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	wsctltest.Init(t, c.bin, dsn)
	ws, err := workspace.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	c.ws = ws
	for range n {
		c.servers = append(c.servers, wsctltest.Serve(t, c.bin, dsn, append([]string{"--require-token"}, args...)...))
	}
	return c
}

// wsctl runs the CLI on the store itself (no server), as an operator does.
func (c *cluster) wsctl(t testing.TB, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(c.bin, append([]string{"--dsn", c.dsn, "--as", "operator"}, args...)...) // #nosec G204 -- the wsctl built for the test
	cmd.Env = wsctltest.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("wsctl %v: %v: %s", args, err, stderr.String())
	}
	return out
}

// token creates a token for actor, as `wsctl token create` does but in
// this process (a process start each would cost the test seconds on a
// loaded machine), and returns its secret and id.
func (c *cluster) token(t testing.TB, actor, role string) (secret, id string) {
	t.Helper()
	secret, tk, err := agents.NewTokens(c.ws).Create(context.Background(), agents.TokenRequest{Actor: actor, Role: role, TTL: time.Hour, By: "operator"})
	if err != nil {
		t.Fatalf("token create: %v", err)
	}
	return secret, tk.ID
}

// cliToken is token through `wsctl token create`.
func (c *cluster) cliToken(t testing.TB, actor, role string) (secret, id string) {
	t.Helper()
	args := []string{"--json", "token", "create", "--actor", actor, "--ttl", "1h"}
	if role != "" {
		args = append(args, "--role", role)
	}
	var out struct {
		Token string `json:"token"`
		ID    string `json:"id"`
	}
	if err := json.Unmarshal(c.wsctl(t, args...), &out); err != nil || out.Token == "" {
		t.Fatalf("token create: %v", err)
	}
	return out.Token, out.ID
}

// errTransport marks a request that got no answer: the server is gone.
var errTransport = errors.New("no answer")

// call sends one request to server i and decodes a 2xx answer into out.
// It returns the status; an error only when no answer came.
func (c *cluster) call(ctx context.Context, i int, method, path, tok string, body, out any) (int, error) {
	return call(ctx, c.hc, c.servers[i].URL, method, path, tok, body, out)
}

func call(ctx context.Context, hc *http.Client, base, method, path, tok string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errTransport, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%w: %v", errTransport, err)
	}
	if resp.StatusCode < 300 && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s %s: %v: %s", method, path, err, b)
		}
	}
	if resp.StatusCode >= 500 {
		// No test here expects a server error: its body says which.
		return resp.StatusCode, fmt.Errorf("%s %s: %s", method, path, bytes.TrimSpace(b))
	}
	return resp.StatusCode, nil
}

// must is call that fails the test unless the answer's status is want.
func (c *cluster) must(t testing.TB, i int, want int, method, path, tok string, body, out any) {
	t.Helper()
	code, err := c.call(context.Background(), i, method, path, tok, body, out)
	if err != nil || code != want {
		t.Fatalf("%s %s on server %d: status %d (want %d), %v", method, path, i, code, want, err)
	}
}

// sse is an open event stream (/v1/events, /v1/inbox/stream).
type sse struct {
	resp   *http.Response
	cancel context.CancelFunc
	done   chan struct{} // closed when the stream ended
	err    error         // why it ended, once done

	mu     sync.Mutex
	events []workspace.Event
	seen   chan struct{} // closed and replaced at each event
	last   int64         // the last id: an event's seq or a heartbeat's head
	ended  time.Time
}

// stream opens path on server base with tok; Last-Event-ID is sent when
// after > 0. It fails t unless the server answers 200.
func openStream(t *testing.T, hc *http.Client, base, path, tok string, after int64) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if after > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("stream %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("stream %s: %d %s", path, resp.StatusCode, b)
	}
	s := &sse{resp: resp, cancel: cancel, done: make(chan struct{}), seen: make(chan struct{}), last: after}
	t.Cleanup(s.close)
	go s.read()
	return s
}

func (s *sse) read() {
	defer close(s.done)
	sc := bufio.NewScanner(s.resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			if id, err := strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64); err == nil {
				s.mu.Lock()
				s.last = id
				s.mu.Unlock()
			}
		case strings.HasPrefix(line, "event: error"):
			data = []byte("error")
		case strings.HasPrefix(line, "data: "):
			if string(data) == "error" {
				s.finish(fmt.Errorf("error event: %s", strings.TrimPrefix(line, "data: ")))
				return
			}
			data = []byte(strings.TrimPrefix(line, "data: "))
		case line == "":
			if len(data) > 0 {
				var e workspace.Event
				if err := json.Unmarshal(data, &e); err == nil && e.Seq > 0 {
					s.mu.Lock()
					s.events = append(s.events, e)
					close(s.seen)
					s.seen = make(chan struct{})
					s.mu.Unlock()
				}
			}
			data = nil
		}
	}
	s.finish(sc.Err())
}

func (s *sse) finish(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = time.Now()
	if err == nil {
		err = io.EOF
	}
	s.err = err
}

func (s *sse) close() {
	s.cancel()
	_ = s.resp.Body.Close()
	<-s.done
}

// lastID is the last id the stream delivered (an event's or a heartbeat's).
func (s *sse) lastID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// got returns a copy of the events delivered so far.
func (s *sse) got() []workspace.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// waitFor waits until the stream delivered an event matching ok (false at
// the timeout or the stream's end) and returns when it saw it.
func (s *sse) waitFor(timeout time.Duration, ok func(workspace.Event) bool) (time.Time, bool) {
	deadline := time.After(timeout)
	from := 0
	for {
		s.mu.Lock()
		for ; from < len(s.events); from++ {
			if ok(s.events[from]) {
				s.mu.Unlock()
				return time.Now(), true
			}
		}
		ch := s.seen
		s.mu.Unlock()
		select {
		case <-ch:
		case <-s.done:
			return time.Time{}, false
		case <-deadline:
			return time.Time{}, false
		}
	}
}

// endedWithin waits up to timeout for the stream to end and returns when
// it did.
func (s *sse) endedWithin(timeout time.Duration) (time.Time, bool) {
	select {
	case <-s.done:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.ended, true
	case <-time.After(timeout):
		return time.Time{}, false
	}
}

// quantile is the q-quantile of ds (sorted in place).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// SSE: Config.Streams event streams (GET /v1/events) held open on one
// server, on a unix socket in front of the DSN's store. It reads the
// server's memory before and after opening them (the growth per idle
// stream), then commits a few events and checks that every stream
// receives every one, recording the latency from each commit's return to
// each stream's receipt. The server runs in a fresh child process when
// Config.Child is set, so that its readings move only with the streams;
// the streams are plain HTTP requests of this process.

// sseEvents is how many events SSE commits to its open streams.
const sseEvents = 5

// DefaultStreams is SSE's stream count.
const DefaultStreams = 1000

// serveAnswer is a "serve" child's first line (the DSN that reaches its
// server) and its answer to each "mem" line.
type serveAnswer struct {
	DSN  string `json:"dsn,omitempty"`
	RSS  int64  `json:"rss,omitempty"`
	Heap int64  `json:"heap,omitempty"`
	Err  string `json:"err,omitempty"`
}

// childServe serves req.DSN's store on a unix socket, says where, and
// answers each "mem" line from the parent with a memory reading, until
// stdin ends; then it drains and stops the server.
func childServe(ctx context.Context, req childRequest, in *bufio.Reader, enc *json.Encoder) error {
	srv, err := startServer(ctx, req.DSN, "unix")
	if err != nil {
		return enc.Encode(serveAnswer{Err: err.Error()})
	}
	defer srv.stop()
	if err := enc.Encode(serveAnswer{DSN: srv.dsn}); err != nil {
		return err
	}
	for {
		line, err := in.ReadString('\n')
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if strings.TrimSpace(line) != "mem" {
			return fmt.Errorf("bench child: unknown request %q", strings.TrimSpace(line))
		}
		rss, heap := readMem()
		if err := enc.Encode(serveAnswer{RSS: rss, Heap: heap}); err != nil {
			return err
		}
	}
}

// streamServer is SSE's server: in a child process or in this one.
type streamServer struct {
	dsn   string
	where string
	mem   func() (rss, heap int64, err error)
	stop  func()
}

func startStreamServer(ctx context.Context, cfg Config) (*streamServer, error) {
	if cfg.Child == nil {
		srv, err := startServer(ctx, cfg.DSN, "unix")
		if err != nil {
			return nil, err
		}
		return &streamServer{dsn: srv.dsn, where: "server in the bench process", stop: srv.stop, mem: func() (int64, int64, error) {
			rss, heap := readMem()
			return rss, heap, nil
		}}, nil
	}
	c, err := startChild(ctx, cfg.Child, childRequest{Op: "serve", DSN: cfg.DSN})
	if err != nil {
		return nil, err
	}
	stop := func() {
		go func() {
			for c.out.Scan() {
			}
			close(c.read)
		}()
		c.stop()
	}
	read := func() (serveAnswer, error) {
		if !c.out.Scan() {
			return serveAnswer{}, fmt.Errorf("server child process ended (%v)", c.out.Err())
		}
		var a serveAnswer
		if err := json.Unmarshal(c.out.Bytes(), &a); err != nil {
			return a, fmt.Errorf("server child process: %w", err)
		}
		if a.Err != "" {
			return a, fmt.Errorf("server child process: %s", a.Err)
		}
		return a, nil
	}
	first, err := read()
	if err != nil {
		stop()
		return nil, err
	}
	return &streamServer{dsn: first.DSN, where: "server in a child process", stop: stop, mem: func() (int64, int64, error) {
		if _, err := io.WriteString(c.stdin, "mem\n"); err != nil {
			return 0, 0, err
		}
		a, err := read()
		return a.RSS, a.Heap, err
	}}, nil
}

// arrival is one event one stream received.
type arrival struct {
	stream int
	seq    int64
	at     time.Time
}

// sseClient opens event streams on a server's unix socket as plain HTTP
// requests, one connection each.
type sseClient struct {
	http *http.Client
	wg   sync.WaitGroup
}

func newSSEClient(dsn string) (*sseClient, error) {
	sock, ok := strings.CutPrefix(dsn, "http+unix://")
	if !ok {
		return nil, fmt.Errorf("SSE: %q is not a unix socket's DSN", dsn)
	}
	d := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{
		DialContext:        func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", sock) },
		DisableCompression: true,
	}
	return &sseClient{http: &http.Client{Transport: tr}}, nil
}

// open starts stream number i after seq after; each event it receives
// goes to got until ctx ends.
func (c *sseClient) open(ctx context.Context, i int, after int64, got chan<- arrival) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://unix/v1/events?after="+strconv.FormatInt(after, 10), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("X-Agentspace-Actor", actor)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		return fmt.Errorf("SSE: GET /v1/events: %s: %s", resp.Status, b)
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		var id int64
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			switch {
			case strings.HasPrefix(line, "id: "):
				id, _ = strconv.ParseInt(strings.TrimSpace(line[4:]), 10, 64)
			case strings.HasPrefix(line, "data: "):
				select {
				case got <- arrival{stream: i, seq: id, at: time.Now()}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return nil
}

// streamRows measures SSE: the memory of cfg.Streams idle streams on one
// server, and the latency of events fanned out to all of them.
func streamRows(ctx context.Context, backend string, cfg Config) ([]Row, error) {
	n := cfg.Streams
	progress := progressFunc(cfg.Progress)
	progress("SSE: starting a server")
	ss, err := startStreamServer(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("SSE: %w", err)
	}
	defer ss.stop()
	cl, err := workspace.Open(ctx, ss.dsn)
	if err != nil {
		return nil, fmt.Errorf("SSE: %w", err)
	}
	defer cl.Close()
	sc, err := newSSEClient(ss.dsn)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer func() { cancel(); sc.wg.Wait() }()
	key := fmt.Sprintf("bench-sse-%d", time.Now().UnixNano())
	commit := func(i int) (int64, error) {
		res, err := cl.Commit(ctx, workspace.Batch{Actor: actor, Ops: []workspace.Op{workspace.PutNoteOp{Note: workspace.NotePut{Kind: "bench", Key: key, Body: strconv.Itoa(i)}}}})
		if err != nil {
			return 0, err
		}
		return res.Events[0].Seq, nil
	}

	// Warm up: one stream through one event, so that what the server
	// keeps after its first stream is not counted as the streams'.
	head, err := cl.Events().Head(ctx)
	if err != nil {
		return nil, err
	}
	warm := make(chan arrival, 4)
	wctx, wcancel := context.WithCancel(sctx)
	if err := sc.open(wctx, 0, head, warm); err != nil {
		wcancel()
		return nil, err
	}
	seq, err := commit(0)
	if err == nil {
		_, err = awaitAll(ctx, warm, 1, seq, time.Now())
	}
	wcancel()
	if err != nil {
		return nil, fmt.Errorf("SSE: warm-up: %w", err)
	}
	time.Sleep(50 * time.Millisecond)
	rss0, heap0, err := ss.mem()
	if err != nil {
		return nil, err
	}

	progress(fmt.Sprintf("SSE: opening %d streams", n))
	if head, err = cl.Events().Head(ctx); err != nil {
		return nil, err
	}
	got := make(chan arrival, n*sseEvents)
	if err := openAll(sctx, sc, n, head, got); err != nil {
		return nil, fmt.Errorf("SSE: %w", err)
	}
	time.Sleep(100 * time.Millisecond) // let the streams' goroutines settle
	rss1, heap1, err := ss.mem()
	if err != nil {
		return nil, err
	}

	progress(fmt.Sprintf("SSE: %d events to %d streams", sseEvents, n))
	var (
		lats    []time.Duration
		longest time.Duration
		spent   time.Duration
	)
	for i := 1; i <= sseEvents; i++ {
		seq, err := commit(i)
		if err != nil {
			return nil, err
		}
		committed := time.Now()
		ls, err := awaitAll(ctx, got, n, seq, committed)
		if err != nil {
			return nil, fmt.Errorf("SSE: event %d: %w", i, err)
		}
		lats = append(lats, ls...)
		last := slices.Max(ls)
		longest = max(longest, last)
		spent += last
	}
	rss2, heap2, err := ss.mem()
	if err != nil {
		return nil, err
	}
	res := result{lat: lats}
	kib := func(b int64) float64 { return float64(b) / 1024 }
	idle := Row{
		Workload: "SSE", Variant: "idle streams", Backend: backend, Concurrency: n,
		RSSKiB: kib(rss1 - rss0), HeapKiB: kib(heap1 - heap0),
	}
	idle.Note = fmt.Sprintf("per stream: heap+stacks %.1f KiB, RSS %.1f KiB (total %+.0f / %+.0f KiB); %s",
		idle.HeapKiB/float64(n), idle.RSSKiB/float64(n), idle.HeapKiB, idle.RSSKiB, ss.where)
	fan := Row{
		Workload: "SSE", Variant: "fan-out", Backend: backend, Concurrency: n,
		P50us: res.percentile(0.50), P99us: res.percentile(0.99),
		Note: fmt.Sprintf("latency: commit -> receipt on each of %d streams; all %d events reached every stream; slowest %.1f ms; server growth since before the streams: heap+stacks %+.0f KiB, RSS %+.0f KiB; %s",
			n, sseEvents, float64(longest.Microseconds())/1000, kib(heap2-heap0), kib(rss2-rss0), ss.where),
	}
	if spent > 0 {
		fan.OpsPerSec = float64(n*sseEvents) / spent.Seconds() // deliveries per second
	}
	if rss0 == 0 {
		idle.RSSKiB, idle.Note = 0, idle.Note+"; no /proc: RSS not read"
	}
	return []Row{idle, fan}, nil
}

// openAll opens n streams after seq after, 16 at a time.
func openAll(ctx context.Context, sc *sseClient, n int, after int64, got chan<- arrival) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		gate  = make(chan struct{}, 16)
	)
	for i := range n {
		gate <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-gate }()
			if err := sc.open(ctx, i, after, got); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// awaitAll waits until each of streams 0..n-1 received seq once, and
// returns each one's latency from committed. Arrivals of other events
// (another writer's) are skipped; a stream receiving seq twice is an error.
func awaitAll(ctx context.Context, got <-chan arrival, n int, seq int64, committed time.Time) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	seen := make([]bool, n)
	timeout := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case a := <-got:
			if a.seq != seq {
				continue
			}
			if a.stream < 0 || a.stream >= n || seen[a.stream] {
				return nil, fmt.Errorf("stream %d received event %d twice", a.stream, seq)
			}
			seen[a.stream] = true
			out = append(out, max(0, a.at.Sub(committed)))
		case <-timeout:
			return nil, fmt.Errorf("%d of %d streams received event %d within 30s", len(out), n, seq)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return out, nil
}

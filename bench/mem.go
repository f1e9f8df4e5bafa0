package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// MEM measures what an idle handle and its subscribers hold: the growth of
// the process's resident set (VmRSS) and of the live Go heap plus goroutine
// stacks, each read after a forced GC that also returns freed pages to the
// OS (debug.FreeOSMemory), so that a reading is what is live, not what the
// allocator kept. RSS includes what the Go heap does not: SQLite's own
// allocations, mapped files, thread stacks.
//
// It runs in a fresh child process when Config.Child is set: there the
// readings move only with what the probe does. In the process that already
// ran the other workloads (no Child, or the Go benchmarks), the same
// readings are taken but the RSS deltas are rougher.

// memEvents is how many events MEM delivers to every subscriber before its
// "after events" reading.
const memEvents = 1000

// memSubs is the subscriber counts MEM measures.
var memSubs = []int{1, 100}

// memReading is one reading of the probe, in bytes; Subs and Events say
// what was attached and delivered when it was taken.
type memReading struct {
	Stage  string `json:"stage"`
	Subs   int    `json:"subs,omitempty"`
	Events int    `json:"events,omitempty"`
	RSS    int64  `json:"rss"`
	Heap   int64  `json:"heap"`
}

// readMem forces a GC, returns freed memory to the OS and reads VmRSS (0
// where /proc is missing) and the live heap plus stacks.
func readMem() (rss, heap int64) {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap = int64(ms.HeapAlloc + ms.StackInuse) // #nosec G115 -- memory sizes fit int64
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, heap
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, heap
		}
	}
	return 0, heap
}

// memProbe opens a writer handle (paying one-time costs: driver set-up,
// statement caches) and warms it up, then takes readings: before and after
// opening one more handle that stays idle; and, for each count in subs,
// before attaching that many subscribers to the writer handle, after, and
// after events, then 2*events, have been committed and delivered to every
// one of them (flat from one to the other if delivery keeps nothing).
func memProbe(ctx context.Context, dsn string, subs []int, events int) ([]memReading, error) {
	var out []memReading
	read := func(stage string, n, ev int) {
		// Let goroutines that were just started or stopped settle.
		time.Sleep(20 * time.Millisecond)
		rss, heap := readMem()
		out = append(out, memReading{Stage: stage, Subs: n, Events: ev, RSS: rss, Heap: heap})
	}
	w, err := workspace.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	key := fmt.Sprintf("bench-mem-%d", os.Getpid())
	put := func(n int) error {
		b := workspace.Batch{Actor: actor}
		for i := range n {
			b.Ops = append(b.Ops, workspace.PutNoteOp{Note: workspace.NotePut{Kind: "bench", Key: fmt.Sprintf("%s-%d", key, i%100), Body: strconv.Itoa(i)}})
		}
		_, err := w.Commit(ctx, b)
		return err
	}
	// Warm the writer up as the measurement will use it, so that what it
	// keeps from writing (statement and page caches, pools' connections)
	// is not counted as the subscribers': one subscriber through as many
	// events.
	if err := withSubscribers(ctx, w, 1, func(waitAll func(context.Context) error) error {
		if err := putEvents(ctx, put, events); err != nil {
			return err
		}
		return waitAll(ctx)
	}); err != nil {
		return nil, err
	}

	read("before handle", 0, 0)
	// A handle of its own store: one sharing w's (Open's default for a
	// second handle on one DSN) would cost next to nothing.
	idle, err := workspace.Open(ctx, dsn, workspace.Options{Private: true})
	if err != nil {
		return nil, err
	}
	defer idle.Close()
	if _, err := idle.Events().Head(ctx); err != nil {
		return nil, err
	}
	read("idle handle", 0, 0)

	// A handle sharing w's store, as a second Open of the DSN in one
	// process gives.
	read("before handle", 0, 0)
	shared, err := workspace.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer shared.Close()
	if _, err := shared.Events().Head(ctx); err != nil {
		return nil, err
	}
	read("idle shared handle", 0, 0)

	for _, n := range subs {
		read("before subscribers", n, 0)
		if err := withSubscribers(ctx, w, n, func(waitAll func(context.Context) error) error {
			read("subscribers", n, 0)
			for k := 1; k <= 2; k++ {
				if err := putEvents(ctx, put, events); err != nil {
					return err
				}
				if err := waitAll(ctx); err != nil {
					return fmt.Errorf("MEM: events not delivered to %d subscribers: %w", n, err)
				}
				read("after events", n, k*events)
			}
			return nil
		}); err != nil {
			return out, err
		}
	}
	return out, nil
}

// putEvents commits n events through put, 100 per batch.
func putEvents(ctx context.Context, put func(n int) error, n int) error {
	const per = 100
	for done := 0; done < n; done += per {
		if err := put(min(per, n-done)); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// withSubscribers attaches n subscribers to ws from its head, each read by
// a goroutine, and runs fn; waitAll in fn returns once every subscriber
// has received the head as it is when waitAll is called.
func withSubscribers(ctx context.Context, ws *workspace.Workspace, n int, fn func(waitAll func(context.Context) error) error) error {
	head, err := ws.Events().Head(ctx)
	if err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		cond = sync.NewCond(&mu)
		seen = make([]int64, n)
		all  []*workspace.Subscription
	)
	defer func() {
		for _, s := range all {
			_ = s.Close()
		}
		wg.Wait()
	}()
	for i := range n {
		s, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: head}})
		if err != nil {
			return err
		}
		all = append(all, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range s.C() {
				if m.Progress {
					continue
				}
				mu.Lock()
				seen[i] = m.Event.Seq
				cond.Broadcast()
				mu.Unlock()
			}
		}()
	}
	waitAll := func(ctx context.Context) error {
		last, err := ws.Events().Head(ctx)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		stop := context.AfterFunc(ctx, func() { mu.Lock(); cond.Broadcast(); mu.Unlock() })
		defer stop()
		mu.Lock()
		defer mu.Unlock()
		for ctx.Err() == nil && minOf(seen) < last {
			cond.Wait()
		}
		return ctx.Err()
	}
	return fn(waitAll)
}

func minOf(s []int64) int64 {
	m := s[0]
	for _, v := range s[1:] {
		m = min(m, v)
	}
	return m
}

// memRows measures MEM, in a child process if cfg.Child is set.
func memRows(ctx context.Context, backend string, cfg Config) ([]Row, error) {
	var (
		rs    []memReading
		err   error
		where = "child process"
	)
	if cfg.Child != nil {
		rs, err = memInChild(ctx, cfg)
	} else {
		where = "in the bench process"
		rs, err = memProbe(ctx, cfg.DSN, memSubs, memEvents)
	}
	if err != nil {
		return nil, fmt.Errorf("MEM: %w", err)
	}
	return memToRows(rs, backend, where), nil
}

func memInChild(ctx context.Context, cfg Config) ([]memReading, error) {
	c, err := startChild(ctx, cfg.Child, childRequest{Op: "mem", DSN: cfg.DSN, Subs: memSubs, Events: memEvents})
	if err != nil {
		return nil, err
	}
	var ans *childMem
	func() {
		defer close(c.read)
		for c.out.Scan() {
			if ans == nil {
				var a childMem
				if json.Unmarshal(c.out.Bytes(), &a) == nil {
					ans = &a
				}
			}
		}
	}()
	c.stop()
	switch {
	case ans == nil:
		return nil, fmt.Errorf("child process gave no answer (exit: %v)", c.cmd.ProcessState)
	case ans.Err != "":
		return nil, fmt.Errorf("child process: %s", ans.Err)
	}
	return ans.Readings, nil
}

// memToRows turns readings into rows: the idle handles, then per
// subscriber count the growth from attaching them and, after events, the
// growth since before attaching them (flat if delivery holds nothing).
func memToRows(rs []memReading, backend, where string) []Row {
	var rows []Row
	row := func(variant string, subs int, from, to memReading, note string) {
		r := Row{
			Workload: "MEM", Variant: variant, Backend: backend, Concurrency: max(1, subs),
			RSSKiB: float64(to.RSS-from.RSS) / 1024, HeapKiB: float64(to.Heap-from.Heap) / 1024,
		}
		r.Note = fmt.Sprintf("RSS %+.0f KiB, heap+stacks %+.0f KiB", r.RSSKiB, r.HeapKiB)
		if subs > 1 {
			r.Note += fmt.Sprintf(" (%.1f KiB per subscriber)", r.HeapKiB/float64(subs))
		}
		r.Note += "; " + note + "; " + where
		if from.RSS == 0 || to.RSS == 0 {
			r.RSSKiB = 0
			r.Note += "; no /proc: RSS not read"
		}
		rows = append(rows, r)
	}
	var before memReading
	for _, x := range rs {
		switch x.Stage {
		case "before handle", "before subscribers":
			before = x
		case "idle handle":
			row("idle handle", 0, before, x, "growth from opening one more handle with a store of its own (used once, then idle)")
		case "idle shared handle":
			row("idle shared handle", 0, before, x, "growth from opening one more handle on the same store (used once, then idle)")
		case "subscribers":
			row("subscribers", x.Subs, before, x, "growth from attaching them to a handle")
		case "after events":
			row(fmt.Sprintf("subscribers after %d events", x.Events), x.Subs, before, x, fmt.Sprintf("growth since before attaching them, after %d events delivered to each", x.Events))
		}
	}
	return rows
}

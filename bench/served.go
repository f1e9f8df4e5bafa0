package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	// Served rows reach the server through the remote backend.
	_ "github.com/agentspace/agentspace/backend/remote"
	"github.com/agentspace/agentspace/internal/gcpace"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// Serving: with Config.Serve, RunAll starts a server (package server) in
// this process in front of the DSN's store, on each listener asked for,
// and runs the workloads through it with clients of backend/remote. The
// baseline of each row is then not the raw driver but the same workload
// in this process on the same store (Config.Handles handles sharing one
// store, as one process's handles do), alternating with the served run
// as ours and raw do. So the ratio says what the HTTP hop costs.

// ServeKinds are the listeners Config.Serve may name.
var ServeKinds = []string{"tcp", "unix"}

// ErrUnknownServe is returned for a Config.Serve entry not in ServeKinds.
var ErrUnknownServe = errors.New("bench: unknown listener")

// ParseServe splits "tcp,unix" into listener kinds, checking each.
func ParseServe(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	for _, k := range strings.Split(s, ",") {
		k = strings.ToLower(strings.TrimSpace(k))
		if !slices.Contains(ServeKinds, k) {
			return nil, fmt.Errorf("%w %q: want some of %s", ErrUnknownServe, k, strings.Join(ServeKinds, ","))
		}
		out = append(out, k)
	}
	return out, nil
}

// served is a server running in this process in front of a store.
type served struct {
	dsn     string         // the DSN that reaches it: http://127.0.0.1:PORT or http+unix://PATH
	updates *atomic.Int64  // its store's transactions
	store   *env           // its one handle on the store
	srv     *server.Server // the handler
	stop    func()
}

// startServer serves storeDSN's store on a fresh listener of kind via
// ("tcp": loopback, "unix": a socket in a temporary directory), as
// `wsctl serve` does: one handle on the store, no tokens (loopback only).
func startServer(ctx context.Context, storeDSN, via string) (*served, error) {
	st, err := newEnv(ctx, storeDSN, 1, false)
	if err != nil {
		return nil, err
	}
	return serveHandle(st, via)
}

// serveHandle serves st's first handle (st is closed with the server).
// While it serves, the process runs at a serving process's GC pace, as
// `wsctl serve` does (gcpace.Serve): the rows measured in this process
// meanwhile run at it too.
func serveHandle(st *env, via string) (*served, error) {
	srv, err := server.New(st.handles[0], server.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		st.close()
		return nil, err
	}
	pace := gcpace.Serve()
	var (
		ln  net.Listener
		dsn string
		dir string
	)
	switch via {
	case "tcp":
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			dsn = "http://" + ln.Addr().String()
		}
	case "unix":
		// A socket's path must fit in 108 bytes: keep it short.
		if dir, err = os.MkdirTemp("", "wsb"); err == nil {
			sock := filepath.Join(dir, "s.sock")
			ln, err = net.Listen("unix", sock)
			dsn = "http+unix://" + sock
		}
	default:
		err = fmt.Errorf("%w %q", ErrUnknownServe, via)
	}
	if err != nil {
		pace()
		st.close()
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
		return nil, err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	hs.RegisterOnShutdown(srv.Drain)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln)
	}()
	return &served{dsn: dsn, updates: st.updates, store: st, srv: srv, stop: func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if hs.Shutdown(sctx) != nil {
			_ = hs.Close()
		}
		<-done
		pace()
		st.close()
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
	}}, nil
}

// runServed is RunAll with cfg.Serve: every workload through a server on
// each listener, next to the same workload in this process.
func runServed(ctx context.Context, cfg Config, emit func(Row)) ([]Row, error) {
	progress := progressFunc(cfg.Progress)
	base, err := newEnv(ctx, cfg.DSN, cfg.Handles, true)
	if err != nil {
		return nil, err
	}
	defer base.close()
	var rows []Row
	out := func(r Row) {
		rows = append(rows, r)
		if emit != nil {
			emit(r)
		}
	}
	for _, via := range cfg.Serve {
		if err := runVia(ctx, cfg, base, via, out); err != nil {
			return rows, fmt.Errorf("via %s: %w", via, err)
		}
	}
	if slices.Contains(cfg.Workloads, "SSE") {
		progress("SSE: measuring")
		rs, err := streamRows(ctx, base.backend, cfg)
		if err != nil {
			return rows, err
		}
		for _, r := range rs {
			out(r)
		}
	}
	progress("")
	return rows, nil
}

// runVia runs cfg's workloads through a server on one listener.
func runVia(ctx context.Context, cfg Config, base *env, via string, out func(Row)) error {
	progress := progressFunc(cfg.Progress)
	progress("starting a server on " + via)
	// The server's handle shares the baseline's store (its writer queue
	// and event hub): one store, whose commits are counted either way,
	// and no second store reading the other's commits from the file or
	// the database.
	h, err := base.handles[0].Attach()
	if err != nil {
		return err
	}
	srv, err := serveHandle(&env{dsn: base.dsn, backend: base.backend, handles: []*workspace.Workspace{h}, updates: base.updates}, via)
	if err != nil {
		_ = h.Close()
		return err
	}
	defer srv.stop()
	e, err := newEnv(ctx, srv.dsn, cfg.Handles, false)
	if err != nil {
		return err
	}
	defer e.close()
	e.backend, e.via, e.updates = base.backend, via, srv.updates
	// The baseline's records of this listener's run, apart from another's.
	base = &env{dsn: base.dsn, backend: base.backend, prefix: base.prefix + "-" + via, handles: base.handles, updates: base.updates, content: base.content}
	r := &inProcess{base: base, served: e, child: cfg.Child}
	for _, name := range cfg.Workloads {
		if name == "MEM" || name == "SSE" {
			continue // MEM is a handle's memory; SSE runs once, on its own server
		}
		progress(name + " via " + via + ": preparing")
		cs, cleanup, err := cases(ctx, e, r, cfg, name)
		if err != nil {
			return err
		}
		for _, c := range cs {
			row, err := runCase(ctx, e, r, c, cfg.Duration, progress)
			if err != nil {
				cleanup()
				return fmt.Errorf("%s %s c=%d: %w", c.workload, c.variant, c.c, err)
			}
			out(viaRow(row, via))
		}
		// The cases' subscribers (W1's is an event stream to this process)
		// go before the processes' rows: their CPU per op is this
		// process's, and would count feeding and reading them.
		cleanup()
		if name == "W1" && cfg.Processes > 0 {
			rows, err := runProcesses(ctx, e, base, cfg, progress)
			if err != nil {
				return fmt.Errorf("W1 %d processes: %w", cfg.Processes, err)
			}
			for _, row := range rows {
				out(row)
			}
		}
	}
	return nil
}

// viaRow marks a row as measured through a server on via, against the
// in-process baseline.
func viaRow(r Row, via string) Row {
	r.Variant = strings.TrimSpace("via " + via + " " + r.Variant)
	base := "baseline (raw columns): the same workload in process on the same store"
	if r.Workload == "W6" && !strings.HasSuffix(r.Variant, "resume") {
		// The server sends the event down the stream as it answers the
		// commit: either may reach this process first.
		base = "0µs: the event came before the commit's answer; " + base
	}
	if r.Note == "" {
		r.Note = base
	} else {
		r.Note += "; " + base
	}
	return r
}

// inProcess is the baseline of served rows: the same workloads on base,
// handles of the store in this process. It is a rawStore so that runCase
// alternates the two as it does ours and raw.
type inProcess struct {
	base   *env
	served *env
	child  func(context.Context) *exec.Cmd
}

func (p *inProcess) op(ctx context.Context, s spec) (op, func(), error) {
	nothing := func() {}
	b := p.base
	switch s.workload {
	case "W1":
		// Ours has a subscriber attached (cases): so has the baseline.
		stop, err := drain(ctx, b.handles[0])
		if err != nil {
			return nil, nil, err
		}
		o, err := w1(ctx, b, "w1", s.c)
		if err != nil {
			stop()
			return nil, nil, err
		}
		return o, stop, nil
	case "W2":
		o, err := w2(ctx, b, s.c)
		return o, nothing, err
	case "W3":
		// The artifacts ours lists, loaded through the server.
		view := &env{dsn: b.dsn, backend: b.backend, prefix: p.served.prefix, handles: b.handles, updates: b.updates, content: b.content}
		return w3(view, s.n), nothing, nil
	case "W4":
		switch s.variant {
		case "":
			return w4(b, s.c), nothing, nil
		case "handover same handle", "handover other handle":
			return w4handover(b, s.variant == "handover other handle"), nothing, nil
		}
	case "W6":
		o, stop, err := w6(ctx, b, s.variant, p.child)
		return o, stop, err
	case "W7":
		o, err := w7(ctx, b, s.c)
		return o, nothing, err
	}
	return nil, nothing, nil
}

func (p *inProcess) walSyncs(context.Context) (int64, bool) { return 0, false }
func (p *inProcess) close()                                 {}

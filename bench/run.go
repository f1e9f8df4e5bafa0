package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentspace/agentspace/workspace/driver"
)

// rounds is how many times ours and the raw baseline alternate within a row,
// so that a burst of noise from other processes hits both alike.
const rounds = 4

// RunAll measures cfg's workloads against cfg.DSN and returns one Row per
// workload, variant and concurrency, in order. emit, if not nil, gets each
// row as soon as it is measured.
func RunAll(ctx context.Context, cfg Config, emit func(Row)) ([]Row, error) {
	cfg = cfg.withDefaults()
	if cfg.Workspaces > 1 {
		if len(cfg.Serve) == 0 {
			return nil, fmt.Errorf("%w: %d workspaces need Serve and Processes", ErrWorkspaces, cfg.Workspaces)
		}
		if err := CheckWorkspaces(cfg.DSN, cfg.Workspaces, cfg.Processes); err != nil {
			return nil, err
		}
	}
	// The opt-in workloads make stores of their own: they run first, and
	// alone when nothing else is named.
	var cli []Row
	for _, w := range []struct {
		name string
		run  func(context.Context, Config, func(Row)) ([]Row, error)
	}{{"CLI", runCLIRows}, {"GROWTH", runGrowthRows}} {
		name, run := w.name, w.run
		if !slices.Contains(cfg.Workloads, name) {
			continue
		}
		rows, err := run(ctx, cfg, emit)
		cli = append(cli, rows...)
		if err != nil {
			return cli, err
		}
		cfg.Workloads = slices.DeleteFunc(slices.Clone(cfg.Workloads), func(w string) bool { return w == name })
		if len(cfg.Workloads) == 0 {
			return cli, nil
		}
	}
	if len(cfg.Serve) > 0 {
		rows, err := runServed(ctx, cfg, emit)
		return append(cli, rows...), err
	}
	progress := progressFunc(cfg.Progress)
	e, err := newEnv(ctx, cfg.DSN, cfg.Handles, cfg.Shared)
	if err != nil {
		return nil, err
	}
	defer e.close()
	r, err := openRaw(ctx, e)
	if err != nil {
		return nil, err
	}
	defer r.close()
	rows := cli
	for _, name := range cfg.Workloads {
		if name == "MEM" || name == "SSE" {
			progress(name + ": measuring")
			measureMem := memRows
			if name == "SSE" {
				measureMem = streamRows
			}
			mem, err := measureMem(ctx, e.backend, cfg)
			if err != nil {
				return rows, err
			}
			for _, row := range mem {
				rows = append(rows, row)
				if emit != nil {
					emit(row)
				}
			}
			continue
		}
		progress(name + ": preparing")
		cs, cleanup, err := cases(ctx, e, r, cfg, name)
		if err != nil {
			return rows, err
		}
		for _, c := range cs {
			row, err := runCase(ctx, e, r, c, cfg.Duration, progress)
			if err != nil {
				cleanup()
				return rows, fmt.Errorf("%s %s c=%d: %w", c.workload, c.variant, c.c, err)
			}
			rows = append(rows, row)
			if emit != nil {
				emit(row)
			}
		}
		cleanup()
	}
	progress("")
	return rows, nil
}

// runCase measures one row for d: ours and raw alternate, each for d/(2*rounds).
func runCase(ctx context.Context, e *env, r rawStore, c bcase, d time.Duration, progress func(string)) (Row, error) {
	label := strings.Join(strings.Fields(fmt.Sprintf("%s %s c=%d", c.workload, c.variant, c.c)), " ")
	progress(label + ": setup")
	ours, raw, cleanup, err := c.setup(ctx)
	if err != nil {
		return Row{}, err
	}
	defer cleanup()
	slice := d / (2 * rounds)
	var (
		o, rw               result
		commits             int64
		oursSyncs, rawSyncs int64
		haveSyncs           = true
		oursCPU, rawCPU     time.Duration
		haveCPU             = true
	)
	for i := range rounds {
		progress(fmt.Sprintf("%s: ours (round %d/%d)", label, i+1, rounds))
		before := e.updates.Load()
		s0, ok0 := r.walSyncs(ctx)
		t0, okt0 := cpuTime()
		res, err := measure(ctx, c.c, slice, 0, ours)
		if err != nil {
			return Row{}, err
		}
		t1, okt1 := cpuTime()
		oursCPU += t1 - t0
		haveCPU = haveCPU && okt0 && okt1
		s1, ok1 := r.walSyncs(ctx)
		commits += e.updates.Load() - before
		oursSyncs += s1 - s0
		haveSyncs = haveSyncs && ok0 && ok1
		o.add(res)
		if raw == nil {
			continue
		}
		progress(fmt.Sprintf("%s: raw (round %d/%d)", label, i+1, rounds))
		s0, ok0 = r.walSyncs(ctx)
		t0, okt0 = cpuTime()
		res, err = measure(ctx, c.c, slice, 0, raw)
		if err != nil {
			return Row{}, fmt.Errorf("raw: %w", err)
		}
		t1, okt1 = cpuTime()
		rawCPU += t1 - t0
		haveCPU = haveCPU && okt0 && okt1
		s1, ok1 = r.walSyncs(ctx)
		rawSyncs += s1 - s0
		haveSyncs = haveSyncs && ok0 && ok1
		rw.add(res)
	}
	row := Row{
		Workload: c.workload, Variant: c.variant, Backend: e.backend, Concurrency: c.c,
		OpsPerSec: o.rate(), P50us: o.percentile(0.50), P99us: o.percentile(0.99), Note: c.note,
	}
	if o.ops > 0 && !c.latency {
		row.CommitsPerOp = float64(commits) / float64(o.ops)
	}
	if raw != nil {
		row.RawOpsPerSec = rw.rate()
		row.RawP50us, row.RawP99us = rw.percentile(0.50), rw.percentile(0.99)
		switch {
		case c.latency && row.P99us > 0:
			row.Ratio = row.RawP99us / row.P99us
		case !c.latency && row.RawOpsPerSec > 0:
			row.Ratio = row.OpsPerSec / row.RawOpsPerSec
		}
	}
	// Other processes' work (a child subscriber, a remote server's) is
	// not in this process's CPU time: only throughput rows, and only
	// where the workspace's parts run here, get the figure (a database
	// server's work is counted for neither side).
	if haveCPU && o.ops > 0 && !c.latency && (e.via != "" || !servedScheme(e.scheme())) {
		row.CPUusPerOp = float64(oursCPU.Microseconds()) / float64(o.ops)
		if rw.ops > 0 {
			row.RawCPUusPerOp = float64(rawCPU.Microseconds()) / float64(rw.ops)
		}
	}
	if haveSyncs && o.ops > 0 && !c.latency {
		row.WALSyncsPerOp = float64(oursSyncs) / float64(o.ops)
		if rw.ops > 0 {
			row.RawWALSyncsPerOp = float64(rawSyncs) / float64(rw.ops)
		}
	}
	return row, nil
}

// Harness is what a backend's benchmark hook gives Run.
type Harness struct {
	// NewDSN returns the DSN of a fresh, empty store (cleaned up by tb).
	NewDSN func(tb testing.TB) string
	// Config tunes sizes; its DSN, Duration and Progress are ignored.
	Config Config
}

// Run runs every workload as sub-benchmarks of b, ours and raw side by
// side: BenchmarkX/W1/c=4/ours and BenchmarkX/W1/c=4/raw. Each reports
// p50-us and p99-us, and ours commits/op.
func Run(b *testing.B, h Harness) {
	cfg := h.Config
	if cfg.Artifacts <= 0 {
		cfg.Artifacts = 10000
	}
	if cfg.Tasks <= 0 {
		cfg.Tasks = 10000
	}
	cfg = cfg.withDefaults()
	cfg.Progress = nil
	ctx := context.Background()
	for _, name := range cfg.Workloads {
		if name == "MEM" {
			b.Run(name, func(b *testing.B) { benchMem(b, h, cfg) })
			continue
		}
		if name == "SSE" {
			b.Run(name, func(b *testing.B) { benchStreams(b, h, cfg) })
			continue
		}
		b.Run(name, func(b *testing.B) {
			e, err := newEnv(ctx, h.NewDSN(b), cfg.Handles, cfg.Shared)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(e.close)
			r, err := openRaw(ctx, e)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(r.close)
			cs, cleanup, err := cases(ctx, e, r, cfg, name)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(cleanup)
			for _, c := range cs {
				sub := fmt.Sprintf("c=%d", c.c)
				if c.variant != "" {
					sub = strings.ReplaceAll(c.variant, " ", "_") + "/" + sub
				}
				b.Run(sub, func(b *testing.B) {
					ours, raw, cleanup, err := c.setup(ctx)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(cleanup)
					b.Run("ours", func(b *testing.B) { benchOp(b, ctx, e, c.c, ours) })
					if raw != nil {
						b.Run("raw", func(b *testing.B) { benchOp(b, ctx, nil, c.c, raw) })
					}
				})
			}
		})
	}
}

// benchMem takes MEM's readings once (in a child process if the harness
// has one) and reports each row's figures as metrics of a sub-benchmark.
func benchMem(b *testing.B, h Harness, cfg Config) {
	cfg.DSN = h.NewDSN(b)
	p, err := driver.ParseDSN(cfg.DSN)
	if err != nil {
		b.Fatal(err)
	}
	rows, err := memRows(context.Background(), backendOf(p.Config.Scheme), cfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range rows {
		b.Run(fmt.Sprintf("%s/subs=%d", strings.ReplaceAll(r.Variant, " ", "_"), r.Concurrency), func(b *testing.B) {
			for b.Loop() {
			}
			b.ReportMetric(r.RSSKiB, "rss-KiB")
			b.ReportMetric(r.HeapKiB, "heap-KiB")
		})
	}
}

// benchStreams takes SSE's readings once (the server in a child process
// if the harness has one) and reports them as metrics of sub-benchmarks.
func benchStreams(b *testing.B, h Harness, cfg Config) {
	cfg.DSN = h.NewDSN(b)
	p, err := driver.ParseDSN(cfg.DSN)
	if err != nil {
		b.Fatal(err)
	}
	rows, err := streamRows(context.Background(), backendOf(p.Config.Scheme), cfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range rows {
		b.Run(fmt.Sprintf("%s/streams=%d", strings.ReplaceAll(r.Variant, " ", "_"), r.Concurrency), func(b *testing.B) {
			for b.Loop() {
			}
			if r.Variant == "idle streams" {
				b.ReportMetric(r.HeapKiB/float64(r.Concurrency), "heap-KiB/stream")
				b.ReportMetric(r.RSSKiB/float64(r.Concurrency), "rss-KiB/stream")
				return
			}
			b.ReportMetric(r.P50us, "p50-us")
			b.ReportMetric(r.P99us, "p99-us")
		})
	}
}

func benchOp(b *testing.B, ctx context.Context, e *env, c int, f op) {
	var before int64
	if e != nil {
		before = e.updates.Load()
	}
	b.ResetTimer()
	res, err := measure(ctx, c, 0, b.N, f)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.percentile(0.50), "p50-us")
	b.ReportMetric(res.percentile(0.99), "p99-us")
	if e != nil && res.ops > 0 {
		b.ReportMetric(float64(e.updates.Load()-before)/float64(res.ops), "commits/op")
	}
}

// progressFunc returns a func that rewrites one status line on w.
func progressFunc(w io.Writer) func(string) {
	if w == nil {
		return func(string) {}
	}
	return func(s string) {
		if s == "" {
			fmt.Fprint(w, "\r\033[K")
			return
		}
		fmt.Fprintf(w, "\r\033[K%s", s)
	}
}

package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

// Workloads lists the workload names in the order they run. MEM is the
// memory an idle handle and its subscribers hold (see memProbe); SSE is
// the memory and fan-out latency of Config.Streams event streams on one
// server (see streamRows).
var Workloads = []string{"W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "MEM", "SSE"}

// OptInWorkloads run only when named: CLI times wsctl commands as whole
// processes (see cliRows), which needs Config.Exe; GROWTH fills a store
// of its own to Config.GrowthEvents and times the same operations at each
// size (see RunGrowth).
var OptInWorkloads = []string{"CLI", "GROWTH"}

// DefaultConcurrency is the goroutine counts each workload runs at.
var DefaultConcurrency = []int{1, 4, 16}

// Config is what RunAll measures and how long.
type Config struct {
	// DSN names the workspace to measure (any registered scheme).
	DSN string
	// Duration is how long each row measures ours and, interleaved, the raw
	// baseline (each gets about half). Default 4s.
	Duration time.Duration
	// Workloads to run (default all of Workloads).
	Workloads []string
	// Concurrency levels (default DefaultConcurrency).
	Concurrency []int
	// Handles is how many workspace handles the goroutines share (default 4).
	Handles int
	// Shared makes the handles share one store, writer queue and event hub,
	// as handles that workspace.Open gives out for one DSN in one process
	// do. By default each handle has a store of its own, as handles in
	// separate processes have.
	Shared bool
	// Artifacts is W3's N: the artifacts under the listed prefix (default 10000).
	Artifacts int
	// Tasks is W5's pool size (default 10000).
	Tasks int
	// PollEvery is how often W8's baseline recipient polls its inbox
	// (default DefaultPollEvery).
	PollEvery time.Duration
	// Settle is how long to wait after loading W3's artifacts or W5's pool
	// before measuring, so that background work the load started (Postgres'
	// autovacuum analyzing the fresh rows) is done, as in a steady state.
	Settle time.Duration
	// Analyze runs ANALYZE on the workspace's tables after loading W3's
	// artifacts or W5's pool (Postgres only), as autovacuum would on a
	// server where it runs: without statistics the planner may pick plans
	// a steady state would not.
	Analyze bool
	// Child, if set, returns a command for another process that runs
	// ServeChild on its stdin and stdout (wsctl re-executes itself as
	// `wsctl bench --serve-child`; a test binary can do the same from
	// TestMain). W6 then also measures the latency to a subscriber in
	// another process ("other process"), and MEM measures in a fresh
	// process instead of this one. The command's context kills it.
	Child func(ctx context.Context) *exec.Cmd
	// Serve lists listeners ("tcp", "unix": ServeKinds) to run the
	// workloads through instead: a server started in this process in front
	// of DSN's store on each, reached by backend/remote clients. Each row's
	// baseline (its raw columns and ratio) is then the same workload in
	// this process on the same store, on Handles handles sharing it. MEM
	// is skipped; SSE runs once.
	Serve []string
	// Processes, with Serve, adds a W1 row per listener run by this many
	// child processes (Child) at c=1 each, against W1 at that
	// concurrency in this process.
	Processes int
	// Servers, with Processes, spreads the children over this many
	// servers on the listener (child i through server i mod Servers),
	// each with a store of its own on DSN, as that many `wsctl serve`
	// processes in front of one database would be (default 1: the
	// listener's one server, which shares the baseline's store). The
	// servers run in this process: its CPU per op is all of theirs.
	Servers int
	// Workspaces, with Processes, spreads the children over this many
	// workspaces on DSN's database (child i on workspace i mod
	// Workspaces), each with Servers servers of its own (child i through
	// its workspace's server i/Workspaces mod Servers): the first is DSN's
	// own, the others its siblings, WorkspaceDSN's schemas on PostgreSQL
	// or files on SQLite, created when missing and kept. Default 1; above
	// 1 it must be at most Processes (CheckWorkspaces).
	Workspaces int
	// ChildProfile, if set, has each of Processes' children write a CPU
	// profile of its whole run to ChildProfile.w1-I (the W1 clients) or
	// ChildProfile.echo-I (the bare transport's clients).
	ChildProfile string
	// Streams is how many event streams SSE holds open on one server
	// (default DefaultStreams).
	Streams int
	// Progress, if set, receives one line per measurement ("\r"-updated).
	Progress io.Writer
	// Exe is the wsctl executable the CLI workload runs.
	Exe string
	// CLITasks is the CLI workload's store size in tasks (default 10000).
	CLITasks int
	// CLIRuns is how many times the CLI workload runs each command
	// (default DefaultCLIRuns).
	CLIRuns int
	// GrowthEvents are the sizes in events GROWTH measures at (default
	// DefaultGrowthEvents).
	GrowthEvents []int64
	// GrowthTasks is the tasks GROWTH's store holds at its largest size
	// (default DefaultGrowthTasks).
	GrowthTasks int
}

func (c Config) withDefaults() Config {
	if c.Duration <= 0 {
		c.Duration = 4 * time.Second
	}
	if len(c.Workloads) == 0 {
		c.Workloads = Workloads
	}
	if len(c.Concurrency) == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Handles <= 0 {
		c.Handles = 4
	}
	if c.Artifacts <= 0 {
		c.Artifacts = 10000
	}
	if c.Tasks <= 0 {
		c.Tasks = 10000
	}
	if c.PollEvery <= 0 {
		c.PollEvery = DefaultPollEvery
	}
	if c.Streams <= 0 {
		c.Streams = DefaultStreams
	}
	if c.Servers <= 0 {
		c.Servers = 1
	}
	if c.Workspaces <= 0 {
		c.Workspaces = 1
	}
	if c.CLITasks <= 0 {
		c.CLITasks = 10000
	}
	if c.CLIRuns <= 0 {
		c.CLIRuns = DefaultCLIRuns
	}
	return c
}

// Row is one measurement: a workload on a backend at one concurrency, ours
// next to the raw baseline. Latencies are per operation, in microseconds.
type Row struct {
	Workload     string  `json:"workload"`
	Variant      string  `json:"variant,omitempty"`
	Backend      string  `json:"backend"`
	Concurrency  int     `json:"concurrency"`
	OpsPerSec    float64 `json:"ops_per_sec"`
	P50us        float64 `json:"p50_us"`
	P99us        float64 `json:"p99_us"`
	RawOpsPerSec float64 `json:"raw_ops_per_sec"`
	// Ratio is OpsPerSec / RawOpsPerSec; for latency workloads (W6, the
	// W4 hand-over) it is the raw p99 over ours. 0 without a baseline.
	Ratio    float64 `json:"ratio"`
	RawP50us float64 `json:"raw_p50_us,omitempty"`
	RawP99us float64 `json:"raw_p99_us,omitempty"`
	// CommitsPerOp is store transactions per op (below 1: group commit).
	CommitsPerOp float64 `json:"commits_per_op,omitempty"`
	// WALSyncsPerOp is Postgres' pg_stat_wal.wal_sync per op, server-wide.
	WALSyncsPerOp    float64 `json:"wal_syncs_per_op,omitempty"`
	RawWALSyncsPerOp float64 `json:"raw_wal_syncs_per_op,omitempty"`
	// RSSKiB and HeapKiB are MEM's figures: the growth of the process's
	// resident set and of its live Go heap plus goroutine stacks, in KiB.
	RSSKiB  float64 `json:"rss_kib,omitempty"`
	HeapKiB float64 `json:"heap_kib,omitempty"`
	// CPUusPerOp and RawCPUusPerOp are the CPU time (user + system) this
	// process spent per op, ours and the baseline's: a figure that moves
	// less than rates on a busy machine. Only rows whose work all runs in
	// this process have them (with Serve: the server, its clients and the
	// store all do).
	CPUusPerOp    float64 `json:"cpu_us_per_op,omitempty"`
	RawCPUusPerOp float64 `json:"raw_cpu_us_per_op,omitempty"`
	// MachineCPUusPerOp is the CPU time every process on the machine
	// spent per op (see MachineCPU): the client processes, the server
	// and a local database included. Only the many-processes rows have
	// it, on Linux.
	MachineCPUusPerOp float64 `json:"machine_cpu_us_per_op,omitempty"`
	// ClientCPUusPerOp is the client processes' CPU time per op, in the
	// many-processes rows: with CPUusPerOp (this process: the server and
	// the store's driver) it splits MachineCPUusPerOp, and the rest is
	// the database server's and the kernel's.
	ClientCPUusPerOp float64 `json:"client_cpu_us_per_op,omitempty"`
	// MachineBusy is the share of the machine's CPUs that were busy
	// meanwhile (0 to 1): below 1, the row waited rather than ran out
	// of CPU.
	MachineBusy float64 `json:"machine_busy,omitempty"`
	// Note says what the numbers mean where the columns do not.
	Note string `json:"note,omitempty"`
}

// op is one operation of a workload, run by goroutine w. It returns the
// latency to record, or a negative one to record its own duration.
type op func(ctx context.Context, w int) (time.Duration, error)

// plain makes an op whose latency is its duration.
func plain(f func(ctx context.Context, w int) error) op {
	return func(ctx context.Context, w int) (time.Duration, error) { return -1, f(ctx, w) }
}

// errStop ends a measurement early without failing it (a pool ran dry).
var errStop = errors.New("bench: stop")

// result is what measure saw.
type result struct {
	ops     int
	elapsed time.Duration
	lat     []time.Duration
}

func (r *result) add(o result) {
	r.ops += o.ops
	r.elapsed += o.elapsed
	r.lat = append(r.lat, o.lat...)
}

func (r result) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.ops) / r.elapsed.Seconds()
}

// percentile returns the p-th percentile (0..1) of r's latencies in µs.
func (r result) percentile(p float64) float64 {
	if len(r.lat) == 0 {
		return 0
	}
	s := slices.Clone(r.lat)
	slices.Sort(s)
	i := int(p * float64(len(s)-1))
	return float64(s[i].Nanoseconds()) / 1e3
}

// measure runs f from c goroutines until d has passed (d > 0) or, with
// d == 0, n operations in all. The first error stops every goroutine.
func measure(ctx context.Context, c int, d time.Duration, n int, f op) (result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		left     atomic.Int64
		all      result
	)
	left.Store(int64(n))
	deadline := time.Now().Add(d)
	start := time.Now()
	for w := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 1024)
			for ctx.Err() == nil {
				if d > 0 {
					if time.Now().After(deadline) {
						break
					}
				} else if left.Add(-1) < 0 {
					break
				}
				t0 := time.Now()
				l, err := f(ctx, w)
				if err != nil {
					mu.Lock()
					if firstErr == nil && ctx.Err() == nil && !errors.Is(err, errStop) {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					break
				}
				if l < 0 {
					l = time.Since(t0)
				}
				lat = append(lat, l)
			}
			mu.Lock()
			all.ops += len(lat)
			all.lat = append(all.lat, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	all.elapsed = time.Since(start)
	return all, firstErr
}

// env is one run's workspace side: handles on the store, a prefix that
// keeps the run's records apart, and a count of store transactions.
type env struct {
	dsn     string
	backend string
	prefix  string
	handles []*workspace.Workspace
	// updates counts the store transactions of the handles' stores (or,
	// through a server, of the server's store).
	updates *atomic.Int64
	content []byte
	// via is "tcp" or "unix" when the handles are clients of a server
	// (Config.Serve), "" in process.
	via string
}

func newEnv(ctx context.Context, dsn string, handles int, shared bool) (*env, error) {
	p, err := driver.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	e := &env{dsn: dsn, backend: backendOf(p.Config.Scheme), prefix: "bench-" + hex.EncodeToString(id[:]), updates: new(atomic.Int64)}
	e.content = make([]byte, 1024)
	_, _ = rand.Read(e.content)
	for i := range handles {
		var (
			ws  *workspace.Workspace
			err error
		)
		if shared && i > 0 {
			ws, err = e.handles[0].Attach()
		} else {
			ws, err = e.open(ctx)
		}
		if err != nil {
			e.close()
			return nil, err
		}
		e.handles = append(e.handles, ws)
	}
	return e, nil
}

// backendOf names the backend of a DSN scheme in rows.
func backendOf(scheme string) string {
	if scheme == "postgresql" {
		return "postgres"
	}
	return scheme
}

// scheme is the scheme of e's DSN.
func (e *env) scheme() string {
	scheme, _, _ := strings.Cut(e.dsn, ":")
	return scheme
}

// servedScheme reports whether scheme is a server's (backend/remote).
func servedScheme(scheme string) bool {
	return scheme == "http" || scheme == "https" || scheme == "http+unix"
}

// open opens one more handle whose store transactions are counted. A
// scheme with no store driver (a server's: http, https, http+unix) gets a
// plain workspace.Open: its commits happen, and are counted, in the server.
func (e *env) open(ctx context.Context) (*workspace.Workspace, error) {
	p, err := driver.ParseDSN(e.dsn)
	if err != nil {
		return nil, err
	}
	if servedScheme(p.Config.Scheme) {
		return workspace.Open(ctx, e.dsn, workspace.Options{Private: true})
	}
	p.Config.Logger = slog.Default()
	p.Config.PollInterval = p.Options.PollInterval
	if p.Config.PollInterval <= 0 {
		p.Config.PollInterval = workspace.DefaultPollInterval
	}
	st, err := engine.OpenStore(ctx, p)
	if err != nil {
		return nil, driver.RedactError(fmt.Errorf("open %s: %w", workspace.RedactDSN(e.dsn), err), e.dsn)
	}
	return engine.New(countStore(st, e.updates), p.Options), nil
}

func (e *env) close() {
	for _, ws := range e.handles {
		_ = ws.Close()
	}
	e.handles = nil
}

// ws is the handle goroutine w uses.
func (e *env) ws(w int) *workspace.Workspace { return e.handles[w%len(e.handles)] }

// body returns 1 KiB of content that differs for every n (identical
// content would be deduplicated).
func (e *env) body(w, n int) []byte {
	b := slices.Clone(e.content)
	copy(b, fmt.Sprintf("%08d:%08d:", w, n))
	return b
}

// countingStore counts Update calls: the store transactions (commits) the
// engine asks for, to report commits per op.
type countingStore struct {
	driver.Store
	n *atomic.Int64
}

func (s countingStore) Update(ctx context.Context, fn func(tx driver.Tx) error) error {
	s.n.Add(1)
	return s.Store.Update(ctx, fn)
}

// UpdateHinted keeps the HintedUpdater capability of the store it counts
// (a plain Update for a store without it).
func (s countingStore) UpdateHinted(ctx context.Context, hints []driver.ReadHint, fn func(tx driver.Tx) error) error {
	hu, ok := s.Store.(driver.HintedUpdater)
	if !ok {
		return s.Update(ctx, fn)
	}
	s.n.Add(1)
	return hu.UpdateHinted(ctx, hints, fn)
}

// ViewHinted keeps the HintedViewer capability of the store it counts
// (reads are not counted).
func (s countingStore) ViewHinted(ctx context.Context, hints []driver.ReadHint, fn func(tx driver.ReadTx) error) error {
	if hv, ok := s.Store.(driver.HintedViewer); ok {
		return hv.ViewHinted(ctx, hints, fn)
	}
	return s.Store.View(ctx, fn)
}

// JoinsLate keeps the LateJoiner capability of the store it counts.
func (s countingStore) JoinsLate() bool { return driver.JoinsLate(s.Store) }

// notifyingStore keeps the Notifier capability of the store it counts.
type notifyingStore struct {
	countingStore
	driver.Notifier
}

func countStore(st driver.Store, n *atomic.Int64) driver.Store {
	c := countingStore{Store: st, n: n}
	if nt, ok := st.(driver.Notifier); ok {
		return notifyingStore{countingStore: c, Notifier: nt}
	}
	return c
}

// ErrUnknownWorkload is returned for a workload name not in Workloads.
var ErrUnknownWorkload = errors.New("bench: unknown workload")

// ParseWorkloads splits "W1,W4" into names, checking each.
func ParseWorkloads(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	for _, w := range strings.Split(s, ",") {
		w = strings.ToUpper(strings.TrimSpace(w))
		if !slices.Contains(Workloads, w) && !slices.Contains(OptInWorkloads, w) {
			return nil, fmt.Errorf("%w %q: want some of %s", ErrUnknownWorkload, w, strings.Join(slices.Concat(Workloads, OptInWorkloads), ","))
		}
		out = append(out, w)
	}
	return out, nil
}

package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentspace/agentspace/backup"
	"github.com/agentspace/agentspace/workspace"
)

// GROWTH: is the workspace flat as it grows (issue 53 item 4)? A fresh
// store of the DSN's backend is filled, in batches, to each of a list of
// sizes in events; at each size the operations an agent and a dashboard
// do all day are timed (W1, W2, W5, the board, a page of events near the
// head, a resumed stream), each against its figure at the smallest size,
// and then the operations an operator runs over the whole store (verify,
// backup, export, gc), each stated per million events.

// DefaultGrowthEvents are the sizes GROWTH measures at, in events.
var DefaultGrowthEvents = []int64{10_000, 1_000_000}

// DefaultGrowthTasks is how many tasks the store holds at its largest size.
const DefaultGrowthTasks = 100_000

// MaxJSONGrowthEvents is the largest size GROWTH fills a json store to:
// each json handle holds every record and the whole event log in memory,
// and opening one reads them all (docs/json-layout.md: comfortable to
// about 10,000 artifacts), so a million events is not a size it is meant
// to hold; sqlite and postgres are measured beyond.
const MaxJSONGrowthEvents = 100_000

// GrowthFlat is the most a GROWTH row's p50 may be of its p50 at the
// smallest size for the operation to count as flat (issue 53): a row
// above it says so in its note.
const GrowthFlat = 1.3

// growthBatch is how many ops one fill batch holds.
const growthBatch = 500

// boardScan is how many tasks of each open status the dashboard's board
// reads (server/dashboard's boardScan).
const boardScan = 1000

// GrowthConfig configures RunGrowth.
type GrowthConfig struct {
	// DSN names the backend: RunGrowth makes a fresh store like it (a
	// temporary file or directory, or a temporary schema of its Postgres
	// database) and removes it at the end.
	DSN string
	// Sizes are the store sizes in events to measure at, ascending
	// (default DefaultGrowthEvents).
	Sizes []int64
	// Tasks is how many tasks the store holds at the largest size
	// (default DefaultGrowthTasks); smaller sizes hold their share.
	Tasks int
	// Duration is how long each operation is measured at each size
	// (default 2s).
	Duration time.Duration
	// Dir, if set, is where a file store and the backups are made
	// (default the system's temporary directory).
	Dir string
	// Progress, if set, receives one line per step ("\r"-updated).
	Progress io.Writer
}

// GrowthSizeError is returned when a backend cannot hold a size GROWTH
// was asked for, before anything is filled.
type GrowthSizeError struct {
	Backend string
	Events  int64 // asked for
	Max     int64 // the most it measures this backend at
	Why     string
}

func (e *GrowthSizeError) Error() string {
	return fmt.Sprintf("bench: GROWTH measures a %s store up to %d events, not %d: %s", e.Backend, e.Max, e.Events, e.Why)
}

func (c GrowthConfig) withDefaults() GrowthConfig {
	if len(c.Sizes) == 0 {
		c.Sizes = DefaultGrowthEvents
	}
	if c.Tasks <= 0 {
		c.Tasks = DefaultGrowthTasks
	}
	if c.Duration <= 0 {
		c.Duration = 2 * time.Second
	}
	return c
}

// growthMeasures are the operations timed at each size, in row order. W5
// goes last: it claims and completes the store's tasks, and may finish
// every ready one at a small size, which would leave the board nothing
// to read there.
var growthMeasures = []string{"W1", "W2", "board", "events after head-100", "resume from head-1000", "W5"}

// growthAdmin are the whole-store operations timed once at each size.
var growthAdmin = []string{"verify", "backup", "export", "gc"}

// RunGrowth fills a fresh store of cfg.DSN's backend to each of cfg.Sizes
// and returns, for each size, one row per operation an agent or a
// dashboard does (W1 a 1 KiB artifact update, W2 a get by name, W5 claim +
// done from the store's tasks, the board's reads of the open tasks, a page
// of 100 events after head-100, a stream resumed from head-1000 to its
// first event), at one goroutine, each row's Note giving its p50 against
// the smallest size's; then one row per whole-store operation (Verify,
// backup.Write, Export to io.Discard, GC keeping 2 versions of each
// artifact), its P50 the one run's time and its Note the time per million
// events. The fill is batches of growthBatch ops: task creates (cfg.Tasks
// in all at the largest size, in W5's shape), artifact updates and note
// puts; on PostgreSQL the store's tables are analyzed after each fill.
func RunGrowth(ctx context.Context, cfg GrowthConfig) ([]Row, error) {
	cfg = cfg.withDefaults()
	if !slices.IsSorted(cfg.Sizes) || cfg.Sizes[0] <= 0 {
		return nil, fmt.Errorf("bench: GROWTH sizes %v: want positive sizes in ascending order", cfg.Sizes)
	}
	scheme, _, _ := strings.Cut(cfg.DSN, ":")
	backend := backendOf(scheme)
	if largest := cfg.Sizes[len(cfg.Sizes)-1]; backend == "json" && largest > MaxJSONGrowthEvents {
		return nil, &GrowthSizeError{Backend: backend, Events: largest, Max: MaxJSONGrowthEvents,
			Why: "each json handle holds every record and the whole event log in memory, and opening one reads them all (docs/json-layout.md); measure sqlite or postgres at this size"}
	}
	progress := progressFunc(cfg.Progress)
	defer progress("")
	dsn, cleanup, err := freshStore(backend, cfg.DSN, cfg.Dir, "bench_growth")
	if err != nil {
		return nil, fmt.Errorf("GROWTH: the workload makes its own store: %w", err)
	}
	defer cleanup()
	e, err := newEnv(ctx, dsn, 1, false)
	if err != nil {
		return nil, err
	}
	defer e.close()
	// The whole-store operations go through a handle of workspace.Open's,
	// as wsctl's do: the env's counting store hides the file copy that
	// backup.Write makes of a SQLite store.
	admin, err := workspace.Open(ctx, dsn, workspace.Options{Private: true})
	if err != nil {
		return nil, err
	}
	defer func() { _ = admin.Close() }()
	g := &growth{cfg: cfg, e: e, plain: admin, base: e.prefix, label: map[string]string{"bench": e.prefix + "-growth"}, progress: progress}
	var rows []Row
	first := map[string]float64{}
	for _, size := range cfg.Sizes {
		if err := g.fill(ctx, size); err != nil {
			return rows, err
		}
		// What autovacuum does after a bulk load on a server where it
		// runs (the fill is months of writes in minutes): without it a
		// server with autovacuum off, as CI's, plans on no statistics.
		if err := analyzePostgres(ctx, e); err != nil {
			return rows, err
		}
		sized := fmt.Sprintf("at %s events", countLabel(size))
		for _, name := range growthMeasures {
			progress(fmt.Sprintf("GROWTH %s %s: measuring", name, sized))
			row, err := g.measure(ctx, name, size)
			if err != nil {
				return rows, fmt.Errorf("GROWTH %s %s: %w", name, sized, err)
			}
			row.Backend, row.Variant = backend, name+" "+sized
			if base, ok := first[name]; !ok {
				first[name] = row.P50us
				row.Note = fmt.Sprintf("p50 the base of the ratios; %d tasks%s", g.tasks, g.analyzed())
			} else if base > 0 {
				ratio := row.P50us / base
				row.Note = fmt.Sprintf("p50 %.2fx the p50 at %s events; %d tasks%s", ratio, countLabel(cfg.Sizes[0]), g.tasks, g.analyzed())
				if ratio > GrowthFlat {
					row.Note += fmt.Sprintf("; over %.1fx", GrowthFlat)
				}
			}
			rows = append(rows, row)
		}
		for _, name := range growthAdmin {
			progress(fmt.Sprintf("GROWTH %s %s: running", name, sized))
			row, err := g.admin(ctx, name)
			if err != nil {
				return rows, fmt.Errorf("GROWTH %s %s: %w", name, sized, err)
			}
			row.Backend, row.Variant = backend, name+" "+sized
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// growth is one RunGrowth's store and what its fill made.
type growth struct {
	cfg      GrowthConfig
	e        *env
	plain    *workspace.Workspace // workspace.Open's, for the whole-store operations
	base     string               // the env's own prefix
	label    map[string]string
	progress func(string)
	// artifacts the fill updates, created by the first fill.
	artifacts []string
	ids       []string // tasks created, in order
	tasks     int      // len(ids)
	n         int      // fill ops so far (content and keys differ by it)
}

// fill commits batches until the log's head reaches size: task creates
// keep the tasks at their share of cfg.Tasks, and the rest of each batch
// is artifact updates and note puts, half and half.
func (g *growth) fill(ctx context.Context, size int64) error {
	ws := g.e.handles[0]
	largest := g.cfg.Sizes[len(g.cfg.Sizes)-1]
	if g.artifacts == nil {
		n := int(min(max(g.cfg.Sizes[0]/4, 1), 1000))
		b := workspace.Batch{Actor: actor}
		for i := range n {
			name := fmt.Sprintf("%s/growth/%04d", g.base, i)
			g.artifacts = append(g.artifacts, name)
			b.Ops = append(b.Ops, workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: name, Kind: "output", Content: g.content()}})
		}
		if _, err := ws.Commit(ctx, b); err != nil {
			return fmt.Errorf("GROWTH: fill: %w", err)
		}
	}
	for {
		head, err := ws.Events().Head(ctx)
		if err != nil {
			return err
		}
		if head >= size {
			return nil
		}
		g.progress(fmt.Sprintf("GROWTH: filling to %s events: %d", countLabel(size), head))
		left := int(min(size-head, growthBatch))
		b := workspace.Batch{Actor: actor}
		want := int(int64(g.cfg.Tasks) * min(head+int64(left), largest) / largest)
		for k := g.tasks; k < want && len(b.Ops) < left; k++ {
			t := workspace.NewTask{Title: fmt.Sprintf("growth task %d", k), Labels: g.label}
			if k >= 1000 {
				t.DependsOn = []string{g.ids[k-1000]}
			}
			b.Ops = append(b.Ops, workspace.CreateTaskOp{Task: t})
		}
		created := len(b.Ops)
		rest := left - created
		updates := min((rest+1)/2, len(g.artifacts))
		for i := range updates {
			name := g.artifacts[(g.n+i)%len(g.artifacts)]
			b.Ops = append(b.Ops, workspace.UpdateArtifactOp{Ref: workspace.ArtifactRef{Name: name}, Change: workspace.ArtifactChange{Content: g.content()}})
		}
		for len(b.Ops) < left {
			g.n++
			b.Ops = append(b.Ops, workspace.PutNoteOp{Note: workspace.NotePut{Kind: "bench", Key: fmt.Sprintf("%s-growth-%d", g.base, g.n%10000), Body: strconv.Itoa(g.n)}})
		}
		g.n += updates
		res, err := ws.Commit(ctx, b)
		if err != nil {
			return fmt.Errorf("GROWTH: fill: %w", err)
		}
		for _, r := range res.Results[:created] {
			g.ids = append(g.ids, r.Task.ID)
		}
		g.tasks = len(g.ids)
	}
}

// analyzed is the note's mark of a PostgreSQL store analyzed after each
// fill.
func (g *growth) analyzed() string {
	if g.e.backend == "postgres" {
		return "; ANALYZE after the fill"
	}
	return ""
}

// content is a small body that differs for every call.
func (g *growth) content() []byte {
	g.n++
	return []byte(fmt.Sprintf("growth content %d", g.n))
}

// measure times one of growthMeasures for cfg.Duration at one goroutine.
func (g *growth) measure(ctx context.Context, name string, size int64) (Row, error) {
	e := g.e
	// W1 and W2 make artifacts of their own under the prefix: one per size.
	e.prefix = fmt.Sprintf("%s-%d", g.base, size)
	var (
		o   op
		err error
	)
	switch name {
	case "W1":
		o, err = w1(ctx, e, "growth", 1)
	case "W2":
		o, err = w2(ctx, e, 1)
	case "W5":
		o = claimDone(e, g.label)
	case "board":
		o = plain(func(ctx context.Context, w int) error {
			for _, st := range []workspace.TaskStatus{workspace.TaskPending, workspace.TaskInProgress, workspace.TaskBlocked, workspace.TaskFailed} {
				if _, err := e.ws(w).Tasks().List(ctx, workspace.TaskFilter{Status: st, Limit: boardScan}); err != nil {
					return err
				}
			}
			return nil
		})
	case "events after head-100":
		// Nothing writes while it is measured: the head is read once, as
		// `wsctl events --after N` is one read.
		var head int64
		if head, err = e.ws(0).Events().Head(ctx); err != nil {
			return Row{}, err
		}
		o = plain(func(ctx context.Context, w int) error {
			p, err := e.ws(w).Events().Read(ctx, workspace.EventQuery{AfterSeq: max(0, head-100), Limit: 100})
			if err == nil && len(p.Events) != int(min(head, 100)) {
				err = fmt.Errorf("read %d events after head-100, want 100", len(p.Events))
			}
			return err
		})
	case "resume from head-1000":
		o, _, err = w6(ctx, e, "resume", nil)
	}
	if err != nil {
		return Row{}, err
	}
	t0, ok0 := cpuTime()
	res, err := measure(ctx, 1, g.cfg.Duration, 0, o)
	if err != nil {
		return Row{}, err
	}
	t1, ok1 := cpuTime()
	row := Row{Workload: "GROWTH", Concurrency: 1, OpsPerSec: res.rate(), P50us: res.percentile(0.50), P99us: res.percentile(0.99)}
	if ok0 && ok1 && res.ops > 0 && e.backend != "postgres" {
		row.CPUusPerOp = float64((t1 - t0).Microseconds()) / float64(res.ops)
	}
	return row, nil
}

// admin runs one of growthAdmin once over the whole store.
func (g *growth) admin(ctx context.Context, name string) (Row, error) {
	ws := g.plain
	head, err := ws.Events().Head(ctx)
	if err != nil {
		return Row{}, err
	}
	note := ""
	t0 := time.Now()
	switch name {
	case "verify":
		var r workspace.VerifyReport
		if r, err = ws.Verify(ctx); err == nil && r.BrokenSeq != 0 {
			err = fmt.Errorf("verify: broken at seq %d", r.BrokenSeq)
		}
	case "backup":
		var dir string
		if dir, err = os.MkdirTemp(g.cfg.Dir, "bench_growth_backup"); err != nil {
			return Row{}, err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		var r backup.Result
		if r, err = backup.Write(ctx, ws, dir, backup.Options{}); err == nil {
			note = fmt.Sprintf("%s, %d bytes; ", r.Format, r.Bytes)
		}
	case "export":
		var s workspace.ArchiveStats
		if s, err = ws.Export(ctx, io.Discard, workspace.ArchiveOptions{}); err == nil {
			note = fmt.Sprintf("%d events; ", s.Events)
		}
	case "gc":
		var r workspace.GCReport
		if r, err = ws.GC(ctx, workspace.GCPolicy{Actor: actor, KeepVersions: 2}); err == nil {
			note = fmt.Sprintf("keep 2 versions: removed %d versions in %d batches; ", r.Versions.Count, r.Batches)
		}
	}
	took := time.Since(t0)
	if err != nil {
		return Row{}, err
	}
	us := float64(took.Microseconds())
	perMillion := took.Seconds() * 1e6 / float64(max(head, 1))
	return Row{
		Workload: "GROWTH", Concurrency: 1, OpsPerSec: float64(head) / max(took.Seconds(), 1e-9), P50us: us, P99us: us,
		Note: fmt.Sprintf("%sone run over %d events: %.2f s per million events (ops/s: events per second)", note, head, perMillion),
	}, nil
}

// countLabel writes n as 500, 3k, 10k, 1M, 2.5M.
func countLabel(n int64) string {
	switch {
	case n >= 1_000_000 && n%100_000 == 0:
		return strings.TrimSuffix(strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64), ".0") + "M"
	case n >= 1000 && n%100 == 0:
		return strings.TrimSuffix(strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64), ".0") + "k"
	}
	return strconv.FormatInt(n, 10)
}

// runGrowthRows runs the GROWTH workload for RunAll.
func runGrowthRows(ctx context.Context, cfg Config, emit func(Row)) ([]Row, error) {
	rows, err := RunGrowth(ctx, GrowthConfig{DSN: cfg.DSN, Sizes: cfg.GrowthEvents, Tasks: cfg.GrowthTasks, Duration: cfg.Duration, Progress: cfg.Progress})
	if emit != nil {
		for _, r := range rows {
			emit(r)
		}
	}
	return rows, err
}

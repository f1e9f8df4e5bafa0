package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"time"
)

// Record is what one docs run measured (RunDocs, `wsctl bench docs`): the
// machine, the date, the command, and every run's rows. The tables of
// docs/performance.md and bench/README.md are rendered from a Record
// committed beside them (RenderRegion), so that they are one run's and
// nobody's hand edits.
type Record struct {
	// Date is when the run began, UTC, to the minute.
	Date string `json:"date"`
	// Command is the command line that made the record, credentials
	// redacted.
	Command string `json:"command"`
	// Build is the commit the measuring binary was built from, as Go
	// stamps it ("" when it was not built from a repository).
	Build string `json:"build,omitempty"`
	// Duration is how long each row measured (ours and the baseline's
	// slices together).
	Duration string `json:"duration"`
	// Machine is where it ran.
	Machine Machine `json:"machine"`
	// Runs are the runs of the docs plan, in the order they ran.
	Runs []RecordRun `json:"runs"`
}

// RecordRun is one `wsctl bench` run of a docs run: its settings and its
// rows.
type RecordRun struct {
	// Name names the run in the plan: "sqlite", "postgres shared",
	// "sqlite 100k", "postgres served".
	Name string `json:"name"`
	// Backend is the store's backend: sqlite, json or postgres.
	Backend string `json:"backend"`
	// Workloads, Concurrency, Handles, Shared, Artifacts and Tasks are
	// the run's Config, as `wsctl bench` takes them.
	Workloads   []string `json:"workloads"`
	Concurrency []int    `json:"concurrency"`
	Handles     int      `json:"handles"`
	Shared      bool     `json:"shared,omitempty"`
	Artifacts   int      `json:"artifacts"`
	Tasks       int      `json:"tasks"`
	// Serve is the listener the served runs go through ("unix"), with
	// Processes client processes for W1 and Streams for SSE.
	Serve     string `json:"serve,omitempty"`
	Processes int    `json:"processes,omitempty"`
	Streams   int    `json:"streams,omitempty"`
	// CLIRuns is how many times the CLI workload ran each command.
	CLIRuns int `json:"cli_runs,omitempty"`
	// GrowthEvents are the sizes the GROWTH workload measured at; Tasks
	// is then the tasks at the largest.
	GrowthEvents []int64 `json:"growth_events,omitempty"`
	// Rows are what the run measured, in order.
	Rows []Row `json:"rows"`
}

// ReadRecord decodes a Record written by WriteRecord (or `wsctl bench docs
// --json`).
func ReadRecord(r io.Reader) (*Record, error) {
	var rec Record
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("bench record: %w", err)
	}
	if rec.Date == "" || len(rec.Runs) == 0 {
		return nil, fmt.Errorf("%w: no date or no runs", ErrRecord)
	}
	return &rec, nil
}

// WriteRecord encodes rec, indented, one row to a line's worth of fields.
func WriteRecord(w io.Writer, rec *Record) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rec)
}

// ErrRecord is returned for a record that cannot be rendered.
var ErrRecord = errors.New("bench: bad record")

// DocsConfig is what RunDocs measures: the workloads on each backend in
// process (sqlite and json stores under Dir, a Postgres schema per run on
// Postgres), then through a server.
type DocsConfig struct {
	// Dir is where the SQLite and json stores are made, a fresh
	// directory per run, removed after it (default: the system's
	// temporary directory). Its file system is the record's Storage.
	Dir string
	// Postgres is the DSN of a Postgres database: each run makes a
	// schema of its own there and drops it after.
	Postgres string
	// Duration is how long each row measures (default 4s).
	Duration time.Duration
	// Processes is how many client processes the served runs' W1 row
	// runs (default 16).
	Processes int
	// Streams is how many event streams the served runs' SSE holds open
	// (default DefaultStreams).
	Streams int
	// Artifacts is W3's N in the main runs (default 10000); BigArtifacts
	// its N in the SQL backends' runs of W3 alone (default 100000).
	Artifacts, BigArtifacts int
	// Tasks is W5's pool (default 10000).
	Tasks int
	// PollEvery is how often W8's baseline recipient polls (default
	// DefaultPollEvery).
	PollEvery time.Duration
	// Child and Exe are Config's: the benchmark's child processes (W6
	// other process, MEM, SSE, the served runs' processes).
	Child func(ctx context.Context) *exec.Cmd
	Exe   string
	// Progress, if set, gets a line per run and RunAll's progress.
	Progress io.Writer
	// Command and Build go into the record as they are.
	Command, Build string
	// CLI makes the run the CLI region's instead (see cliPlan): the CLI
	// workload alone, CLIRuns times each command, at Tasks tasks directly
	// and through a server on loopback TCP, and at CLIBigTasks tasks.
	// It needs no Postgres.
	CLI                  bool
	CLIRuns, CLIBigTasks int
	// Growth makes the run the growth region's instead (see growthPlan):
	// the GROWTH workload at GrowthEvents (default DocsGrowthEvents)
	// with GrowthTasks tasks at the largest (default DefaultGrowthTasks),
	// on SQLite and PostgreSQL, and on json up to MaxJSONGrowthEvents.
	Growth       bool
	GrowthEvents []int64
	GrowthTasks  int
}

func (c DocsConfig) withDefaults() DocsConfig {
	if c.Duration <= 0 {
		c.Duration = 4 * time.Second
	}
	if c.Processes <= 0 {
		c.Processes = 16
	}
	if c.Streams <= 0 {
		c.Streams = DefaultStreams
	}
	if c.Artifacts <= 0 {
		c.Artifacts = 10000
	}
	if c.BigArtifacts <= 0 {
		c.BigArtifacts = 100000
	}
	if c.Tasks <= 0 {
		c.Tasks = 10000
	}
	if c.CLIRuns <= 0 {
		c.CLIRuns = DefaultCLIRuns
	}
	if c.CLIBigTasks <= 0 {
		c.CLIBigTasks = 100000
	}
	if len(c.GrowthEvents) == 0 {
		c.GrowthEvents = DocsGrowthEvents
	}
	if c.GrowthTasks <= 0 {
		c.GrowthTasks = DefaultGrowthTasks
	}
	return c
}

// ErrNoPostgres is returned by RunDocs without DocsConfig.Postgres: the
// docs' tables have a Postgres column.
var ErrNoPostgres = errors.New("bench: a docs run needs a Postgres DSN")

// docsWorkloads are the in-process runs' workloads; the served runs add
// SSE and leave MEM out (Config.Serve skips it).
var docsWorkloads = []string{"W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "MEM"}

// DocsPlan is the runs a docs run makes, in order, without rows: on each
// backend the workloads with 4 private handles, then W1 with the handles
// sharing one store; W3 alone at BigArtifacts on the SQL backends; then
// on SQLite and Postgres every workload through a server on a unix
// socket, W1 also from Processes client processes.
func DocsPlan(cfg DocsConfig) []RecordRun {
	cfg = cfg.withDefaults()
	if cfg.CLI {
		return cliPlan(cfg)
	}
	if cfg.Growth {
		return growthPlan(cfg)
	}
	levels := slices.Clone(DefaultConcurrency)
	base := func(name, backend string) RecordRun {
		return RecordRun{Name: name, Backend: backend, Workloads: docsWorkloads, Concurrency: levels,
			Handles: 4, Artifacts: cfg.Artifacts, Tasks: cfg.Tasks}
	}
	var plan []RecordRun
	for _, b := range []string{"sqlite", "postgres", "json"} {
		plan = append(plan, base(b, b))
		shared := base(b+" shared", b)
		shared.Workloads, shared.Shared = []string{"W1"}, true
		plan = append(plan, shared)
		if b != "json" {
			big := base(b+" 100k", b)
			big.Workloads, big.Artifacts = []string{"W3"}, cfg.BigArtifacts
			plan = append(plan, big)
		}
	}
	for _, b := range []string{"sqlite", "postgres"} {
		s := base(b+" served", b)
		s.Workloads = []string{"W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "SSE"}
		s.Serve, s.Processes, s.Streams = "unix", cfg.Processes, cfg.Streams
		plan = append(plan, s)
	}
	return plan
}

// RunDocs runs DocsPlan, each run on a fresh store, and returns the record
// the docs' tables are rendered from. On an error it returns what it
// measured so far with it.
func RunDocs(ctx context.Context, cfg DocsConfig) (*Record, error) {
	cfg = cfg.withDefaults()
	if cfg.CLI && cfg.Growth {
		return nil, errors.New("bench: a docs run is a CLI run or a growth run, not both")
	}
	if cfg.Postgres == "" && !cfg.CLI {
		return nil, ErrNoPostgres
	}
	rec := &Record{
		Date:     time.Now().UTC().Format("2006-01-02 15:04"),
		Command:  cfg.Command,
		Build:    cfg.Build,
		Duration: cfg.Duration.String(),
		Machine:  DescribeMachine(ctx, cfg.Dir, cfg.Postgres),
	}
	if cfg.CLI {
		rec.Duration = ""
	}

	plan := DocsPlan(cfg)
	for i, run := range plan {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "\r\033[Kdocs: run %d/%d (%s)\n", i+1, len(plan), run.Name)
		}
		rows, err := runDocsRun(ctx, cfg, run)
		run.Rows = rows
		rec.Runs = append(rec.Runs, run)
		if err != nil {
			return rec, fmt.Errorf("docs run %s: %w", run.Name, err)
		}
	}
	rec.Machine.LoadAfter = loadAverage()
	return rec, nil
}

// runDocsRun runs one run of the plan on a fresh store.
func runDocsRun(ctx context.Context, cfg DocsConfig, run RecordRun) ([]Row, error) {
	dsn, cleanup, err := freshStore(run.Backend, cfg.Postgres, cfg.Dir, "bench_docs")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	bc := Config{
		DSN: dsn, Duration: cfg.Duration, Workloads: run.Workloads, Concurrency: run.Concurrency,
		Handles: run.Handles, Shared: run.Shared, Artifacts: run.Artifacts, Tasks: run.Tasks,
		Processes: run.Processes, Streams: run.Streams, Child: cfg.Child, Exe: cfg.Exe, Progress: cfg.Progress,
		PollEvery: cfg.PollEvery, CLITasks: run.Tasks, CLIRuns: run.CLIRuns,
		GrowthEvents: run.GrowthEvents, GrowthTasks: run.Tasks,
	}
	if run.Serve != "" {
		bc.Serve = []string{run.Serve}
	}
	return RunAll(ctx, bc, nil)
}

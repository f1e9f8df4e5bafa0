package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/bench"
)

func (a *app) benchCmd() *cobra.Command {
	var (
		duration   time.Duration
		workloads  string
		conc       string
		artifacts  int
		tasks      int
		handles    int
		shared     bool
		settle     time.Duration
		analyze    bool
		cpuProfile string
		serveChild bool
		serve      string
		processes  int
		servers    int
		workspaces int
		streams    int
		cliTasks   int
		cliRuns    int
		growthEv   string
		growthTask int
		baseline   string
		rounds     int
	)
	c := &cobra.Command{
		Use:   "bench",
		Short: "Measure the workspace against the raw driver (W1-W8)",
		Long: `bench runs the benchmark workloads of agentspace against the workspace the
DSN names, each next to a raw baseline (the bare driver doing the same minimal
statements on the same kind of store, in its own tables: a sibling file for
sqlite, a temporary schema for postgres, a sibling directory for json),
interleaved in the same run, and prints ops/s, p50, p99 and the ratio to the
baseline. The machine is noisy: compare ratios, not absolute times.

It writes records, events and tasks under names and labels starting with
"bench-", so point it at a scratch workspace when you can.

Workloads: W1 conditional 1 KiB artifact update (with a subscriber), W2 get
by name, W3 one page of 100 by prefix among --artifacts, W4 lease acquire +
release (and the hand-over latency to a waiter), W5 claim + done from a pool
of --tasks with dependencies, W6 event latency (commit to subscriber: same
handle, other handle, on Postgres another pool, another process), W7 a
three-op batch, W8 a message's hand-over (send to the recipient's waiting
inbox read, against the recipient polling every second), MEM the memory an idle handle and 1 and 100 subscribers hold
(RSS and Go heap growth, measured in a fresh wsctl process), SSE --streams
event streams held open on one server (its memory per idle stream, in a
fresh wsctl process, and the latency of events fanned out to all of them).
Only when named: CLI, the commands a shell agent runs (version, task add,
claim, done, artifact put, task ls, task ls --ready) each timed --cli-runs
times as a whole wsctl process against a fresh store of the DSN's backend
holding --cli-tasks tasks (and, with --serve, through a server on each
listener): P50 is the process's wall time, CPU/OP its own CPU time.
Also only when named: GROWTH fills a fresh store of the DSN's backend to each of
--growth-events (holding --growth-tasks tasks at the largest) and at each
size times, for --duration each, W1, W2, W5, the board's reads of the open
tasks, a page of 100 events after head-100 and a stream resumed from
head-1000 (each with its p50 against the smallest size's), then verify,
backup, export and gc over the whole store (each per million events). A
json store is measured up to 100,000 events.

The DSN may be a server's (http://, https://, http+unix://): the workloads
then run through it, without a raw baseline. --serve tcp,unix instead starts
a server in this process in front of the DSN's store, on loopback TCP and on
a unix socket, and runs each workload through it next to the same workload
in this process on the same store: the ratio is what the HTTP hop costs.
With --processes N, W1 is also run by N wsctl processes at c=1 each through
the server, against c=N in this process; --servers M spreads them over M
servers, each a store of its own on the DSN; --workspaces K spreads them
over K workspaces on the DSN's database (process i on workspace i mod K),
each with --servers servers of its own: the DSN's workspace and its
siblings, on PostgreSQL the schemas <ws_schema>_w2 to _wK, on SQLite the
files <name>-w2.db to -wK.db next to it, created when missing and kept.

--baseline-binary OLD compares this wsctl with another build: each workload
(default W1-W7) runs --rounds times on each binary, the two alternating (and
which goes first), each run a 'bench --json' of that one workload on a fresh
store of the DSN's backend (next to the DSN's file, or a schema of its
database, removed after), with the flags given here; it prints each row's
figure on both (ops/s, or p50 for latency rows), the new build's speed
against the old round by round, and "slower" where it was slower in every
round.

'wsctl bench docs' runs every backend and regenerates the docs' tables.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if serveChild {
				return bench.ServeChild(ctx, a.stdin, a.stdout)
			}
			ws, err := bench.ParseWorkloads(workloads)
			if err != nil {
				return usageErrorf("--workloads: %v", err)
			}
			via, err := bench.ParseServe(serve)
			if err != nil {
				return usageErrorf("--serve: %v", err)
			}
			if processes < 0 || processes > 256 {
				return usageErrorf("--processes: %d is not a count between 0 and 256", processes)
			}
			if processes > 0 && len(via) == 0 {
				return usageErrorf("--processes needs --serve")
			}
			if servers < 1 || servers > 64 {
				return usageErrorf("--servers: %d is not a count between 1 and 64", servers)
			}
			if servers > 1 && processes == 0 {
				return usageErrorf("--servers needs --processes")
			}
			if workspaces < 1 || workspaces > bench.MaxWorkspaces {
				return usageErrorf("--workspaces: %d is not a count between 1 and %d", workspaces, bench.MaxWorkspaces)
			}
			if workspaces > 1 && processes == 0 {
				return usageErrorf("--workspaces needs --processes")
			}
			if streams < 1 || streams > 10000 {
				return usageErrorf("--streams: %d is not a count between 1 and 10000", streams)
			}
			levels, err := parseLevels(conc)
			if err != nil {
				return err
			}
			sizes, err := parseGrowthEvents(growthEv)
			if err != nil {
				return err
			}
			if growthTask < 1 {
				return usageErrorf("--growth-tasks: %d is not a positive count", growthTask)
			}
			res, err := a.resolve()
			if err != nil {
				return err
			}
			a.dsn = res.DSN
			if baseline != "" {
				if cpuProfile != "" {
					return usageErrorf("--cpuprofile profiles this process, which --baseline-binary leaves idle")
				}
				if rounds < 1 || rounds > 100 {
					return usageErrorf("--rounds: %d is not a count between 1 and 100", rounds)
				}
				return a.benchCompare(ctx, cmd, res.DSN, baseline, ws, rounds)
			}
			if err := bench.CheckWorkspaces(res.DSN, workspaces, processes); err != nil {
				return usageErrorf("--workspaces: %w", err)
			}
			if cpuProfile != "" {
				stopProfile, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stopProfile()
			}
			cfg := bench.Config{
				DSN: res.DSN, Duration: duration, Workloads: ws, Concurrency: levels,
				Handles: handles, Shared: shared, Settle: settle, Analyze: analyze, Artifacts: artifacts, Tasks: tasks,
				Child: a.benchChild(), Progress: a.stderr,
				Serve: via, Processes: processes, Servers: servers, Workspaces: workspaces, Streams: streams, ChildProfile: cpuProfile,
				CLITasks: cliTasks, CLIRuns: cliRuns, GrowthEvents: sizes, GrowthTasks: growthTask,
			}
			if exe, err := os.Executable(); err == nil {
				cfg.Exe = exe
			}
			if a.jsonOut {
				enc := json.NewEncoder(a.stdout)
				_, err := bench.RunAll(ctx, cfg, func(r bench.Row) { _ = enc.Encode(r) })
				return err
			}
			rows, err := bench.RunAll(ctx, cfg, nil)
			if len(rows) > 0 {
				if werr := bench.WriteTable(a.stdout, rows); err == nil {
					err = werr
				}
			}
			return err
		}),
	}
	f := c.Flags()
	f.DurationVar(&duration, "duration", 4*time.Second, "how long each row measures (ours and the baseline share it)")
	f.StringVar(&workloads, "workloads", "", "comma-separated workloads to run, e.g. W1,W4 (default all)")
	f.StringVar(&conc, "concurrency", "1,4,16", "comma-separated goroutine counts")
	f.IntVar(&artifacts, "artifacts", 10000, "W3: artifacts under the listed prefix")
	f.IntVar(&tasks, "tasks", 10000, "W5: tasks in each pool")
	f.IntVar(&handles, "handles", 4, "workspace handles the goroutines share (group commit coalesces within a handle)")
	f.BoolVar(&shared, "shared", false, "the handles share one store, as handles Open gives out for one DSN in one process do (default: one store each, as in separate processes)")
	f.DurationVar(&settle, "settle", 0, "wait this long after loading W3/W5 data before measuring (lets autovacuum analyze it)")
	f.BoolVar(&analyze, "analyze", false, "postgres: ANALYZE the workspace's tables after loading W3/W5 data (what autovacuum would do)")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (and, with --processes, one per child process next to it)")
	f.StringVar(&serve, "serve", "", "run the workloads through a server started here in front of the DSN's store: tcp, unix or tcp,unix")
	f.IntVar(&processes, "processes", 0, "with --serve: also run W1 from this many wsctl processes at c=1 each")
	f.IntVar(&servers, "servers", 1, "with --processes: spread the processes over this many servers, each a store of its own on the DSN (many servers, one store)")
	f.IntVar(&workspaces, "workspaces", 1, "with --processes: spread the processes over this many workspaces on the DSN's database (postgres: schemas <ws_schema>_w2.., sqlite: files <name>-w2.db..), each with --servers servers")
	f.IntVar(&streams, "streams", bench.DefaultStreams, "SSE: event streams held open on one server")
	f.IntVar(&cliTasks, "cli-tasks", 10000, "CLI: tasks in the store the commands run against")
	f.IntVar(&cliRuns, "cli-runs", bench.DefaultCLIRuns, "CLI: how many times each command runs")
	f.StringVar(&growthEv, "growth-events", "10000,1000000", "GROWTH: comma-separated store sizes in events to measure at, ascending")
	f.IntVar(&growthTask, "growth-tasks", bench.DefaultGrowthTasks, "GROWTH: tasks in the store at its largest size")
	f.BoolVar(&serveChild, "serve-child", false, "internal: be the benchmark's child process (W6 other process, MEM)")
	f.StringVar(&baseline, "baseline-binary", "", "compare with this other wsctl build: run each workload on both in turn, on fresh stores, and print the new build's speed against it")
	f.IntVar(&rounds, "rounds", 3, "with --baseline-binary: how many times each workload runs on each binary")
	_ = f.MarkHidden("serve-child")
	c.AddCommand(a.benchTeamCmd(), a.benchDocsCmd())
	return c
}

// comparedFlags are the bench flags --baseline-binary passes on to both
// binaries when they are given.
var comparedFlags = []string{"duration", "concurrency", "artifacts", "tasks", "handles", "shared", "settle", "analyze",
	"serve", "processes", "servers", "workspaces", "streams", "cli-tasks", "cli-runs", "growth-events", "growth-tasks"}

// benchCompare is bench --baseline-binary: the workloads on the old
// binary and this one in turn (package bench does the work), with the
// bench flags the user gave passed to both.
func (a *app) benchCompare(ctx context.Context, cmd *cobra.Command, dsn, old string, workloads []string, rounds int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if _, err := os.Stat(old); err != nil {
		return usageErrorf("--baseline-binary: %v", err)
	}
	var args []string
	for _, name := range comparedFlags {
		if cmd.Flags().Changed(name) {
			args = append(args, "--"+name+"="+cmd.Flags().Lookup(name).Value.String())
		}
	}
	cs, err := bench.Compare(ctx, bench.CompareConfig{
		Old: old, New: self, DSN: dsn, Workloads: workloads, Rounds: rounds, Args: args, Progress: a.stderr,
	})
	if a.jsonOut {
		enc := json.NewEncoder(a.stdout)
		for _, c := range cs {
			_ = enc.Encode(c)
		}
		return err
	}
	if len(cs) > 0 {
		if werr := bench.WriteComparison(a.stdout, cs); err == nil {
			err = werr
		}
	}
	return err
}

// benchChild re-executes this wsctl as the benchmark's child process. The
// request, DSN included, goes over the child's stdin, not its arguments.
func (a *app) benchChild() func(ctx context.Context) *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		return nil
	}
	return func(ctx context.Context) *exec.Cmd {
		cmd := exec.CommandContext(ctx, self, "bench", "--serve-child") // #nosec G204 -- this very executable, fixed arguments
		cmd.Stderr = a.stderr
		return cmd
	}
}

func parseLevels(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 || n > 1024 {
			return nil, usageErrorf("--concurrency: %q is not a count between 1 and 1024", p)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseGrowthEvents parses --growth-events: sizes in events, ascending.
func parseGrowthEvents(s string) ([]int64, error) {
	var out []int64
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.ReplaceAll(strings.TrimSpace(p), "_", ""), 10, 64)
		if err != nil || n < 1 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, usageErrorf("--growth-events: %q is not a count of events above the one before it", p)
		}
		out = append(out, n)
	}
	return out, nil
}

// startCPUProfile profiles this process into file until the returned
// function is called (bench's and serve's --cpuprofile).
func startCPUProfile(file string) (func(), error) {
	f, err := os.Create(file) // #nosec G304 -- the profile file the user named with --cpuprofile
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

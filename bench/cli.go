package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// DefaultCLIRuns is how many times the CLI row runs each command.
const DefaultCLIRuns = 30

// cliStep is one wsctl command the CLI row times as a whole process.
type cliStep struct {
	name string
	// args are the command's arguments after --dsn and --as; prev is
	// the output of the step before it in the same round.
	args  func(i int, prev string) []string
	stdin string
}

// cliSteps are the commands a shell agent's loop runs, in the order of a
// round: done takes the task claim printed.
var cliSteps = []cliStep{
	{name: "version", args: func(int, string) []string { return []string{"version"} }},
	{name: "task add", args: func(i int, _ string) []string { return []string{"task", "add", fmt.Sprintf("bench-cli task %d", i)} }},
	{name: "task claim", args: func(int, string) []string { return []string{"task", "claim", "--label", "bench=cli"} }},
	{name: "task done", args: func(_ int, prev string) []string { return []string{"task", "done", strings.TrimSpace(prev)} }},
	{name: "artifact put", args: func(i int, _ string) []string {
		return []string{"artifact", "put", fmt.Sprintf("bench-cli/%d.txt", i)}
	}, stdin: "a line of content\n"},
	{name: "task ls --limit 5", args: func(int, string) []string { return []string{"task", "ls", "--limit", "5"} }},
	{name: "task ls --ready --limit 5", args: func(int, string) []string { return []string{"task", "ls", "--ready", "--limit", "5"} }},
	{name: "task ls --ready --limit 5 --json", args: func(int, string) []string {
		return []string{"task", "ls", "--ready", "--limit", "5", "--json"}
	}},
}

// cliRows is the CLI row: a fresh store of the DSN's backend (a temporary
// file or directory, or a temporary schema on Postgres) loaded with
// cfg.CLITasks tasks in W5's shape (task i >= 1000 waits on task i-1000),
// then each command of cliSteps run cfg.CLIRuns times as a whole wsctl
// process (cfg.Exe), round by round, directly and, when via is set,
// through a server started in this process on that listener. A row's
// P50/P99 are the process's wall time (fork to exit); its CPU/OP the
// child's user + system time (median).
func cliRows(ctx context.Context, backend string, cfg Config, progress func(string)) ([]Row, error) {
	if cfg.Exe == "" {
		return nil, fmt.Errorf("CLI: no wsctl executable to run")
	}
	dsn, cleanup, err := freshStore(backend, cfg.DSN, "", "bench_cli")
	if err != nil {
		return nil, fmt.Errorf("CLI: the row makes its own store: %w", err)
	}
	defer cleanup()
	if err := cliLoad(ctx, dsn, cfg.CLITasks, progress); err != nil {
		return nil, err
	}
	targets := []struct{ dsn, variant string }{{dsn, ""}}
	for _, via := range cfg.Serve {
		s, err := startServer(ctx, dsn, via)
		if err != nil {
			return nil, err
		}
		defer s.stop()
		targets = append(targets, struct{ dsn, variant string }{s.dsn, "via " + via})
	}
	var rows []Row
	for _, tg := range targets {
		wall := make([][]time.Duration, len(cliSteps))
		cpu := make([][]time.Duration, len(cliSteps))
		for i := range cfg.CLIRuns {
			progress(fmt.Sprintf("CLI %s: round %d/%d", tg.variant, i+1, cfg.CLIRuns))
			prev := ""
			for k, st := range cliSteps {
				out, w, c, err := runCLI(ctx, cfg.Exe, tg.dsn, st.args(i, prev), st.stdin)
				if err != nil {
					return rows, fmt.Errorf("CLI %s: %w", st.name, err)
				}
				prev = out
				wall[k], cpu[k] = append(wall[k], w), append(cpu[k], c)
			}
		}
		for k, st := range cliSteps {
			variant := st.name
			if tg.variant != "" {
				variant += " " + tg.variant
			}
			rows = append(rows, Row{
				Workload: "CLI", Variant: variant, Backend: backend, Concurrency: 1,
				OpsPerSec:  1e6 / float64(medianOf(wall[k]).Microseconds()+1),
				P50us:      float64(medianOf(wall[k]).Microseconds()),
				P99us:      float64(slices.Max(wall[k]).Microseconds()),
				CPUusPerOp: float64(medianOf(cpu[k]).Microseconds()),
				Note:       fmt.Sprintf("whole wsctl process, %d runs, %d tasks; P99 is the slowest run", cfg.CLIRuns, cfg.CLITasks),
			})
		}
	}
	return rows, nil
}

// freshStore makes a fresh, empty store of backend like dsn's: a file or
// directory in a new temporary directory under dir (the system's when dir
// is empty), or a new schema of dsn's Postgres database. The returned
// func removes it.
func freshStore(backend, dsn, dir, name string) (string, func(), error) {
	switch backend {
	case "sqlite", "json":
		d, err := os.MkdirTemp(dir, name)
		if err != nil {
			return "", nil, err
		}
		file := "ws.db"
		if backend == "json" {
			file = "ws"
		}
		return backend + ":" + filepath.Join(d, file), func() { _ = os.RemoveAll(d) }, nil
	case "postgres":
		schema := fmt.Sprintf("%s_%d", strings.ReplaceAll(name, "-", "_"), time.Now().UnixNano())
		u, err := url.Parse(dsn)
		if err != nil {
			return "", nil, fmt.Errorf("postgres DSN: %w", driver.RedactError(err, dsn))
		}
		q := u.Query()
		q.Set("ws_schema", schema)
		u.RawQuery = q.Encode()
		return u.String(), func() { dropSchema(dsn, schema) }, nil
	}
	return "", nil, fmt.Errorf("%w: a fresh store of a %s DSN cannot be made here: name the server's store instead", ErrNoFreshStore, backend)
}

// ErrNoFreshStore is returned where a run needs stores of its own and the
// DSN's backend is not one it can make (a server's DSN).
var ErrNoFreshStore = errors.New("bench: no fresh store")

// cliLoad creates the store and n tasks labelled bench=cli, in W5's shape.
func cliLoad(ctx context.Context, dsn string, n int, progress func(string)) error {
	ws, err := workspace.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer func() { _ = ws.Close() }()
	label := map[string]string{"bench": "cli"}
	ids := make([]string, 0, n)
	const per = 500
	for i := 0; i < n; i += per {
		b := workspace.Batch{Actor: actor}
		for k := i; k < min(n, i+per); k++ {
			t := workspace.NewTask{Title: fmt.Sprintf("bench-cli task %d", k), Labels: label}
			if k >= 1000 {
				t.DependsOn = []string{ids[k-1000]}
			}
			b.Ops = append(b.Ops, workspace.CreateTaskOp{Task: t})
		}
		res, err := ws.Commit(ctx, b)
		if err != nil {
			return fmt.Errorf("CLI: load: %w", err)
		}
		for _, r := range res.Results {
			ids = append(ids, r.Task.ID)
		}
		progress(fmt.Sprintf("CLI: loading tasks %d/%d", i+per, n))
	}
	return nil
}

// runCLI runs exe once against dsn and returns its output, its wall time
// and its CPU time (user + system).
func runCLI(ctx context.Context, exe, dsn string, args []string, stdin string) (string, time.Duration, time.Duration, error) {
	cmd := exec.CommandContext(ctx, exe, append([]string{"--dsn", dsn, "--as", actor}, args...)...) // #nosec G204 -- the wsctl the benchmark was given, our own arguments
	cmd.Env = append(os.Environ(), "AGENTSPACE_DSN=", "AGENTSPACE_ACTOR=", "AGENTSPACE_TOKEN=")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return "", 0, 0, fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), wall, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// runCLIRows runs the CLI workload for RunAll.
func runCLIRows(ctx context.Context, cfg Config, emit func(Row)) ([]Row, error) {
	progress := progressFunc(cfg.Progress)
	defer progress("")
	scheme, _, _ := strings.Cut(cfg.DSN, ":")
	rows, err := cliRows(ctx, backendOf(scheme), cfg, progress)
	if emit != nil {
		for _, r := range rows {
			emit(r)
		}
	}
	return rows, err
}

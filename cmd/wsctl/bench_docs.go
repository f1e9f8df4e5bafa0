package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/bench"
	"github.com/agentspace/agentspace/workspace"
)

// benchDocsCmd is `wsctl bench docs`: one run of every backend whose record
// the docs' benchmark tables are rendered from (package bench measures and
// renders; this parses flags and reads and writes the files).
func (a *app) benchDocsCmd() *cobra.Command {
	var (
		postgres, dir, record, from, update string
		duration                            time.Duration
		processes, streams                  int
		artifacts, bigArtifacts, tasks      int
		cli, growth                         bool
		cliRuns, cliBigTasks, growthTasks   int
		growthEvents                        string
	)
	c := &cobra.Command{
		Use:   "docs",
		Short: "Measure every backend in one run and regenerate the docs' benchmark tables",
		Long: `docs runs the benchmark workloads on SQLite, json and PostgreSQL, each on
fresh stores: W1-W8 and MEM with 4 private handles, W1 with 4 shared handles,
W3 alone at --big-artifacts on the SQL backends, and W1-W8 and SSE through a
server on a unix socket on SQLite and PostgreSQL, W1 also from --processes
client processes. It writes the run's record (the machine, the date, this
command and every row) to --record, then rewrites, in each doc of --update,
the regions between <!-- bench:begin NAME RECORD --> and
<!-- bench:end NAME --> from it. Nothing else in a doc changes.

--from RECORD renders the docs again from a saved record without measuring.

--cli measures only what the cli region shows, in minutes and without
PostgreSQL: the commands of a shell agent's step as whole wsctl processes
(--cli-runs times each) on SQLite at --tasks tasks, directly and through a
server on loopback TCP, and at --cli-big-tasks tasks. Its record
(docs/bench/DATE-cli.json) renders the cli region alone.

--growth measures only what the growth region shows: the GROWTH workload at
--growth-events (with --growth-tasks tasks at the largest) on SQLite and
PostgreSQL, and on json up to 100,000 events, the most it is meant to hold.
Its record (docs/bench/DATE-growth.json) renders the growth region alone.

SQLite and json stores are made under --dir (its file system is part of the
record); each PostgreSQL run makes a schema of its own in the --postgres
database and drops it after. A run takes about 200 rows times --duration,
plus loading each run's data.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			var docs []string
			for _, d := range strings.Split(update, ",") {
				if d = strings.TrimSpace(d); d != "" {
					docs = append(docs, d)
				}
			}
			// Every doc is read and its regions checked before anything
			// is measured: a run is long, a typo is not.
			texts := make([]string, len(docs))
			for i, d := range docs {
				b, err := os.ReadFile(d) // #nosec G304 -- a doc the user named with --update
				if err != nil {
					return usageErrorf("--update: %v", err)
				}
				rs, err := bench.Regions(string(b))
				if err != nil {
					return usageErrorf("--update %s: %v", d, err)
				}
				if len(rs) == 0 {
					return usageErrorf("--update %s: no <!-- bench:begin NAME RECORD --> regions to rewrite", d)
				}
				texts[i] = string(b)
			}
			var rec *bench.Record
			if from != "" {
				for _, name := range docsFlags {
					if name != "update" && cmd.Flags().Changed(name) {
						return usageErrorf("--from renders a saved record: --%s is for a run", name)
					}
				}
				f, err := os.Open(from) // #nosec G304 -- the record the user named with --from
				if err != nil {
					return usageErrorf("--from: %v", err)
				}
				rec, err = bench.ReadRecord(f)
				_ = f.Close()
				if err != nil {
					return usageErrorf("--from %s: %v", from, err)
				}
				record = from
			} else {
				if cli && growth {
					return usageErrorf("--cli and --growth are two runs: make them one at a time")
				}
				sizes, err := parseGrowthEvents(growthEvents)
				if err != nil {
					return err
				}
				if postgres == "" && !cli {
					return usageErrorf("--postgres: a docs run needs a PostgreSQL database (the tables have a PostgreSQL column)")
				}
				if processes < 1 || processes > 256 {
					return usageErrorf("--processes: %d is not a count between 1 and 256", processes)
				}
				if streams < 1 || streams > 10000 {
					return usageErrorf("--streams: %d is not a count between 1 and 10000", streams)
				}
				a.dsn = postgres
				cfg := bench.DocsConfig{
					Dir: dir, Postgres: postgres, Duration: duration, Processes: processes, Streams: streams,
					Artifacts: artifacts, BigArtifacts: bigArtifacts, Tasks: tasks,
					Child: a.benchChild(), Progress: a.stderr,
					Command: commandLine(cmd), Build: buildStamp(),
					CLI: cli, CLIRuns: cliRuns, CLIBigTasks: cliBigTasks,
					Growth: growth, GrowthEvents: sizes, GrowthTasks: growthTasks,
				}
				if exe, err := os.Executable(); err == nil {
					cfg.Exe = exe
				}
				rec, err = bench.RunDocs(ctx, cfg)
				if record == "" && rec != nil {
					name := rec.Date[:10]
					if cli {
						name += "-cli"
					}
					if growth {
						name += "-growth"
					}
					record = filepath.Join("docs", "bench", name+".json")
				}
				if rec != nil {
					if werr := writeRecord(record, rec, err != nil); werr != nil {
						return errors.Join(err, werr)
					}
				}
				if err != nil {
					return fmt.Errorf("%w (what was measured is in %s.partial)", err, record)
				}
				fmt.Fprintf(a.stderr, "wrote %s\n", record)
			}
			for i, d := range docs {
				rel, err := filepath.Rel(filepath.Dir(d), record)
				if err != nil {
					return err
				}
				out, err := bench.UpdateRegions(texts[i], rec, filepath.ToSlash(rel))
				if err != nil {
					return err
				}
				if out == texts[i] {
					fmt.Fprintf(a.stderr, "%s: unchanged\n", d)
					continue
				}
				if err := writeFileAtomic(d, []byte(out)); err != nil {
					return err
				}
				fmt.Fprintf(a.stderr, "updated %s\n", d)
			}
			if a.jsonOut {
				return bench.WriteRecord(a.stdout, rec)
			}
			return nil
		}),
	}
	f := c.Flags()
	f.StringVar(&postgres, "postgres", "", "PostgreSQL database DSN (postgres://...): each run makes a schema of its own there and drops it")
	f.StringVar(&dir, "dir", "", "where the SQLite and json stores are made (default: the system's temporary directory)")
	f.StringVar(&record, "record", "", "write the run's record here (default docs/bench/DATE.json)")
	f.StringVar(&from, "from", "", "render the docs from this saved record instead of measuring")
	f.StringVar(&update, "update", "docs/performance.md,bench/README.md", "comma-separated docs whose generated regions to rewrite ('' for none)")
	f.DurationVar(&duration, "duration", 4*time.Second, "how long each row measures")
	f.IntVar(&processes, "processes", 16, "the served runs' W1 from this many client processes")
	f.IntVar(&streams, "streams", bench.DefaultStreams, "the served runs' SSE: event streams held open")
	f.IntVar(&artifacts, "artifacts", 10000, "W3's artifacts in the main runs")
	f.IntVar(&bigArtifacts, "big-artifacts", 100000, "W3's artifacts in its runs alone on the SQL backends")
	f.IntVar(&tasks, "tasks", 10000, "W5's pool of tasks; with --cli, the store's tasks")
	f.BoolVar(&cli, "cli", false, "measure only the cli region's rows: wsctl commands as whole processes on SQLite")
	f.IntVar(&cliRuns, "cli-runs", bench.DefaultCLIRuns, "with --cli, how many times each command runs")
	f.IntVar(&cliBigTasks, "cli-big-tasks", 100000, "with --cli, the tasks of the larger store")
	f.BoolVar(&growth, "growth", false, "measure only the growth region's rows: the GROWTH workload on each backend")
	f.StringVar(&growthEvents, "growth-events", "10000,100000,1000000", "with --growth, the store sizes in events, ascending")
	f.IntVar(&growthTasks, "growth-tasks", bench.DefaultGrowthTasks, "with --growth, the tasks in the store at its largest size")
	return c
}

// commandLine is the command as the user could type it again: wsctl's
// path to this command and the flags they set, each quoted for a shell
// where it must be, with credentials redacted.
func commandLine(cmd *cobra.Command) string {
	parts := strings.Fields(cmd.CommandPath())
	for _, name := range docsFlags {
		if !cmd.Flags().Changed(name) {
			continue
		}
		fl := cmd.Flags().Lookup(name)
		v := fl.Value.String()
		if fl.Value.Type() == "bool" && v == "true" {
			parts = append(parts, "--"+name)
			continue
		}
		if strings.Contains(v, "://") {
			v = workspace.RedactDSN(v)
		}
		parts = append(parts, "--"+name, shellQuote(v))
	}
	return strings.Join(parts, " ")
}

// docsFlags are the flags of a docs run, as commandLine repeats them.
var docsFlags = []string{"postgres", "dir", "record", "update", "duration", "processes", "streams", "artifacts", "big-artifacts", "tasks", "cli", "cli-runs", "cli-big-tasks", "growth", "growth-events", "growth-tasks"}

// shellQuote quotes s for a POSIX shell unless it needs no quoting.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,@+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// buildStamp is the commit this binary was built from, short, and
// whether its checkout had changes.
func buildStamp() string {
	b := readBuildInfo()
	if b.Commit == "" {
		return ""
	}
	s := b.Commit[:min(12, len(b.Commit))]
	if b.Modified {
		s += " (modified)"
	}
	return s
}

// writeRecord writes rec to path (path.partial when the run failed),
// making its directory.
func writeRecord(path string, rec *bench.Record, partial bool) error {
	if partial {
		path += ".partial"
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := bench.WriteRecord(&buf, rec); err != nil {
		return err
	}
	return writeFileAtomic(path, buf.Bytes())
}

// writeFileAtomic replaces path with data by a rename, keeping the file's
// mode (0644 for a new file): a reader sees the old file or the new one.
func writeFileAtomic(path string, data []byte) error {
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

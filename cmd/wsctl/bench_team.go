package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/bench"
	"github.com/agentspace/agentspace/bench/team"
)

// benchTeamCmd is `wsctl bench team`: a team's day against a workspace
// (package bench/team does the work; this parses flags and prints).
func (a *app) benchTeamCmd() *cobra.Command {
	var (
		cfg                     team.Config
		mix, server, out        string
		agentMode, recheck      bool
		think, duration, killAt time.Duration
	)
	c := &cobra.Command{
		Use:   "team",
		Short: "Play a team of agent processes against the workspace and check every invariant",
		Long: `team plays a realistic team against the workspace --dsn (or --server) names:
--agents wsctl processes, each an agent that claims and finishes tasks, writes
its own artifacts, increments hot counters with compare-and-set, takes leases
and writes under their fencing tokens, sends messages that need an ack and
acks its inbox, and puts notes, in the proportions of --mix, pausing --think
(on average) between operations. It runs for --duration, or until the log has
grown by --events events.

--servers N starts N 'wsctl serve' in front of the store and spreads the
agents over them; --kill-server-after D SIGKILLs one of them D into the run
(its agents move to the others). --failover-command runs a command of yours
--failover-after into the run (say, one that promotes a PostgreSQL standby:
scripts/failover-pair.sh); the agents retry the unavailable store meanwhile.

Afterwards it checks that every acknowledged write is there at its version,
each hot counter equals its acknowledged increments, no task was claimed by
two agents at once, lease tokens only increase, every message acknowledged
sent was delivered and every ack recorded once, a follower saw the log
gap-free, the log holds an event for every acknowledged write, and the hash
chain verifies; and it writes --out: report.json, report.md, timeline.svg,
rate.svg, latency.svg, and each agent's records (agents/N.jsonl). It exits 9
when an invariant failed. --recheck checks the run in --out again against the
workspace as it is now.

It writes under names starting with team/ and actors t<run>-a<N>: point it at
a scratch workspace.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if agentMode {
				return team.RunAgent(ctx, a.stdin, a.stdout)
			}
			dsn := server
			if dsn == "" {
				res, err := a.resolve()
				if err != nil {
					return err
				}
				dsn = res.DSN
			} else if a.dsnFlag != "" {
				return usageErrorf("give --dsn or --server, not both")
			}
			dsn = a.withToken(dsn)
			a.dsn = dsn
			if recheck {
				rep, err := team.Recheck(ctx, dsn, out)
				return a.teamResult(rep, out, err)
			}
			m, err := team.ParseMix(mix)
			if err != nil {
				return usageErrorf("--mix: %v", err)
			}
			if duration <= 0 && cfg.Events <= 0 {
				duration = 30 * time.Second
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			cfg.DSN, cfg.Mix, cfg.Think, cfg.Duration, cfg.Out, cfg.KillServerAfter = dsn, m, think, duration, out, killAt
			cfg.Progress = a.stderr
			cfg.Agent = func(ctx context.Context) *exec.Cmd {
				c := exec.CommandContext(ctx, self, "bench", "team", "--agent") // #nosec G204 -- this very executable, fixed arguments
				c.Stderr = a.stderr
				return c
			}
			cfg.Serve = func(ctx context.Context, dsn, listen string) *exec.Cmd {
				c := exec.CommandContext(ctx, self, "serve", "--listen", listen, "--log-level", "warn") // #nosec G204 -- this very executable
				// The DSN goes by the environment, not the arguments ps shows.
				c.Env = append(os.Environ(), "AGENTSPACE_DSN="+dsn)
				return c
			}
			rep, err := team.Run(ctx, cfg)
			if errors.Is(err, team.ErrConfig) {
				return usageErrorf("%v", err)
			}
			return a.teamResult(rep, out, err)
		}),
	}
	f := c.Flags()
	f.IntVar(&cfg.Agents, "agents", 10, "agent processes")
	f.StringVar(&mix, "mix", team.DefaultMix, "the operations' weights: claim, put, hot, lock, msg, note")
	f.DurationVar(&think, "think", 100*time.Millisecond, "mean pause between an agent's operations (uniform in [0, 2x])")
	f.DurationVar(&duration, "duration", 0, "how long to run (default 30s unless --events)")
	f.Int64Var(&cfg.Events, "events", 0, "run until the log has grown by this many events")
	f.StringVar(&server, "server", "", "a server's URL (http://, https://, http+unix://) instead of --dsn")
	f.IntVar(&cfg.Servers, "servers", 0, "start this many 'wsctl serve' in front of the DSN's store and spread the agents over them")
	f.DurationVar(&killAt, "kill-server-after", 0, "with --servers 2 or more: SIGKILL one of them this long into the run")
	f.StringVar(&cfg.FailoverCommand, "failover-command", "", "a shell command that fails the store over, run --failover-after into the run")
	f.DurationVar(&cfg.FailoverAfter, "failover-after", 0, "when to run --failover-command")
	f.IntVar(&cfg.Hot, "hot", 3, "hot counters the agents increment with compare-and-set")
	f.IntVar(&cfg.Locks, "locks", 4, "artifacts the agents write under a lease, fenced by its token")
	f.Int64Var(&cfg.Seed, "seed", 0, "seed of the agents' choices (0: from the clock)")
	f.StringVar(&out, "out", "team-report", "directory for the report and the agents' records")
	f.BoolVar(&recheck, "recheck", false, "check the run in --out again against the workspace as it is now")
	f.BoolVar(&agentMode, "agent", false, "internal: be one agent process (spec on stdin, records on stdout)")
	_ = f.MarkHidden("agent")
	return c
}

// teamResult prints a run's (or a recheck's) outcome; an invariant that
// failed is exit 9, as a broken hash chain is.
func (a *app) teamResult(rep *team.Report, out string, err error) error {
	if rep != nil {
		if a.jsonOut {
			if perr := a.printJSON(rep); perr != nil {
				return perr
			}
		} else {
			fmt.Fprintf(a.stdout, "run %s: %d agents, %.0f s, %d acknowledged ops (%.0f/s), log +%d events (%.0f/s), machine CPU %.0f µs/op\n",
				rep.Run, rep.Agents, rep.WallSeconds, rep.Acked, rep.OpsPerSec, rep.LogEvents, rep.EventsPerSec, rep.CPUusPerOp)
			tw := a.table()
			fmt.Fprintln(tw, "OP\tOK\tOK/S\tP50\tP99")
			for _, o := range rep.Ops {
				fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s\t%s\n", o.Op, o.OK, o.PerSec, bench.FormatMicros(o.P50us), bench.FormatMicros(o.P99us))
			}
			fmt.Fprintln(tw, "INVARIANT\tHELD\tCHECKED")
			for _, inv := range rep.Invariants {
				held := "yes"
				if !inv.OK {
					held = "NO"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\n", inv.Name, held, inv.Checked)
			}
			if ferr := tw.Flush(); ferr != nil {
				return ferr
			}
			for _, inv := range rep.Invariants {
				if !inv.OK {
					fmt.Fprintf(a.stdout, "FAILED: %s: %s\n", inv.Name, inv.Detail)
				}
			}
			fmt.Fprintf(a.stdout, "report: %s/report.md\n", out)
		}
	}
	if errors.Is(err, team.ErrInvariant) {
		return &cliError{code: exitTampered, err: err, hint: "see " + out + "/report.md"}
	}
	return err
}

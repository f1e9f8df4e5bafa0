package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/gitwork"
	"github.com/agentspace/agentspace/workspace"
)

// workConfig is agentspace.toml's [work] table:
//
//	[work]
//	root = ".agentspace/worktrees"   # relative to the repository's main working tree
//	branch_prefix = "agent/"
//	integration = "main"
//	queue_lease = "2h"               # a submitted task's claim, while it waits
//	gc_age = "1h"
//	mode = "per-task"                # or "per-agent": one long-lived worktree per agent
type workConfig struct {
	Root         string `toml:"root"`
	BranchPrefix string `toml:"branch_prefix"`
	Integration  string `toml:"integration"`
	QueueLease   string `toml:"queue_lease"`
	GCAge        string `toml:"gc_age"`
	Mode         string `toml:"mode"`
}

// mergeConfig is agentspace.toml's [merge] table:
//
//	[merge]
//	mode = "rebase"                  # or "merge"
//	validate = ["go test ./..."]
//	timeout = "10m"                  # per validation command
//	on_conflict = "return"           # or "task"
//	lease = "30s"                    # the merger's lease on the queue
type mergeConfig struct {
	Mode       string   `toml:"mode"`
	Validate   []string `toml:"validate"`
	Timeout    string   `toml:"timeout"`
	OnConflict string   `toml:"on_conflict"`
	Lease      string   `toml:"lease"`
}

// gitworkConfig reads [work] and [merge] from the config file wsctl uses
// (none is fine: the defaults) for the repository repo.
func (a *app) gitworkConfig(repo string) (gitwork.Config, error) {
	path := a.configFlag
	if path == "" {
		found, err := findUp()
		if err != nil {
			return gitwork.Config{}, err
		}
		path = found.config
	}
	var fc fileConfig
	if path != "" {
		var err error
		if fc, err = readConfig(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return gitwork.Config{}, usageErrorf("%v", err)
		}
	}
	cfg := gitwork.Config{
		Repo: repo, Integration: fc.Work.Integration, BranchPrefix: fc.Work.BranchPrefix,
		Mode: fc.Merge.Mode, Validate: fc.Merge.Validate, OnConflict: fc.Merge.OnConflict,
	}
	switch fc.Work.Mode {
	case "", "per-task":
	case "per-agent":
		cfg.PerAgent = true
	default:
		return cfg, usageErrorf("%s: [work] mode = %q: want \"per-task\" or \"per-agent\"", path, fc.Work.Mode)
	}
	// A relative root is the repository's: gitwork takes it from the main
	// working tree, whichever worktree wsctl runs in.
	cfg.Root = fc.Work.Root
	for _, d := range []struct {
		key string
		val string
		dst *time.Duration
	}{
		{"[work] queue_lease", fc.Work.QueueLease, &cfg.QueueLease},
		{"[work] gc_age", fc.Work.GCAge, &cfg.GCAge},
		{"[merge] timeout", fc.Merge.Timeout, &cfg.ValidateTimeout},
		{"[merge] lease", fc.Merge.Lease, &cfg.LeaderTTL},
	} {
		if d.val == "" {
			continue
		}
		v, err := time.ParseDuration(d.val)
		if err != nil || v <= 0 {
			return cfg, usageErrorf("%s: %s = %q is not a positive duration like \"10m\"", path, d.key, d.val)
		}
		*d.dst = v
	}
	return cfg, nil
}

// withWork opens the workspace and a gitwork.Manager for the repository.
func (a *app) withWork(ctx context.Context, repo string, fn func(ws *workspace.Workspace, m *gitwork.Manager) error) error {
	cfg, err := a.gitworkConfig(repo)
	if err != nil {
		return err
	}
	return a.with(ctx, func(ws *workspace.Workspace) error {
		m, err := gitwork.New(ctx, ws, cfg)
		if err != nil {
			return err
		}
		return fn(ws, m)
	})
}

func (a *app) workCmd() *cobra.Command {
	var repo string
	c := group("work", "A git worktree per task: your worktrees; start, submit, ls, release, gc",
		a.workStartCmd(&repo),
		a.workSubmitCmd(&repo),
		a.workLsCmd(&repo),
		a.workReleaseCmd(&repo),
		a.workGCCmd(&repo),
	)
	c.Long = `Without a subcommand, and with an actor (--as or AGENTSPACE_ACTOR): your
worktrees that are not released, what became of each (an entry the merge
queue gave back says why) and what to do next.`
	c.PersistentFlags().StringVar(&repo, "repo", ".", "the git repository (or any worktree of it)")
	help := c.RunE
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 || a.declaredActor() == "" {
			return help(cmd, args)
		}
		return a.action(func(ctx context.Context, _ *cobra.Command, _ []string) error {
			return a.workMine(ctx, repo)
		})(cmd, args)
	}
	return c
}

// mine is one of the actor's worktrees as 'wsctl work' shows it.
type mine struct {
	gitwork.Worktree
	Next string `json:"next"`
}

// workMine prints the actor's worktrees that are not released, with what
// to do next.
func (a *app) workMine(ctx context.Context, repo string) error {
	who := a.declaredActor()
	cfg, err := a.gitworkConfig(repo)
	if err != nil {
		return err
	}
	integration := cfg.Integration
	if integration == "" {
		integration = "main"
	}
	return a.with(ctx, func(ws *workspace.Workspace) error {
		recs, err := gitwork.List(ctx, ws)
		if err != nil {
			return err
		}
		var out []mine
		for _, r := range recs {
			if r.Agent == who && r.Status != gitwork.StatusReleased {
				out = append(out, mine{Worktree: r, Next: r.Next(integration)})
			}
		}
		if a.jsonOut {
			return printList(a, out)
		}
		if len(out) == 0 {
			_, err := fmt.Fprintf(a.stdout, "%s has no worktree: claim a task with 'wsctl task claim --worktree'\n", who)
			return err
		}
		for _, m := range out {
			fmt.Fprintf(a.stdout, "%s\t%s\t%s\t%s\n", m.Task, m.Status, m.Branch, m.Path)
			if m.Status == gitwork.StatusConflicted || m.Status == gitwork.StatusFailed {
				// The first line, then the failing command's output indented.
				fmt.Fprintf(a.stdout, "  came back from the merge queue: %s\n", strings.ReplaceAll(m.Why(), "\n", "\n    "))
			}
			fmt.Fprintf(a.stdout, "  next: %s\n", m.Next)
		}
		return nil
	})
}

// workTaskCmd is a work subcommand that takes one task and prints its record.
func (a *app) workTaskCmd(repo *string, use, short, long string, op func(m *gitwork.Manager, ctx context.Context, actor, task string) (gitwork.Worktree, error), print func(gitwork.Worktree) error) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Long: long,
		Args: cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			return a.withWork(ctx, *repo, func(ws *workspace.Workspace, m *gitwork.Manager) error {
				task, err := resolveTaskID(ctx, ws, args[0])
				if err != nil {
					return err
				}
				w, err := op(m, ctx, actor, task)
				if errors.Is(err, gitwork.ErrDirty) {
					// The error says what to do already.
					return &cliError{code: exitConflict, err: err}
				}
				if errors.Is(err, gitwork.ErrTaskEnded) {
					return &cliError{code: exitConflict, err: err, hint: fmt.Sprintf("'wsctl work release %s' removes its worktree, keeping unmerged work under a backup ref", task)}
				}
				if errors.Is(err, gitwork.ErrRecordMismatch) {
					return &cliError{code: exitConflict, err: err, hint: forgetHint}
				}
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(w)
				}
				return print(w)
			})
		}),
	}
}

func (a *app) workStartCmd(repo *string) *cobra.Command {
	var perAgent bool
	cmd := a.workTaskCmd(repo, "start TASK", "Make a worktree for a task you claimed; prints its path",
		`Make a git worktree for TASK (which you must have claimed) on a new branch
from the integration branch's head, recorded as its base. Prints the path.
Run again, it prints the same path.

With --per-agent (or [work] mode = "per-agent"), TASK gets your own
long-lived worktree and branch (agent/<you>), reused across your tasks and
brought up to date with the integration branch first (fast-forward, or a
rebase of your own commits); a dirty worktree, another unmerged task of
yours in it, or a rebase that stops are refused (exit 3).`,
		func(m *gitwork.Manager, ctx context.Context, actor, task string) (gitwork.Worktree, error) {
			if perAgent {
				return m.StartPerAgent(ctx, actor, task)
			}
			return m.Start(ctx, actor, task)
		},
		func(w gitwork.Worktree) error { _, err := fmt.Fprintln(a.stdout, w.Path); return err })
	cmd.Flags().BoolVar(&perAgent, "per-agent", false, "use your own long-lived worktree and branch (agent/<you>), reused across tasks")
	return cmd
}

func (a *app) workSubmitCmd(repo *string) *cobra.Command {
	return a.workTaskCmd(repo, "submit TASK", "Queue a task's committed worktree for the merge queue",
		`Queue TASK's worktree for 'wsctl merge run'. Refuses uncommitted changes
(exit 3). Stores git diff base...head as the artifact worktrees/TASK.patch
and extends your claim while the entry waits.`,
		(*gitwork.Manager).Submit,
		func(w gitwork.Worktree) error {
			_, err := fmt.Fprintf(a.stdout, "%s submitted %s\n", w.Branch, w.Head)
			return err
		})
}

// forgetHint is what to do about a worktree record git does not confirm.
const forgetHint = "nothing was removed; once you have looked, 'wsctl work release --forget TASK' drops the record and leaves the repository as it is"

func (a *app) workReleaseCmd(repo *string) *cobra.Command {
	var forget bool
	cmd := a.workTaskCmd(repo, "release TASK", "Remove a task's worktree and branch, keeping unmerged work under a backup ref",
		`Remove TASK's worktree and branch, keeping work the integration branch
lacks under refs/agentspace/backup/<short id>. Only the branch and
directory the worktree machinery gives the task are removed, once git
confirms them; a record naming anything else is refused (exit 3) and
nothing is removed. --forget marks the record released and touches
nothing in the repository.`,
		func(m *gitwork.Manager, ctx context.Context, actor, task string) (gitwork.Worktree, error) {
			if forget {
				return m.Forget(ctx, actor, task)
			}
			return m.Release(ctx, actor, task)
		},
		func(w gitwork.Worktree) error {
			if forget {
				_, err := fmt.Fprintf(a.stdout, "forgot the worktree record of %s; the repository is as it was\n", w.Task)
				return err
			}
			if w.Backup != "" {
				_, err := fmt.Fprintf(a.stdout, "released %s; unmerged work kept at %s\n", w.Path, w.Backup)
				return err
			}
			_, err := fmt.Fprintf(a.stdout, "released %s\n", w.Path)
			return err
		})
	cmd.Flags().BoolVar(&forget, "forget", false, "mark the record released without touching the repository (for a record git does not confirm)")
	return cmd
}

func (a *app) printWorktrees(ws []gitwork.Worktree) error {
	if a.jsonOut {
		return printList(a, ws)
	}
	tw := a.table()
	fmt.Fprintln(tw, "TASK\tSTATUS\tBRANCH\tAGENT\tHEAD\tDETAIL")
	for _, w := range ws {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", w.Task, w.Status, w.Branch, orDash(w.Agent), orDash(shortCommit(w.Head)), orDash(firstLineOf(w.Detail)))
	}
	return tw.Flush()
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// firstLineOf shortens s to its first line, at most 80 bytes, for tables.
func firstLineOf(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i] + " …"
		}
	}
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func (a *app) workLsCmd(repo *string) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List worktree records, queued ones in submission order",
		Args:  cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return a.with(ctx, func(ws *workspace.Workspace) error {
				recs, err := gitwork.List(ctx, ws)
				if err != nil {
					return err
				}
				out := recs[:0]
				for _, r := range recs {
					if all || r.Status != gitwork.StatusReleased {
						out = append(out, r)
					}
				}
				return a.printWorktrees(out)
			})
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, "include released worktrees")
	return cmd
}

func (a *app) workGCCmd(repo *string) *cobra.Command {
	return &cobra.Command{
		Use:   "gc",
		Short: "Release worktrees whose task ended or whose claim lapsed over [work] gc_age ago",
		Args:  cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			return a.withWork(ctx, *repo, func(ws *workspace.Workspace, m *gitwork.Manager) error {
				out, err := m.GC(ctx, actor)
				if perr := a.printWorktrees(out); err == nil {
					err = perr
				}
				if skipped := recordErrors(err); len(skipped) > 0 {
					for _, e := range skipped {
						fmt.Fprintf(a.stderr, "skipped: %v\n", e)
					}
					what := fmt.Sprintf("%d worktree records do not match the repository and were left alone", len(skipped))
					if len(skipped) == 1 {
						what = "1 worktree record does not match the repository and was left alone"
					}
					return &cliError{code: exitConflict, err: errors.New(what), hint: forgetHint}
				}
				return err
			})
		}),
	}
}

// recordErrors lists the *gitwork.RecordError in err, alone or joined.
func recordErrors(err error) []error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*gitwork.RecordError); ok {
		return []error{err}
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, recordErrors(e)...)
		}
		return out
	}
	if errors.Is(err, gitwork.ErrRecordMismatch) {
		return []error{err}
	}
	return nil
}

func (a *app) mergeCmd() *cobra.Command {
	var (
		repo   string
		once   bool
		follow bool
	)
	run := &cobra.Command{
		Use:   "run",
		Short: "Run the merge queue: validate and merge submitted worktrees in order",
		Long: `Take the merge queue's lease (waiting while another merger holds it), then,
in submission order, bring each submitted branch up to date with the
integration branch, run [merge] validate in a clean checkout of the result,
and advance the integration branch by compare-and-swap. Conflicts and red
validations leave the branch untouched and go back to the task's agent,
whose task result says what to do next. A checkout of the integration
branch (the repository's own, say) is updated with it as git merge
--ff-only would; if the merge would overwrite changes there, the branch is
not moved, the entry waits and the command says what to run (exit 3).
--once (the default) works through the queue as it stands; --follow keeps
waiting for submissions. One line (or one JSON object) per entry, then
(without --json) a summary; with --once the exit code is 3 when an entry
came back conflicted or failed.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if once && follow {
				return usageErrorf("--once and --follow exclude each other")
			}
			if follow {
				// Interrupted, a following merger lets go of the queue cleanly.
				var stop context.CancelFunc
				ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
			}
			actor, err := a.actor()
			if err != nil {
				return err
			}
			return a.withWork(ctx, repo, func(ws *workspace.Workspace, m *gitwork.Manager) error {
				mg := m.NewMerger(actor)
				if step := a.getenv("AGENTSPACE_TEST_MERGE_STEP_DELAY"); step != "" {
					if d, err := time.ParseDuration(step); err == nil {
						mg.SetStepHook(func(string) { time.Sleep(d) })
					}
				}
				counts := map[gitwork.Status]int{}
				err := mg.Run(ctx, follow, func(r gitwork.Result) {
					counts[r.Status]++
					if a.jsonOut {
						_ = a.printJSONLine(r)
						return
					}
					fmt.Fprintf(a.stdout, "%s\t%s\t%s\t%s\n", r.Task, r.Status, orDash(shortCommit(r.Commit)), orDash(firstLineOf(r.Detail)))
				})
				if !a.jsonOut {
					fmt.Fprintln(a.stdout, mergeSummary(counts))
				}
				if follow && errors.Is(err, context.Canceled) {
					return nil
				}
				var ce *gitwork.CheckoutError
				if errors.As(err, &ce) {
					return &cliError{code: exitConflict, err: err}
				}
				if err != nil {
					return err
				}
				if back := counts[gitwork.StatusConflicted] + counts[gitwork.StatusFailed]; back > 0 && !follow {
					what := fmt.Sprintf("%d merge queue entries came back to their agents", back)
					if back == 1 {
						what = "1 merge queue entry came back to its agent"
					}
					return &cliError{code: exitConflict, err: errors.New(what),
						hint: "their tasks' results say what to do next; 'wsctl work ls' lists them"}
				}
				return nil
			})
		}),
	}
	f := run.Flags()
	f.StringVar(&repo, "repo", ".", "the git repository (or any worktree of it)")
	f.BoolVar(&once, "once", false, "work through the queue as it stands, then exit (the default)")
	f.BoolVar(&follow, "follow", false, "keep merging new submissions until interrupted")
	return group("merge", "The merge queue: run", run)
}

// mergeSummary is the last line of a merge run: what the entries came to.
func mergeSummary(counts map[gitwork.Status]int) string {
	total := 0
	for _, n := range counts {
		total += n
	}
	if total == 0 {
		return "merge queue: nothing to merge"
	}
	s := fmt.Sprintf("merge queue: %d merged, %d conflicted, %d failed", counts[gitwork.StatusMerged], counts[gitwork.StatusConflicted], counts[gitwork.StatusFailed])
	if n := counts[gitwork.StatusSubmitted]; n > 0 {
		s += fmt.Sprintf(", %d still waiting", n)
	}
	return s
}

// printJSONLine writes v as one line of NDJSON.
func (a *app) printJSONLine(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "%s\n", b)
	return err
}

// worktreeFlags are task claim's --worktree, --per-agent and --repo.
type worktreeFlags struct {
	on       bool
	perAgent bool
	repo     string
}

func (w *worktreeFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&w.on, "worktree", false, "also make the task's git worktree (as 'wsctl work start'); prints ID<TAB>PATH")
	f.BoolVar(&w.perAgent, "per-agent", false, "with --worktree: use your own long-lived worktree (see 'wsctl work start --per-agent')")
	f.StringVar(&w.repo, "repo", ".", "with --worktree: the git repository (or any worktree of it)")
}

// claimWorktree starts the worktree of the task actor just claimed and
// prints both (gitwork.Manager.StartClaimed gives the claim back if it
// cannot).
func (a *app) claimWorktree(ctx context.Context, m *gitwork.Manager, f worktreeFlags, actor string, t workspace.Task) error {
	w, err := m.StartClaimed(ctx, actor, t.ID, f.perAgent)
	if errors.Is(err, gitwork.ErrDirty) {
		return &cliError{code: exitConflict, err: err, hint: "commit your changes (or remove them), then claim again"}
	}
	if err != nil {
		return err
	}
	if a.jsonOut {
		return a.printJSON(gitwork.Claimed{Task: t, Worktree: w})
	}
	_, err = fmt.Fprintf(a.stdout, "%s\t%s\n", t.ID, w.Path)
	return err
}

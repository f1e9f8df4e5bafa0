package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/shadow"
	"github.com/agentspace/agentspace/workspace"
)

// shadowConfig is agentspace.toml's [shadow] table:
//
//	[shadow]
//	root = ".agentspace/shadows"   # where shadows live (relative to the config file)
//	validate = ["go vet ./...", "go test ./..."]
//	timeout = "5m"                 # per validator command
//	gc_age = "24h"                 # shadow gc: how long a task must have ended
type shadowConfig struct {
	Root     string   `toml:"root"`
	Validate []string `toml:"validate"`
	Timeout  string   `toml:"timeout"`
	GCAge    string   `toml:"gc_age"`
}

// defaultGCAge is how long a shadow's task must have ended before gc.
const defaultGCAge = 24 * time.Hour

// shadowFlags are the flags every shadow command shares.
type shadowFlags struct{ root string }

func (f *shadowFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.root, "root", "", "directory of the shadows (default: [shadow] root, else .agentspace/shadows beside the config file or workspace)")
}

// shadowSettings reads [shadow] from the config file (--config, or the
// nearest agentspace.toml) and resolves the shadows' root.
func (a *app) shadowSettings(f shadowFlags) (shadow.Options, shadowConfig, error) {
	var sc shadowConfig
	path := a.configFlag
	base := ""
	if path == "" {
		found, err := findUp()
		if err != nil {
			return shadow.Options{}, sc, err
		}
		path = found.config
		if found.config == "" && found.storeDir != "" {
			base = filepath.Dir(found.storeDir)
		}
	}
	if path != "" {
		cfg, err := readConfig(path)
		if err != nil && !(errors.Is(err, fs.ErrNotExist) && a.configFlag == "") {
			return shadow.Options{}, sc, usageErrorf("%v", err)
		}
		sc = cfg.Shadow
		base = filepath.Dir(path)
	}
	opts := shadow.Options{Validators: sc.Validate, Root: f.root}
	if sc.Timeout != "" {
		d, err := time.ParseDuration(sc.Timeout)
		if err != nil || d <= 0 {
			return opts, sc, usageErrorf("[shadow] timeout %q: want a duration like 5m", sc.Timeout)
		}
		opts.ValidatorTimeout = d
	}
	switch {
	case opts.Root != "":
	case sc.Root != "" && filepath.IsAbs(sc.Root):
		opts.Root = sc.Root
	case sc.Root != "":
		opts.Root = filepath.Join(base, sc.Root)
	default:
		opts.Root = filepath.Join(base, defaultStoreDir, "shadows")
	}
	return opts, sc, nil
}

// withShadows opens the workspace and a shadow Manager over it.
func (a *app) withShadows(ctx context.Context, f shadowFlags, fn func(ws *workspace.Workspace, m *shadow.Manager) error) error {
	opts, _, err := a.shadowSettings(f)
	if err != nil {
		return err
	}
	return a.with(ctx, func(ws *workspace.Workspace) error {
		m, err := shadow.New(ws, opts)
		if err != nil {
			return err
		}
		return fn(ws, m)
	})
}

// shadowRun is the body of a shadow command: its arguments, the acting
// actor ("" for a command that needs none), the workspace and its shadows.
type shadowRun func(ctx context.Context, cmd *cobra.Command, args []string, actor string, ws *workspace.Workspace, m *shadow.Manager) error

// shadowAction is the RunE of a shadow command: it resolves the actor
// (when withActor), opens the workspace and a Manager under f's --root
// (read when the command runs, after its flags are parsed), and runs fn.
func (a *app) shadowAction(f *shadowFlags, withActor bool, fn shadowRun) func(*cobra.Command, []string) error {
	return a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
		actor, err := a.actorIf(withActor)
		if err != nil {
			return err
		}
		return a.withShadows(ctx, *f, func(ws *workspace.Workspace, m *shadow.Manager) error {
			return fn(ctx, cmd, args, actor, ws, m)
		})
	})
}

// actorIf is a.actor() when needed, else "".
func (a *app) actorIf(needed bool) (string, error) {
	if !needed {
		return "", nil
	}
	return a.actor()
}

// taskFlag adds --task: the task the work is for, whose areas bound what
// may change (what: "paths" or "names").
func taskFlag(cmd *cobra.Command, task *string, what string) {
	cmd.Flags().StringVar(task, "task", "", "the task the work is for: its areas bound the "+what+" that may change")
}

func (a *app) shadowCmd() *cobra.Command {
	return group("shadow", "Work on a copy of a directory; validate, then promote atomically or discard",
		a.shadowOpenCmd(),
		a.shadowLsCmd(),
		a.shadowDiffCmd(),
		a.shadowValidateCmd(),
		a.shadowPromoteCmd(),
		a.shadowRebaseCmd(),
		a.shadowDiscardCmd(),
		a.shadowCheckpointCmd(),
		a.shadowGCCmd(),
		a.shadowRecoverCmd(),
	)
}

func (a *app) shadowOpenCmd() *cobra.Command {
	var f shadowFlags
	var task string
	cmd := &cobra.Command{
		Use:   "open DIR [--task T]",
		Short: "Copy DIR into a new shadow (reflinks where the file system has them); prints its path",
		Args:  cobra.ExactArgs(1),
		RunE: a.shadowAction(&f, true, func(ctx context.Context, cmd *cobra.Command, args []string, actor string, ws *workspace.Workspace, m *shadow.Manager) error {
			id, err := resolveOptionalTaskID(ctx, ws, task)
			if err != nil {
				return err
			}
			s, err := m.Open(ctx, shadow.OpenRequest{Dir: args[0], Actor: actor, Task: id})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(s)
			}
			for _, sk := range s.Skipped {
				fmt.Fprintf(a.stderr, "wsctl: skipped %s: %s\n", sk.Path, sk.Reason)
			}
			_, err = fmt.Fprintln(a.stdout, s.Path)
			return err
		}),
	}
	f.add(cmd)
	taskFlag(cmd, &task, "paths")
	return cmd
}

func (a *app) shadowLsCmd() *cobra.Command {
	var f shadowFlags
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the shadows",
		Args:  cobra.NoArgs,
		RunE: a.shadowAction(&f, false, func(ctx context.Context, cmd *cobra.Command, args []string, actor string, ws *workspace.Workspace, m *shadow.Manager) error {
			list, err := m.List(ctx)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printList(a, list)
			}
			tw := a.table()
			fmt.Fprintln(tw, "ID\tACTOR\tTASK\tVALIDATED\tDIR\tPATH")
			for _, s := range list {
				v := "-"
				if s.Validated != nil {
					v = map[bool]string{true: "passed", false: "failed"}[s.Validated.Passed]
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Actor, orDash(s.Task), v, s.Dir, s.Path)
			}
			return tw.Flush()
		}),
	}
	f.add(cmd)
	return cmd
}

func (a *app) shadowDiffCmd() *cobra.Command {
	var f shadowFlags
	var stat bool
	cmd := &cobra.Command{
		Use:   "diff SHADOW [--stat]",
		Short: "Show the shadow's changes against its base: a list, then a unified diff",
		Args:  cobra.ExactArgs(1),
		RunE: a.shadowAction(&f, false, func(ctx context.Context, cmd *cobra.Command, args []string, actor string, ws *workspace.Workspace, m *shadow.Manager) error {
			d, err := m.Diff(ctx, args[0])
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(d)
			}
			for _, c := range d.Changes {
				if c.Kind == shadow.Renamed {
					fmt.Fprintf(a.stdout, "%-9s %s -> %s\n", c.Kind, c.From, c.Path)
				} else {
					fmt.Fprintf(a.stdout, "%-9s %s\n", c.Kind, c.Path)
				}
			}
			for _, s := range d.Skipped {
				fmt.Fprintf(a.stdout, "%-9s %s (%s)\n", "skipped", s.Path, s.Reason)
			}
			if stat || len(d.Changes) == 0 {
				return nil
			}
			u, err := m.Unified(ctx, args[0], d)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(a.stdout, "\n"+u)
			return err
		}),
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&stat, "stat", false, "only the list of changed files")
	return cmd
}

// validationFailed is the error of a validation with violations: exit 1,
// after the violations are printed.
func validationFailed(v shadow.Validation) error {
	noun := "violations"
	if len(v.Violations) == 1 {
		noun = "violation"
	}
	return &cliError{code: exitError, err: fmt.Errorf("validation failed: %d %s", len(v.Violations), noun)}
}

func (a *app) printValidation(v shadow.Validation) error {
	if a.jsonOut {
		if err := a.printJSON(v); err != nil {
			return err
		}
	} else {
		for _, x := range v.Violations {
			fmt.Fprintf(a.stdout, "%-8s %s %s\n", x.Rule, orDash(x.Path), strings.ReplaceAll(x.Detail, "\n", "\n         "))
		}
		if v.Passed {
			fmt.Fprintf(a.stdout, "passed (diff %s)\n", v.DiffHash[:12])
		}
	}
	if !v.Passed {
		return validationFailed(v)
	}
	return nil
}

func (a *app) shadowValidateCmd() *cobra.Command {
	var f shadowFlags
	cmd := &cobra.Command{
		Use:   "validate SHADOW",
		Short: "Check the diff against task areas, roles, others' leases and the [shadow] validate commands",
		Args:  cobra.ExactArgs(1),
		RunE: a.shadowAction(&f, true, func(ctx context.Context, cmd *cobra.Command, args []string, actor string, ws *workspace.Workspace, m *shadow.Manager) error {
			v, err := m.Validate(ctx, args[0], actor)
			if err != nil {
				return err
			}
			return a.printValidation(v)
		}),
	}
	f.add(cmd)
	return cmd
}

func (a *app) shadowPromoteCmd() *cobra.Command {
	var f shadowFlags
	cmd := &cobra.Command{
		Use:   "promote SHADOW",
		Short: "Apply the validated diff to the real directory, all or nothing",
		Args:  cobra.ExactArgs(1),
		RunE: a.shadowAction(&f, true, func(ctx context.Context, cmd *cobra.Command, args []string, actor string, ws *workspace.Workspace, m *shadow.Manager) error {
			p, err := m.Promote(ctx, args[0], actor)
			var ce *shadow.ConflictError
			if errors.As(err, &ce) {
				return &cliError{code: exitConflict, err: err, hint: "'wsctl shadow rebase' takes the real tree's other changes; then resolve these files, validate and promote"}
			}
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(p)
			}
			_, err = fmt.Fprintf(a.stdout, "promoted %d changes; diff kept as artifact %s\n", len(p.Diff.Changes), orDash(p.Artifact))
			return err
		}),
	}
	f.add(cmd)
	return cmd
}

func (a *app) shadowRebaseCmd() *cobra.Command {
	var f shadowFlags
	cmd := &cobra.Command{
		Use:   "rebase SHADOW",
		Short: "Take the real tree's changes to files the shadow left alone into the shadow and its base",
		Args:  cobra.ExactArgs(1),
		RunE: a.shadowAction(&f, true, func(ctx context.Context, cmd *cobra.Command, args []string, actor string, ws *workspace.Workspace, m *shadow.Manager) error {
			r, err := m.Rebase(ctx, args[0], actor)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(r)
			}
			for _, p := range r.Refreshed {
				fmt.Fprintf(a.stdout, "refreshed %s\n", p)
			}
			for _, p := range r.Conflicts {
				fmt.Fprintf(a.stdout, "conflict  %s\n", p)
			}
			return nil
		}),
	}
	f.add(cmd)
	return cmd
}

func (a *app) shadowDiscardCmd() *cobra.Command {
	var f shadowFlags
	var only bool
	cmd := &cobra.Command{
		Use:   "discard SHADOW [--only-violations]",
		Short: "Drop the shadow, or only revert the files its last validation found breaking a rule",
		Args:  cobra.ExactArgs(1),
		RunE: a.shadowAction(&f, true, func(ctx context.Context, cmd *cobra.Command, args []string, actor string, ws *workspace.Workspace, m *shadow.Manager) error {
			d, err := m.Discard(ctx, args[0], actor, only)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(d)
			}
			for _, p := range d.Reverted {
				fmt.Fprintf(a.stdout, "reverted %s\n", p)
			}
			if d.Removed {
				fmt.Fprintf(a.stdout, "discarded %s\n", d.Shadow)
			}
			return nil
		}),
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&only, "only-violations", false, "revert only the files that broke a rule; keep the rest")
	return cmd
}

func (a *app) shadowCheckpointCmd() *cobra.Command {
	var f shadowFlags
	var (
		only    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "checkpoint SHADOW [--ack-timeout D] [--only-violations]",
		Short: "Pause the shadow's agent, validate, then promote or discard, tell the agent and resume it",
		Long: `checkpoint takes a checkpoint of SHADOW as the operator (--as): it pauses
the agent working in it (the admin "tokens" right is needed) and waits up to
--ack-timeout for the agent to ack the pause, going on either way; validates
the shadow as the agent's work; promotes a valid diff, or discards an
invalid shadow (with --only-violations, sets back only the paths that broke
a rule); sends the agent the outcome (shadow_promoted, or shadow_discarded
or partial_revert with the reverted paths and violations, which need its
ack); and resumes the agent, also when a step fails. It prints one line per
step, then the outcome; --json prints the record. It exits 1 when the
diff was not promoted. If it is killed mid-way the agent stays paused:
'wsctl agent resume AGENT' lifts it.`,
		Args: cobra.ExactArgs(1),
		RunE: a.shadowAction(&f, true, func(ctx context.Context, cmd *cobra.Command, args []string, actor string, ws *workspace.Workspace, m *shadow.Manager) error {
			if timeout < 0 {
				return usageErrorf("--ack-timeout %v is negative", timeout)
			}
			opts := shadow.CheckpointOptions{AckTimeout: timeout, OnlyViolations: only}
			if !a.jsonOut {
				opts.Progress = a.printCheckpointStep
			}
			cp, err := m.Checkpoint(ctx, args[0], actor, opts)
			if err != nil {
				return err
			}
			if a.jsonOut {
				if err := a.printJSON(cp); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.stdout, "outcome: %s\n", cp.Outcome)
			}
			if cp.Outcome == shadow.OutcomePromoted {
				return nil
			}
			what := map[string]string{shadow.OutcomeDiscarded: "the shadow was discarded", shadow.OutcomeReverted: "the violating paths were reverted"}[cp.Outcome]
			return &cliError{code: exitError, err: fmt.Errorf("%v: %s, and %s was told", validationFailed(*cp.Validation), what, cp.Agent)}
		}),
	}
	f.add(cmd)
	cmd.Flags().DurationVar(&timeout, "ack-timeout", shadow.DefaultAckTimeout, "wait this long for the agent to ack the pause (the pause message escalates after it)")
	cmd.Flags().BoolVar(&only, "only-violations", false, "on violations, revert only the files that broke a rule and keep the rest")
	return cmd
}

// printCheckpointStep prints the line of one step of a checkpoint.
func (a *app) printCheckpointStep(step string, cp shadow.Checkpoint) {
	w := a.stdout
	switch step {
	case shadow.StepPaused:
		if cp.WasPaused {
			fmt.Fprintf(w, "%s was paused already (message %s): it stays paused after the checkpoint\n", cp.Agent, cp.PauseMessage)
		} else {
			fmt.Fprintf(w, "paused %s (message %s)\n", cp.Agent, cp.PauseMessage)
		}
	case shadow.StepAck:
		switch {
		case cp.Ack != nil:
			fmt.Fprintf(w, "%s acked the pause at %s%s\n", cp.Ack.By, stamp(cp.Ack.At), prefixed(": ", cp.Ack.Reply))
		case cp.Acked:
			fmt.Fprintf(w, "the pause was acked\n")
		default:
			fmt.Fprintf(w, "%s did not ack the pause within %v: going on, its writes are refused while paused\n", cp.Agent, cp.AckTimeout)
		}
	case shadow.StepValidated:
		v := cp.Validation
		if v.Passed {
			fmt.Fprintf(w, "validated: passed (diff %s)\n", v.DiffHash[:12])
			return
		}
		fmt.Fprintf(w, "validated: %d violations\n", len(v.Violations))
		for _, x := range v.Violations {
			fmt.Fprintf(w, "%-8s %s %s\n", x.Rule, orDash(x.Path), strings.ReplaceAll(x.Detail, "\n", "\n         "))
		}
	case shadow.StepPromoted:
		fmt.Fprintf(w, "promoted %d changes; diff kept as artifact %s\n", len(cp.Promotion.Diff.Changes), orDash(cp.Promotion.Artifact))
	case shadow.StepDiscarded:
		fmt.Fprintf(w, "discarded %s: %d changed paths dropped\n", cp.Shadow, len(cp.Discarded.Reverted))
	case shadow.StepReverted:
		for _, p := range cp.Discarded.Reverted {
			fmt.Fprintf(w, "reverted %s\n", p)
		}
		fmt.Fprintf(w, "kept %d changes in the shadow\n", cp.Kept)
	case shadow.StepNotified:
		need := ""
		if cp.Notice.RequiresAck {
			need = ", needs its ack"
		}
		fmt.Fprintf(w, "told %s: %s (message %s)%s\n", cp.Agent, cp.Notice.Type, cp.Notice.ID, need)
	case shadow.StepResumed:
		fmt.Fprintf(w, "resumed %s\n", cp.Agent)
	}
}

func (a *app) shadowGCCmd() *cobra.Command {
	var f shadowFlags
	var age time.Duration
	cmd := &cobra.Command{
		Use:   "gc [--age D]",
		Short: "Remove shadows whose task ended, or whose claim lapsed, longer than D ago",
		Args:  cobra.NoArgs,
		RunE: a.shadowAction(&f, true, func(ctx context.Context, cmd *cobra.Command, args []string, actor string, ws *workspace.Workspace, m *shadow.Manager) error {
			_, sc, err := a.shadowSettings(f)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("age") && sc.GCAge != "" {
				if age, err = time.ParseDuration(sc.GCAge); err != nil || age < 0 {
					return usageErrorf("[shadow] gc_age %q: want a duration like 24h", sc.GCAge)
				}
			}
			removed, err := m.GC(ctx, shadow.GCRequest{Actor: actor, Age: age})
			if a.jsonOut && err == nil {
				return printList(a, removed)
			}
			for _, id := range removed {
				fmt.Fprintf(a.stdout, "removed %s\n", id)
			}
			return err
		}),
	}
	f.add(cmd)
	cmd.Flags().DurationVar(&age, "age", defaultGCAge, "how long ago the task must have ended (default: [shadow] gc_age, else 24h)")
	return cmd
}

func (a *app) shadowRecoverCmd() *cobra.Command {
	var f shadowFlags
	cmd := &cobra.Command{
		Use:   "recover DIR",
		Short: "Finish or undo a promotion into DIR that a crash cut (every shadow command does this first)",
		Args:  cobra.ExactArgs(1),
		RunE: a.shadowAction(&f, false, func(ctx context.Context, cmd *cobra.Command, args []string, actor string, ws *workspace.Workspace, m *shadow.Manager) error {
			if _, err := os.Stat(args[0]); err != nil {
				return &cliError{code: exitUsage, err: err}
			}
			return m.Recover(ctx, args[0])
		}),
	}
	f.add(cmd)
	return cmd
}

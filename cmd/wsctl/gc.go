package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/workspace"
)

// retentionConfig is agentspace.toml's [retention] table, the policy `wsctl
// gc` and `wsctl serve --gc-every` apply unless flags say otherwise:
//
//	[retention]
//	keep_events = 1000000        # keep the newest N events
//	keep_events_for = "720h"     # and those younger than this
//	keep_tasks = "2160h"         # finished tasks updated within this
//	keep_messages = "720h"       # messages sent within this (or still owing an ack)
//	keep_versions = 20           # each artifact's newest N versions
type retentionConfig struct {
	KeepEvents    int64  `toml:"keep_events"`
	KeepEventsFor string `toml:"keep_events_for"`
	KeepTasks     string `toml:"keep_tasks"`
	KeepVersions  int64  `toml:"keep_versions"`
	KeepMessages  string `toml:"keep_messages"`
}

// gcFlags are the retention flags of gc (and serve's schedule).
type gcFlags struct {
	keepEvents    int64
	keepEventsFor string
	keepTasks     string
	keepVersions  int64
	keepMessages  string
	batch         int64
	batchTime     time.Duration
	reclaim       bool
}

func (f *gcFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.Int64Var(&f.keepEvents, "keep-events", 0, "keep the newest N events (overrides [retention] keep_events)")
	fl.StringVar(&f.keepEventsFor, "keep-events-for", "", "keep events younger than this, e.g. 720h (overrides [retention] keep_events_for)")
	fl.StringVar(&f.keepTasks, "keep-tasks", "", "keep finished tasks updated within this, e.g. 2160h; older ones go unless a task that stays names them (overrides [retention] keep_tasks)")
	fl.Int64Var(&f.keepVersions, "keep-versions", 0, "keep each artifact's newest N versions, pinned ones and those task results name (overrides [retention] keep_versions)")
	fl.StringVar(&f.keepMessages, "keep-messages-for", "", "keep messages sent within this, e.g. 720h; older ones go unless they still owe an ack (overrides [retention] keep_messages)")
	fl.BoolVar(&f.reclaim, "reclaim", false, "give freed space back to the file system (sqlite: incremental vacuum; the first on a file made by an older version is one VACUUM that holds writers)")
	fl.Int64Var(&f.batch, "batch", 0, "most events, versions or tasks removed per transaction (default 10000)")
	fl.DurationVar(&f.batchTime, "batch-time", 0, "how long one transaction may hold the write lock (default 10ms): batches are sized to it, so writers wait for one short batch at most")
}

// policy merges the config file's [retention] with the flags set on cmd.
func (a *app) gcPolicy(cmd *cobra.Command, f gcFlags) (workspace.GCPolicy, error) {
	p := workspace.GCPolicy{Batch: f.batch, BatchTime: f.batchTime, Reclaim: f.reclaim}
	rc, err := a.retentionConfig()
	if err != nil {
		return p, err
	}
	if cmd.Flags().Changed("keep-events") {
		rc.KeepEvents = f.keepEvents
	}
	if cmd.Flags().Changed("keep-events-for") {
		rc.KeepEventsFor = f.keepEventsFor
	}
	if cmd.Flags().Changed("keep-tasks") {
		rc.KeepTasks = f.keepTasks
	}
	if cmd.Flags().Changed("keep-versions") {
		rc.KeepVersions = f.keepVersions
	}
	if cmd.Flags().Changed("keep-messages-for") {
		rc.KeepMessages = f.keepMessages
	}
	p.KeepEvents, p.KeepVersions = rc.KeepEvents, rc.KeepVersions
	for _, d := range []struct {
		name, val string
		to        *time.Duration
	}{{"keep events for", rc.KeepEventsFor, &p.KeepEventsFor}, {"keep tasks", rc.KeepTasks, &p.KeepTasksFor}, {"keep messages", rc.KeepMessages, &p.KeepMessagesFor}} {
		if d.val == "" {
			continue
		}
		v, err := time.ParseDuration(d.val)
		if err != nil || v <= 0 {
			return p, usageErrorf("%s %q: want a positive duration such as 720h", d.name, d.val)
		}
		*d.to = v
	}
	if p.KeepEvents == 0 && p.KeepEventsFor == 0 && p.KeepTasksFor == 0 && p.KeepVersions == 0 && p.KeepMessagesFor == 0 && !p.Reclaim {
		return p, usageErrorf("no retention policy: set --keep-events, --keep-events-for, --keep-versions, --keep-tasks or --keep-messages-for, or [retention] in agentspace.toml")
	}
	return p, nil
}

func (a *app) gcCmd() *cobra.Command {
	var (
		f      gcFlags
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "gc [--dry-run] [--keep-events N] [--keep-events-for DURATION] [--keep-versions N] [--keep-tasks DURATION] [--keep-messages-for DURATION] [--reclaim]",
		Short: "Remove events, artifact versions, finished tasks and answered messages the retention policy does not keep (--dry-run: only report)",
		Long: `Compact the event log below the oldest event the retention policy keeps
(the newest --keep-events, and those younger than --keep-events-for; an
event either rule keeps stays), in transactions sized to hold the write
lock for about --batch-time each, resting as long between them, so
writers are never held up for long. With --keep-versions, each artifact
keeps its newest N versions, the versions pinned with 'wsctl artifact
pin' and those a task's result names; older ones go with the content no
kept version shares. With --keep-tasks, finished tasks
(done, cancelled) last updated before then go too, except those a task
that stays depends on or has as its parent. With --keep-messages-for,
messages sent before then go with their inbox entries, except those that
still owe an ack. Record what went as a
workspace.gc event. The policy comes from agentspace.toml's [retention]
table; flags override it. The hash chain keeps verifying from the new
floor. Readers and subscribers asking for removed events get a
compacted error with the floor. See docs/retention.md.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			p, err := a.gcPolicy(cmd, f)
			if err != nil {
				return err
			}
			p.DryRun = dryRun
			if !dryRun {
				if p.Actor, err = a.actor(); err != nil {
					return err
				}
			} else {
				p.Actor = "dry-run"
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				r, err := ws.GC(ctx, p)
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(r)
				}
				verb := "removed"
				if r.DryRun {
					verb = "would remove"
				}
				fmt.Fprintf(a.stdout, "events: %s %d (%d bytes), floor %d -> %d", verb, r.Events.Count, r.Events.Bytes, r.Floor, r.FloorAfter)
				if p.KeepVersions > 0 {
					fmt.Fprintf(a.stdout, "; versions: %s %d (%d bytes)", verb, r.Versions.Count, r.Versions.Bytes)
				}
				if p.KeepTasksFor > 0 {
					fmt.Fprintf(a.stdout, "; tasks: %s %d (%d bytes)", verb, r.Tasks.Count, r.Tasks.Bytes)
				}
				if p.KeepMessagesFor > 0 {
					fmt.Fprintf(a.stdout, "; messages: %s %d (%d bytes)", verb, r.Messages.Count, r.Messages.Bytes)
				}
				if r.Seq > 0 {
					fmt.Fprintf(a.stdout, " in %d batches (longest %v); recorded as event %d", r.Batches, r.LongestBatch.Round(time.Microsecond), r.Seq)
				}
				if p.Reclaim && !r.DryRun {
					fmt.Fprintf(a.stdout, "; reclaimed %d bytes", r.Reclaimed)
				}
				if r.Reclaimable > 0 {
					fmt.Fprintf(a.stdout, "; %d bytes free in the store (--reclaim gives them back)", r.Reclaimable)
				}
				fmt.Fprintln(a.stdout)
				return nil
			})
		}),
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would go; remove nothing")
	return cmd
}

// retentionConfig is the [retention] table of the config file --config
// names or, without it, of the nearest agentspace.toml (none: zero), read
// whichever way the DSN was chosen.
func (a *app) retentionConfig() (retentionConfig, error) {
	path := a.configFlag
	if path == "" {
		found, err := findUp()
		if err != nil || found.config == "" {
			return retentionConfig{}, err
		}
		path = found.config
	}
	cfg, err := readConfig(path)
	if err != nil {
		return retentionConfig{}, usageErrorf("%v", err)
	}
	return cfg.Retention, nil
}

// scheduleGC runs gc with the retention policy every `every` until ctx
// ends or the returned stop is called (stop waits for a run under way). A
// failed run is logged and tried again at the next tick.
func (a *app) scheduleGC(ctx context.Context, cmd *cobra.Command, ws *workspace.Workspace, every time.Duration, f gcFlags,
	logger *slog.Logger) (stop func(), err error) {
	if every <= 0 {
		return func() {}, nil
	}
	p, err := a.gcPolicy(cmd, f)
	if err != nil {
		return nil, err
	}
	p.Actor, p.MinEvents = "wsctl-serve", 2
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			r, err := ws.GC(ctx, p)
			if err != nil {
				logger.Warn("wsctl serve: gc failed", "err", err)
				continue
			}
			if r.Seq > 0 {
				logger.Info("wsctl serve: gc", "events", r.Events.Count, "bytes", r.Events.Bytes, "floor", r.FloorAfter, "tasks", r.Tasks.Count, "seq", r.Seq)
			}
		}
	}()
	return func() { cancel(); <-done }, nil
}

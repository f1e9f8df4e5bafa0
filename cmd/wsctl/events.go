package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/workspace"
)

func (a *app) eventsCmd() *cobra.Command {
	var (
		after  int64
		types  []string
		actor  string
		limit  int
		follow bool
	)
	cmd := &cobra.Command{
		Use:   "events [--after SEQ] [--type T]... [--follow]",
		Short: "Print the event log; --follow streams new events live",
		Long: `Print the event log, oldest first: every event after --after SEQ (default:
all). With --follow, keep streaming new events as they are committed, by any
process or host; without --after it starts at the current head. The stream
survives a restarting server: it keeps its cursor and resumes without a gap.
With --json, one JSON event per line (NDJSON).`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if after < 0 {
				return usageErrorf("--after %d is negative", after)
			}
			if limit < 0 {
				return usageErrorf("--limit %d is negative", limit)
			}
			q := workspace.EventQuery{AfterSeq: after, Types: types, Actor: actor}
			return a.with(ctx, func(ws workspace.Workspace) error {
				if follow {
					if !cmd.Flags().Changed("after") {
						head, err := ws.Events().Head(ctx)
						if err != nil {
							return err
						}
						q.AfterSeq = head
					}
					return a.follow(ctx, ws, q, limit)
				}
				printed := 0
				for {
					q.Limit = pageSize(limit, printed)
					page, err := ws.Events().Read(ctx, q)
					if err != nil {
						return err
					}
					for _, ev := range page.Events {
						if err := a.printEvent(ev); err != nil {
							return err
						}
					}
					printed += len(page.Events)
					if page.Next >= page.Head || (limit > 0 && printed >= limit) {
						return nil
					}
					q.AfterSeq = page.Next
				}
			})
		}),
	}
	f := cmd.Flags()
	f.Int64Var(&after, "after", 0, "only events with a seq above SEQ")
	f.StringArrayVar(&types, "type", nil, "only events of this type, e.g. task.claimed (repeatable)")
	f.StringVar(&actor, "actor", "", "only events by this actor")
	f.IntVar(&limit, "limit", 0, "at most N events, then exit (default: all; with --follow: until interrupted)")
	f.BoolVar(&follow, "follow", false, "keep streaming new events until interrupted")
	return cmd
}

// follow streams events until ctx ends. A transient failure (a restarting
// server) keeps the cursor and resubscribes, so nothing is missed or repeated.
func (a *app) follow(ctx context.Context, ws workspace.Workspace, q workspace.EventQuery, limit int) error {
	backoff := 100 * time.Millisecond
	printed := 0
	for {
		sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: q})
		if err == nil {
			backoff = 100 * time.Millisecond
			for {
				m, nerr := sub.Next(ctx)
				if nerr != nil {
					err = nerr
					break
				}
				if m.Progress {
					q.AfterSeq = max(q.AfterSeq, m.Head)
					continue
				}
				if perr := a.printEvent(m.Event); perr != nil {
					_ = sub.Close()
					return perr
				}
				q.AfterSeq = m.Event.Seq
				if printed++; limit > 0 && printed >= limit {
					_ = sub.Close()
					return nil
				}
			}
			_ = sub.Close()
		}
		switch {
		case ctx.Err() != nil:
			return nil // interrupted: the normal end of a tail
		case errors.Is(err, workspace.ErrCompacted), errors.Is(err, workspace.ErrInvalid), errors.Is(err, workspace.ErrClosed):
			return err
		}
		fmt.Fprintf(a.stderr, "wsctl: events: %v; resuming after seq %d in %s\n", workspace.RedactError(err, a.dsn), q.AfterSeq, backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// printEvent prints one event: an NDJSON line with --json, else one line
// for people. Each line is flushed at once, so a tail is live.
func (a *app) printEvent(ev workspace.Event) error {
	if a.jsonOut {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = a.stdout.Write(append(b, '\n'))
		return err
	}
	_, err := io.WriteString(a.stdout, formatEvent(ev)+"\n")
	return err
}

func formatEvent(ev workspace.Event) string {
	s := fmt.Sprintf("%d %s %s %s %s", ev.Seq, stamp(ev.Time), ev.Actor, ev.Type, subjectLabel(ev.Subject))
	if ev.Version != 0 {
		s += fmt.Sprintf(" v%d", ev.Version)
	}
	if ev.Message != "" {
		s += " " + fmt.Sprintf("%q", ev.Message)
	}
	return s
}

func subjectLabel(s workspace.Subject) string {
	switch s.Kind {
	case workspace.SubjectTask:
		return "task:" + s.ID
	case workspace.SubjectNote:
		return "note:" + s.ID
	case workspace.SubjectLock:
		return "lock:" + s.ID
	case workspace.SubjectArtifact:
		if s.Name != "" {
			return "artifact:" + s.Name
		}
	}
	if s.Name != "" {
		return s.Kind + ":" + s.Name
	}
	return s.Kind + ":" + s.ID
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// eventTypes are the event types the workspace writes (workspace.Event*):
// a --type outside them would silently match nothing.
var eventTypes = []string{
	workspace.EventArtifactCreated, workspace.EventArtifactUpdated, workspace.EventArtifactDeleted, workspace.EventArtifactRolledBack,
	workspace.EventTaskCreated, workspace.EventTaskUpdated, workspace.EventTaskClaimed, workspace.EventTaskReleased,
	workspace.EventNotePut, workspace.EventNoteDeleted,
	workspace.EventLockAcquired, workspace.EventLockRenewed, workspace.EventLockReleased, workspace.EventLockExpired, workspace.EventLockForced, workspace.EventLockWaited,
	workspace.EventConflict, workspace.EventDenied, workspace.EventGC,
	workspace.EventMessageSent, workspace.EventMessageAcked, workspace.EventMessageEscalated, workspace.EventMessageRead,
	workspace.EventActorPaused, workspace.EventActorResumed,
}

func (a *app) eventsCmd() *cobra.Command {
	var (
		after   int64
		types   []string
		actor   string
		subject string
		since   string
		limit   int
		tail    int
		follow  bool
	)
	cmd := &cobra.Command{
		Use:   "events [--after SEQ] [--tail N] [--since 10m] [--type T]... [--subject S] [--follow]",
		Short: "Print the event log; --follow streams new events live",
		Long: `Print the event log, oldest first: every event after --after SEQ (default:
all), or only the last --tail N. With --follow, keep streaming new events as
they are committed, by any process or host; without --after or --tail it
starts at the current head. The stream survives a restarting server: it
keeps its cursor and resumes without a gap. With --json, one JSON event per
line (NDJSON).

--subject picks one record's events: artifact:NAME, task:ID (or a unique
prefix of the id), note:KIND/KEY, lock:RESOURCE; a bare NAME matches any
record by its name (artifact name, task title, note key, lock resource).
--since takes a duration back from now (10m, 2h) or an RFC 3339 time.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			switch {
			case after < 0:
				return usageErrorf("--after %d is negative", after)
			case limit < 0:
				return usageErrorf("--limit %d is negative", limit)
			case tail < 0:
				return usageErrorf("--tail %d is negative", tail)
			case cmd.Flags().Changed("tail") && limit > 0 && !follow:
				return usageErrorf("--tail and --limit exclude each other (but with --follow, --limit counts the new events)")
			}
			var want []string
			for _, list := range types {
				// Comma-separated, as the API's type= takes them.
				for _, t := range strings.Split(list, ",") {
					if t = strings.TrimSpace(t); t == "" {
						continue
					}
					if !slices.Contains(eventTypes, t) {
						return usageErrorf("--type %q: unknown event type; known: %s", t, strings.Join(eventTypes, ", "))
					}
					want = append(want, t)
				}
			}
			q := workspace.EventQuery{AfterSeq: after, Types: want, Actor: actor}
			if since != "" {
				t, err := parseSince(since, now())
				if err != nil {
					return err
				}
				q.Since = t
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				if err := setSubject(ctx, ws, &q, subject); err != nil {
					return err
				}
				if cmd.Flags().Changed("tail") {
					last, head, err := tailEvents(ctx, ws, q, tail)
					if err != nil {
						return err
					}
					for _, ev := range last {
						if err := a.printEvent(ev); err != nil {
							return err
						}
					}
					if !follow {
						return nil
					}
					q.AfterSeq = head
					return a.follow(ctx, ws, q, limit)
				}
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
	f.IntVar(&tail, "tail", 0, "only the last N matching events (then, with --follow, new ones)")
	f.StringVar(&since, "since", "", "only events from this long ago (10m, 2h) or since this RFC 3339 time")
	f.StringArrayVar(&types, "type", nil, "only events of these types, e.g. task.claimed or task.claimed,denied (repeatable)")
	f.StringVar(&actor, "actor", "", "only events by this actor")
	f.StringVar(&subject, "subject", "", "only events of one record: artifact:NAME, task:ID, note:KIND/KEY, lock:RESOURCE, or a bare name")
	f.IntVar(&limit, "limit", 0, "at most N events, then exit (default: all; with --follow: until interrupted)")
	f.BoolVar(&follow, "follow", false, "keep streaming new events until interrupted")
	return cmd
}

// parseSince reads --since: a duration back from ref, or an RFC 3339 time.
func parseSince(s string, ref time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, usageErrorf("--since %q: want a positive duration (how long ago)", s)
		}
		return ref.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, usageErrorf("--since %q: want a duration such as 10m or 2h, or an RFC 3339 time such as 2026-05-01T10:00:00Z", s)
}

// setSubject narrows q to the record --subject names (see the events help).
func setSubject(ctx context.Context, ws *workspace.Workspace, q *workspace.EventQuery, subject string) error {
	if subject == "" {
		return nil
	}
	kind, rest, _ := strings.Cut(subject, ":")
	if rest == "" {
		q.SubjectName = subject
		return nil
	}
	switch kind {
	case workspace.SubjectArtifact:
		q.SubjectKind, q.SubjectName = kind, rest
	case workspace.SubjectTask:
		id, err := resolveTaskID(ctx, ws, rest)
		if err != nil {
			return err
		}
		q.SubjectKind, q.SubjectID = kind, id
	case workspace.SubjectNote, workspace.SubjectLock:
		q.SubjectKind, q.SubjectID = kind, rest
	default:
		q.SubjectName = subject
	}
	return nil
}

// tailEvents returns the last n events matching q, and the head the read
// ended at. Unfiltered, it reads only those n; filtered, it reads every
// event after q.AfterSeq, keeping the last n.
func tailEvents(ctx context.Context, ws *workspace.Workspace, q workspace.EventQuery, n int) ([]workspace.Event, int64, error) {
	unfiltered := len(q.Types) == 0 && q.Actor == "" && q.SubjectKind == "" && q.SubjectID == "" && q.SubjectName == "" && q.Since.IsZero()
	if unfiltered {
		head, err := ws.Events().Head(ctx)
		if err != nil {
			return nil, 0, err
		}
		q.AfterSeq = max(q.AfterSeq, head-int64(n))
		if head-q.AfterSeq <= 0 || n == 0 {
			return nil, head, nil
		}
	}
	var last []workspace.Event
	for {
		q.Limit = 1000
		page, err := ws.Events().Read(ctx, q)
		if err != nil {
			return nil, 0, err
		}
		last = append(last, page.Events...)
		if len(last) > n {
			last = append(last[:0:0], last[len(last)-n:]...)
		}
		if page.Next >= page.Head {
			return last, page.Head, nil
		}
		q.AfterSeq = page.Next
	}
}

// follow streams events until ctx ends. A transient failure (a restarting
// server) keeps the cursor and resubscribes, so nothing is missed or repeated.
func (a *app) follow(ctx context.Context, ws *workspace.Workspace, q workspace.EventQuery, limit int) error {
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
		case errors.Is(err, workspace.ErrCompacted), errors.Is(err, workspace.ErrInvalid), errors.Is(err, workspace.ErrClosed),
			errors.Is(err, workspace.ErrRewound): // the same cursor would be refused again
			return err
		}
		fmt.Fprintf(a.stderr, "wsctl: events: %v; resuming after seq %d in %s\n", driver.RedactError(err, a.dsn), q.AfterSeq, backoff)
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

// formatEvent is one event for people: seq, time (and how long ago),
// actor, type, the record (a task with its title), version and message.
func formatEvent(ev workspace.Event) string {
	s := fmt.Sprintf("%d %s %s %s %s", ev.Seq, when(ev.Time), ev.Actor, ev.Type, subjectLabel(ev.Subject))
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
		if s.Name != "" {
			return "task:" + s.ID + " (" + s.Name + ")"
		}
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

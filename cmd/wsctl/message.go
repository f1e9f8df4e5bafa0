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
)

// pausedHint is what a paused actor should do.
const pausedHint = "ack the pause message ('wsctl ack ID') and wait to be resumed"

// maxBody bounds a body read from stdin: the engine refuses one over its
// limit with its own message, so read one byte more than any it takes.
const maxBody = 1 << 20

func (a *app) sendCmd() *cobra.Command {
	var (
		m        workspace.NewMsg
		body     string
		data     string
		deadline string
	)
	c := &cobra.Command{
		Use:   "send TO... [-s SUBJECT] [-m BODY]",
		Short: "Send a message to agents or roles (role:NAME); prints its id",
		Long: `send sends a message as --as (or AGENTSPACE_ACTOR) to each TO: an agent's
name, or role:NAME for a role of the policy (any one member answers it;
--each asks every member). The body is -m, else stdin. --ack asks each
recipient for an acknowledgement ('wsctl ack ID'), by --deadline if given
(a duration such as 10m, or an RFC 3339 time); past it, unacknowledged,
the message is escalated once to --escalate-to (default: role:admin).
--reply-to joins the thread of the message it answers. Prints the
message's id; --json prints the message. See docs/messages.md.`,
		Args: cobra.MinimumNArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			m.To = args
			if cmd.Flags().Changed("message") {
				m.Body = body
			} else {
				b, err := a.readBody()
				if err != nil {
					return err
				}
				m.Body = b
			}
			if data != "" {
				if !json.Valid([]byte(data)) {
					return usageErrorf("--data %q: not JSON; want a JSON object such as '{\"path\":\"a.go\"}'", short(data, 40))
				}
				m.Data = json.RawMessage(data)
			}
			if deadline != "" {
				if m.Deadline, err = parseDeadline(deadline, time.Now()); err != nil {
					return err
				}
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				sent, err := ws.Messages().Send(ctx, workspace.Write{Actor: actor}, m)
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(sent)
				}
				fmt.Fprintln(a.stdout, sent.ID)
				return nil
			})
		}),
	}
	f := c.Flags()
	f.StringVarP(&m.Subject, "subject", "s", "", "a one-line subject")
	f.StringVarP(&body, "message", "m", "", "the body (default: read from stdin)")
	f.StringVar(&m.Type, "type", "", "what it is, a lower-case word: note (default), question, review, …")
	f.StringVar(&m.Severity, "severity", "", "info (default), warning, error or critical")
	f.StringVar(&data, "data", "", "structured data: a JSON object")
	f.BoolVar(&m.RequiresAck, "ack", false, "ask each recipient for an acknowledgement")
	f.StringVar(&deadline, "deadline", "", "with --ack: the acknowledgement is due in this long (10m) or at this time (RFC 3339)")
	f.StringArrayVar(&m.EscalateTo, "escalate-to", nil, "with --ack: whom to tell when the deadline passes (repeatable; default role:admin)")
	f.StringVar(&m.ReplyTo, "reply-to", "", "the id of the message this answers (joins its thread)")
	f.BoolVar(&m.Each, "each", false, "a role recipient: every member answers, not any one")
	return c
}

// readBody reads a message's body from stdin, without its final newline.
func (a *app) readBody() (string, error) {
	if err := a.checkStdinPiped("pass it with -m BODY, or pipe it in"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(a.stdin, maxBody+1))
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

// parseDeadline reads --deadline: a duration from ref, or an RFC 3339
// time. One in the past is the engine's to refuse, with its message.
func parseDeadline(s string, ref time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return ref.Add(d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, usageErrorf("--deadline %q: want a duration such as 10m or 2h, or an RFC 3339 time such as 2026-05-01T10:00:00Z", s)
}

// short cuts s to n runes.
func short(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// inboxOut is inbox's --json answer: the page, and with --or-task the
// tasks ready to claim when the wait ended.
type inboxOut struct {
	workspace.InboxPage
	Ready []workspace.Task `json:"ready,omitempty"`
}

func (a *app) inboxCmd() *cobra.Command {
	var (
		q        workspace.InboxQuery
		timeout  time.Duration
		markRead bool
		orTask   bool
		ids      bool
	)
	c := &cobra.Command{
		Use:   "inbox [--unread|--unacked] [--wait [--timeout D] [--or-task]]",
		Short: "Read your messages: all, unread or awaiting your ack; --wait blocks until one comes",
		Long: `inbox lists the messages sent to --as (or AGENTSPACE_ACTOR) or to a role it
holds, oldest first, and below them how many are unread and how many await
its ack. --unread keeps those after its read cursor, --unacked those it
still owes an ack ('wsctl ack ID'), --thread one thread's. --mark-read
moves the read cursor past the messages shown: an agent that restarts
resumes there. --ids prints only the ids: for id in $(wsctl inbox --unacked
--ids); do ...; wsctl ack "$id"; done.

--wait blocks until the list would hold a message (--timeout ends the wait
with an empty list and exit 0); with --or-task it also returns when a task
is ready to claim, listing it: the wait of a shell loop that has nothing
else to do. Both waits are woken by the workspace's events, not by polling.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			if q.Unread && q.Unacked {
				return usageErrorf("--unread and --unacked: choose one")
			}
			if (timeout != 0 || orTask) && !q.Wait {
				return usageErrorf("--timeout and --or-task go with --wait")
			}
			if timeout < 0 {
				return usageErrorf("--timeout %v is negative", timeout)
			}
			q.Actor = actor
			return a.with(ctx, func(ws *workspace.Workspace) error {
				out, err := waitInbox(ctx, ws, q, timeout, orTask)
				if err != nil {
					return err
				}
				if markRead && len(out.Messages) > 0 {
					last := out.Messages[len(out.Messages)-1].ID
					if err := ws.Messages().MarkRead(ctx, actor, last); err != nil {
						return err
					}
					// The counts are the inbox's after the move.
					if out.Unread, err = unreadAfter(ctx, ws, actor); err != nil {
						return err
					}
				}
				if a.jsonOut {
					if out.Messages == nil {
						out.Messages = []workspace.Msg{}
					}
					return a.printJSON(out)
				}
				if ids {
					for _, m := range out.Messages {
						fmt.Fprintln(a.stdout, m.ID)
					}
					return nil
				}
				for _, m := range out.Messages {
					a.printMsg(m, actor)
				}
				for _, t := range out.Ready {
					fmt.Fprintf(a.stdout, "ready  %s %q\n", t.ID, t.Title)
				}
				if line := inboxLine(out.InboxPage); line != "" {
					fmt.Fprintln(a.stdout, line)
				}
				return nil
			})
		}),
	}
	f := c.Flags()
	f.BoolVar(&q.Unread, "unread", false, "only messages after your read cursor")
	f.BoolVar(&q.Unacked, "unacked", false, "only messages that await your ack")
	f.StringVar(&q.Thread, "thread", "", "only this thread's messages (its first message's id)")
	f.IntVar(&q.Limit, "limit", 0, "at most N messages (default 100)")
	f.BoolVar(&q.Wait, "wait", false, "wait until there is a message to list")
	f.DurationVar(&timeout, "timeout", 0, "with --wait: give up after this long (default: wait until interrupted)")
	f.BoolVar(&orTask, "or-task", false, "with --wait: also return when a task is ready to claim")
	f.BoolVar(&markRead, "mark-read", false, "move your read cursor past the messages listed")
	f.BoolVar(&ids, "ids", false, "print only the messages' ids, one a line (for 'wsctl ack')")
	return c
}

// unreadAfter is actor's unread count now.
func unreadAfter(ctx context.Context, ws *workspace.Workspace, actor string) (int, error) {
	p, err := ws.Messages().Inbox(ctx, workspace.InboxQuery{Actor: actor, Unread: true, Limit: 1})
	return p.Unread, err
}

// waitInbox reads q's page; with q.Wait it blocks until the page holds a
// message or, with orTask, a task is ready to claim, whichever is first,
// or timeout (if not 0) passes: then the page is empty and no error. The
// inbox's wait is the engine's; the task's is woken by task events.
func waitInbox(ctx context.Context, ws *workspace.Workspace, q workspace.InboxQuery, timeout time.Duration, orTask bool) (inboxOut, error) {
	if !q.Wait {
		p, err := ws.Messages().Inbox(ctx, q)
		return inboxOut{InboxPage: p}, err
	}
	wctx, cancel := context.WithCancel(ctx)
	if timeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	type result struct {
		out inboxOut
		err error
	}
	done := make(chan result, 2)
	go func() {
		p, err := ws.Messages().Inbox(wctx, q)
		done <- result{inboxOut{InboxPage: p}, err}
	}()
	waiters := 1
	if orTask {
		waiters++
		go func() {
			ts, err := waitReady(wctx, ws)
			done <- result{inboxOut{Ready: ts}, err}
		}()
	}
	var first result
	for i := range waiters {
		r := <-done
		if i == 0 {
			first = r
			cancel() // the other waiter ends, and is waited for
		}
	}
	if timeout > 0 && errors.Is(first.err, context.DeadlineExceeded) && ctx.Err() == nil {
		// The timeout passed with nothing: an empty page with the counts.
		q.Wait = false
		p, err := ws.Messages().Inbox(ctx, q)
		return inboxOut{InboxPage: p}, err
	}
	if first.err != nil {
		return inboxOut{}, first.err
	}
	if first.out.Ready != nil {
		// Woken by a task: the page (empty, or what came meanwhile) and its counts.
		q.Wait = false
		p, err := ws.Messages().Inbox(ctx, q)
		return inboxOut{InboxPage: p, Ready: first.out.Ready}, err
	}
	return first.out, nil
}

// waitReady returns the tasks ready to claim (pending, every dependency
// done) once there is one. It subscribes to task events from the head
// before it looks, so a task made ready between its look and its wait
// wakes it: a look follows every task event after the head it read.
func waitReady(ctx context.Context, ws *workspace.Workspace) ([]workspace.Task, error) {
	head, err := ws.Events().Head(ctx)
	if err != nil {
		return nil, err
	}
	sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{
		Query: workspace.EventQuery{AfterSeq: head, SubjectKind: workspace.SubjectTask}, Heartbeat: -1})
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	for {
		ready, err := readyTasks(ctx, ws)
		if err != nil || len(ready) > 0 {
			return ready, err
		}
		for {
			m, err := sub.Next(ctx)
			if err != nil {
				return nil, err
			}
			if !m.Progress {
				break
			}
		}
	}
}

// readyTasks are the tasks claim would take: pending, every dependency done.
func readyTasks(ctx context.Context, ws *workspace.Workspace) ([]workspace.Task, error) {
	f := workspace.TaskFilter{Status: workspace.TaskPending}
	all, err := listAll(0, func(n int, after string) ([]workspace.Task, string, error) {
		f.Limit, f.After = n, after
		page, err := ws.Tasks().List(ctx, f)
		return page.Tasks, page.Next, err
	})
	if err != nil {
		return nil, err
	}
	waits, err := waitingOn(ctx, ws, all)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(t workspace.Task) bool { return len(waits[t.ID]) > 0 }), nil
}

// printMsg prints one message for people: a line of who, what and its ack
// state, then its subject and body, indented.
func (a *app) printMsg(m workspace.Msg, reader string) {
	state := ""
	switch {
	case m.RequiresAck && owes(m, reader):
		state = "  NEEDS YOUR ACK"
		if !m.Deadline.IsZero() {
			state += " by " + stamp(m.Deadline)
		}
	case m.RequiresAck && len(m.Pending) == 0:
		state = "  acked"
	case m.RequiresAck:
		state = "  awaits ack from " + strings.Join(m.Pending, ",")
	}
	if !m.EscalatedAt.IsZero() {
		state += "  escalated"
	}
	fmt.Fprintf(a.stdout, "%s %s %s -> %s  %s %s%s\n", m.ID, stamp(m.SentAt), m.From, strings.Join(m.To, ","), m.Severity, m.Type, state)
	if m.Subject != "" {
		fmt.Fprintf(a.stdout, "    %s\n", m.Subject)
	}
	for line := range strings.SplitSeq(m.Body, "\n") {
		fmt.Fprintf(a.stdout, "    %s\n", line)
	}
	if len(m.Data) > 0 {
		fmt.Fprintf(a.stdout, "    data %s\n", m.Data)
	}
	for _, k := range m.Acks {
		fmt.Fprintf(a.stdout, "    acked by %s at %s%s\n", k.By, stamp(k.At), prefixed(": ", k.Reply))
	}
}

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

// owes reports whether actor (or a role it answers for: any pending role
// the message names, as the reader sees it) still owes m an ack.
func owes(m workspace.Msg, actor string) bool {
	for _, p := range m.Pending {
		if p == actor || strings.HasPrefix(p, "role:") {
			return true
		}
	}
	return false
}

// inboxLine is the one line that sums up an inbox: unread, awaiting an
// ack, paused; "" when there is nothing to say.
func inboxLine(p workspace.InboxPage) string {
	var parts []string
	if p.Unread > 0 {
		parts = append(parts, fmt.Sprintf("%d unread", p.Unread))
	}
	if p.Unacked > 0 {
		parts = append(parts, fmt.Sprintf("%d awaiting your ack", p.Unacked))
	}
	if p.Paused {
		parts = append(parts, "you are paused: "+pausedHint)
	}
	return strings.Join(parts, ", ")
}

func (a *app) ackCmd() *cobra.Command {
	var reply string
	c := &cobra.Command{
		Use:   "ack ID [-m REPLY]",
		Short: "Acknowledge a message that awaits your ack, with an optional short reply",
		Long: `ack records --as's acknowledgement of message ID, once: a second ack of
the same message answers with the first one's record. A paused agent may
ack (its pause message first). Acking a message that needs no ack, or one
that is not yours to ack, is refused and writes nothing.`,
		Args: cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				m, err := ws.Messages().Ack(ctx, workspace.Write{Actor: actor}, args[0], reply)
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(m)
				}
				// The record that answers for actor: its own, or the first.
				for _, k := range m.Acks {
					if k.By == actor || k.For == actor {
						fmt.Fprintf(a.stdout, "acked %s by %s at %s\n", m.ID, k.By, stamp(k.At))
						return nil
					}
				}
				fmt.Fprintf(a.stdout, "acked %s\n", m.ID)
				return nil
			})
		}),
	}
	c.Flags().StringVarP(&reply, "message", "m", "", "a short reply, kept with the ack")
	return c
}

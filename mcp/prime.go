package mcp

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// Instructions is what the server tells a client at start: what the
// workspace is and the loop that keeps agents from stepping on each
// other. `wsctl prime` prints it too, with a live summary.
const Instructions = `This is an agentspace workspace: the shared, persistent memory of a team of agents.
Artifacts are versioned content (plans, code, reviews); tasks are a queue that hands each
task to exactly one agent; notes hold decisions and constraints; locks are leases with
fencing tokens; every change is an event in one ordered log.

The loop:
1. task_claim: take the next ready task (no one else gets it). Its lease lapses unless you
   task_update action=heartbeat (every minute or two on long work).
2. lock op=acquire on what you will edit (e.g. artifact:NAME); keep its token.
3. artifact_read, then artifact_write with if_version = the version you read and
   fence = your token. A conflict means someone wrote first: re-read, merge, retry with
   the version it reports. "locked" names the holder and when the lease ends.
4. task_update action=done with a summary and the artifacts you wrote; lock op=release.
Record decisions others must follow with note op=put kind=decision. Follow others' work
with events_wait from the head seq status gives you, rather than polling.`

// cliLoop is Instructions' loop in wsctl commands, for agents with a shell.
const cliLoop = `Same loop from a shell: wsctl task claim --json; wsctl lock acquire artifact:NAME --ttl 5m;
wsctl artifact get NAME; wsctl artifact put NAME --file F --if-version N --fence T;
wsctl task done ID --summary "..." --artifact NAME; wsctl events --follow.`

// PrimeOptions say whom Prime is for and how much of the log it shows.
type PrimeOptions struct {
	// Actor is the agent starting work; its claims and leases are listed.
	Actor string
	// Decisions is how many recent decision notes to show (default 5).
	Decisions int
}

// Prime writes what an agent needs when it starts work: Instructions,
// the commands for a shell, and a short live summary of the workspace
// (tasks ready and in progress, what Actor holds, recent decisions).
// It reads through the public API only.
func Prime(ctx context.Context, ws *workspace.Workspace, w io.Writer, o PrimeOptions) error {
	if o.Decisions <= 0 {
		o.Decisions = 5
	}
	st, err := ws.Status(ctx)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# agentspace\n\n")
	b.WriteString(Instructions)
	b.WriteString("\n\n")
	b.WriteString(cliLoop)
	b.WriteString("\n\n## Now\n")
	who := o.Actor
	if who == "" {
		who = "(no actor: set AGENTSPACE_ACTOR or --as before writing)"
	}
	fmt.Fprintf(&b, "You act as %s. Event head: %d.\n", who, st.Head)
	if o.Actor != "" {
		b.WriteString(inboxBrief(ctx, ws, o.Actor))
	}
	fmt.Fprintf(&b, "Tasks: %d pending, %d in progress, %d blocked, %d done, %d failed. Artifacts: %d. Notes: %d.\n",
		st.Tasks[workspace.TaskPending], st.Tasks[workspace.TaskInProgress], st.Tasks[workspace.TaskBlocked],
		st.Tasks[workspace.TaskDone], st.Tasks[workspace.TaskFailed], st.Artifacts, st.Notes)
	if pending, err := ws.Tasks().List(ctx, workspace.TaskFilter{Status: workspace.TaskPending, Limit: 5}); err == nil && len(pending.Tasks) > 0 {
		b.WriteString("Next pending tasks:\n")
		for _, t := range pending.Tasks {
			fmt.Fprintf(&b, "- %s (priority %d) %s\n", short(t.Title, 80), t.Priority, t.ID)
		}
	}
	var mine, others []string
	for _, t := range st.ActiveTasks {
		line := fmt.Sprintf("- %s %s, lease until %s", short(t.Title, 80), t.ID, t.LeaseExpiresAt.UTC().Format(time.RFC3339))
		if t.Assignee == o.Actor && o.Actor != "" {
			mine = append(mine, line)
		} else {
			others = append(others, line+" ("+t.Assignee+")")
		}
	}
	var myLocks []string
	for _, l := range st.Locks {
		if l.Owner == o.Actor && o.Actor != "" {
			myLocks = append(myLocks, fmt.Sprintf("- %s token %d until %s", l.Resource, l.Token, l.ExpiresAt.UTC().Format(time.RFC3339)))
		}
	}
	list := func(title string, lines []string, most int) {
		if len(lines) == 0 {
			return
		}
		b.WriteString(title + ":\n")
		for i, l := range lines {
			if i == most {
				fmt.Fprintf(&b, "- ... and %d more\n", len(lines)-most)
				break
			}
			b.WriteString(l + "\n")
		}
	}
	list("Your claimed tasks", mine, 10)
	list("Your leases", myLocks, 10)
	list("Others at work", others, 5)
	if notes, err := ws.Notes().List(ctx, workspace.NoteFilter{Kind: "decision", Limit: 1000}); err == nil && len(notes.Notes) > 0 {
		ns := notes.Notes
		// Newest first: the page is ordered by key.
		slices.SortFunc(ns, func(a, b workspace.Note) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
		b.WriteString("Recent decisions:\n")
		for i, n := range ns {
			if i == o.Decisions {
				break
			}
			title := n.Title
			if title == "" {
				title = n.Body
			}
			fmt.Fprintf(&b, "- %s: %s\n", n.Key, short(title, 100))
		}
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// inboxBrief is Prime's inbox: one line of counts (and a pause) and one
// of what awaits the actor's ack (the oldest three); "" when the inbox is
// empty or the store keeps no messages.
func inboxBrief(ctx context.Context, ws *workspace.Workspace, actor string) string {
	p, err := ws.Messages().Inbox(ctx, workspace.InboxQuery{Actor: actor, Unacked: true, Limit: 3})
	if err != nil || (p.Unread == 0 && p.Unacked == 0 && !p.Paused) {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Inbox: %d unread, %d awaiting your ack (inbox tool, or wsctl inbox)", p.Unread, p.Unacked)
	if p.Paused {
		b.WriteString("; you are PAUSED: your writes are refused until you are resumed: ack the pause message, then wait")
	}
	b.WriteString(".\n")
	if len(p.Messages) > 0 {
		b.WriteString("Ack first:")
		for _, m := range p.Messages {
			what := m.Subject
			if what == "" {
				what = m.Body
			}
			fmt.Fprintf(&b, " %s from %s (%s: %s);", m.ID, m.From, m.Type, short(what, 60))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// short cuts s to n runes on one line.
func short(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

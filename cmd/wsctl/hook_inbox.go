package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/workspace"
)

// The wake-up contract's hooks (docs/agents.md): a Stop hook that keeps a
// Claude Code agent working while it owes acks, and a hook that tells it,
// in one line, that messages arrived. Both read Claude Code's hook JSON
// on stdin and always exit 0: a failure of theirs (no workspace, a store
// that keeps no messages) must never stop the agent nor block its stop.

// maxStopBlocks is how many times the Stop hook keeps the agent from
// stopping for the same oldest unacknowledged message: with
// stop_hook_active it makes the hook unable to loop forever.
const maxStopBlocks = 2

// inboxHookInput is the part of a Stop, UserPromptSubmit or PostToolUse
// hook's input the inbox hooks read.
type inboxHookInput struct {
	SessionID      string `json:"session_id"`
	HookEventName  string `json:"hook_event_name"`
	StopHookActive bool   `json:"stop_hook_active"`
}

// hookState is what the hooks remember between calls of one session, in
// a file of the user's cache directory: the newest message the agent was
// told of, and how often the Stop hook blocked for each message.
type hookState struct {
	Told   string         `json:"told,omitempty"`
	Blocks map[string]int `json:"blocks,omitempty"`
}

func (a *app) hookStopCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "stop",
		Short: "A Claude Code Stop hook: keep working while messages await your (--as) ack",
		Long: `stop is a Stop hook for Claude Code ('wsctl setup claude' installs it). While
--as owes an ack of a message, it answers {"decision":"block","reason":...}:
Claude Code keeps the agent working with the reason (the messages to read
and ack) as its next instruction. It never blocks twice in a row
(stop_hook_active in the input lets the stop through), nor more than
twice for the same message in a session (counted in a file under the
user's cache directory), so it cannot keep an agent running forever.
Anything it cannot do (no workspace, no actor) lets the stop through.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			a.hookStop(ctx)
			return nil
		}),
	}
}

func (a *app) hookInboxCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inbox",
		Short: "A Claude Code UserPromptSubmit/PostToolUse hook: one line when new messages arrived for you (--as)",
		Long: `inbox is a UserPromptSubmit and PostToolUse hook for Claude Code ('wsctl
setup claude' installs it). When messages arrived for --as since it last
said so in this session, it adds one line to the agent's context (as
hookSpecificOutput.additionalContext): how many, how many need an ack,
from whom, a pause, and the command to read them. Otherwise it prints
nothing. It always exits 0.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			a.hookInbox(ctx)
			return nil
		}),
	}
}

// readHookInput reads an inbox hook's input; a missing or odd one is
// read as empty (no session, not active).
func (a *app) readHookInput() inboxHookInput {
	var in inboxHookInput
	raw, err := io.ReadAll(io.LimitReader(a.stdin, maxHookInput))
	if err == nil {
		_ = json.Unmarshal(raw, &in)
	}
	return in
}

func (a *app) hookStop(ctx context.Context) {
	in := a.readHookInput()
	actor, err := a.actor()
	if in.StopHookActive || err != nil || actor == "" {
		return
	}
	var page workspace.InboxPage
	if a.with(ctx, func(ws *workspace.Workspace) error {
		page, err = ws.Messages().Inbox(ctx, workspace.InboxQuery{Actor: actor, Unacked: true, Limit: 5})
		return err
	}) != nil || len(page.Messages) == 0 {
		return
	}
	st, save := a.loadHookState(actor, in.SessionID)
	oldest := page.Messages[0].ID
	if st.Blocks[oldest] >= maxStopBlocks {
		return
	}
	if st.Blocks == nil {
		st.Blocks = map[string]int{}
	}
	st.Blocks[oldest]++
	save(st)
	var b strings.Builder
	fmt.Fprintf(&b, "Do not stop yet: %d agentspace message(s) await your ack.", page.Unacked)
	if page.Paused {
		b.WriteString(" You are paused: ack the pause message, then stop (do no other work).")
	}
	for _, m := range page.Messages {
		fmt.Fprintf(&b, " %s from %s (%s): %s.", m.ID, m.From, m.Type, short(oneLine(orText(m.Subject, m.Body)), 80))
	}
	b.WriteString(" Read them (`wsctl inbox --unacked`, or the inbox tool with unacked), do what they ask, and ack each (`wsctl ack ID -m REPLY`, or the message tool with ack).")
	out, _ := json.Marshal(map[string]string{"decision": "block", "reason": b.String()})
	fmt.Fprintln(a.stdout, string(out))
}

func (a *app) hookInbox(ctx context.Context) {
	in := a.readHookInput()
	actor, err := a.actor()
	if err != nil || actor == "" {
		return
	}
	st, save := a.loadHookState(actor, in.SessionID)
	var page workspace.InboxPage
	if a.with(ctx, func(ws *workspace.Workspace) error {
		page, err = ws.Messages().Inbox(ctx, workspace.InboxQuery{Actor: actor, Unread: true, After: st.Told, Limit: 100})
		return err
	}) != nil || len(page.Messages) == 0 {
		return
	}
	line := newMessagesLine(page)
	st.Told = page.Messages[len(page.Messages)-1].ID
	save(st)
	event := in.HookEventName
	if event == "" {
		event = "PostToolUse"
	}
	out, _ := json.Marshal(map[string]any{"hookSpecificOutput": map[string]string{"hookEventName": event, "additionalContext": line}})
	fmt.Fprintln(a.stdout, string(out))
}

// newMessagesLine is the one line that tells an agent messages arrived.
func newMessagesLine(p workspace.InboxPage) string {
	acks, pause, from := 0, "", []string{}
	for _, m := range p.Messages {
		if m.RequiresAck && len(m.Pending) > 0 {
			acks++
		}
		if m.Type == "pause" && p.Paused {
			pause = fmt.Sprintf(" You are PAUSED by %s: ack message %s, then wait.", m.From, m.ID)
		}
		if !strings.Contains(strings.Join(from, ","), m.From) {
			from = append(from, m.From)
		}
	}
	need := ""
	if acks > 0 {
		need = fmt.Sprintf(", %d need your ack", acks)
	}
	return fmt.Sprintf("agentspace: %d new message(s) from %s%s: `wsctl inbox --unread`.%s", len(p.Messages), strings.Join(from, ","), need, pause)
}

func orText(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// loadHookState reads the hooks' state for actor's session and returns it
// with a function that saves it. Without a cache directory, or with a
// file it cannot read, the state is empty and saving does nothing: the
// Stop hook is still bounded by stop_hook_active.
func (a *app) loadHookState(actor, session string) (hookState, func(hookState)) {
	var st hookState
	dir := a.getenv("XDG_CACHE_HOME")
	if dir == "" && a.getenv("HOME") != "" {
		dir = filepath.Join(a.getenv("HOME"), ".cache")
	}
	if dir == "" {
		return st, func(hookState) {}
	}
	sum := sha256.Sum256([]byte(actor + "\x00" + session + "\x00" + a.dsnKey()))
	file := filepath.Join(dir, "agentspace", "hook-"+hex.EncodeToString(sum[:8])+".json")
	b, err := os.ReadFile(file) // #nosec G304 -- a file of our own, named by a hash
	if err == nil {
		_ = json.Unmarshal(b, &st)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return hookState{}, func(hookState) {}
	}
	return st, func(st hookState) {
		b, err := json.Marshal(st)
		if err != nil || os.MkdirAll(filepath.Dir(file), 0o700) != nil {
			return
		}
		tmp := file + ".tmp"
		if os.WriteFile(tmp, b, 0o600) == nil {
			_ = os.Rename(tmp, file)
		}
	}
}

// dsnKey names the workspace the hooks read, for their state's file name.
func (a *app) dsnKey() string {
	if res, err := a.resolve(); err == nil {
		return res.DSN
	}
	return ""
}

package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentspace/agentspace/internal/wsconn"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// StopRequest is what Stop takes.
type StopRequest struct {
	Actor   string // the agent to stop (required)
	By      string // the operator, recorded on each event (required)
	Message string // why, kept on each event
}

// agentStopper is a workspace that stops agents itself: a served one
// (backend/remote), whose server holds the token store.
type agentStopper interface {
	StopAgent(ctx context.Context, by, actor, message string) (wire.AgentStop, error)
}

// Stop stops an agent that has gone wrong, in one batch: it revokes
// every live token of r.Actor, force-releases every lease it holds (its
// fencing tokens revoked) and returns every task it claimed to pending,
// each recorded as an event by r.By. All or nothing: a failure writes none
// of it. Afterwards every request with its tokens is refused (and what they
// opened is ended), and its fenced writes fail with ErrStaleFence. It needs
// the admin.tokens right. Over a served workspace the server does it.
func Stop(ctx context.Context, ws *workspace.Workspace, r StopRequest) (wire.AgentStop, error) {
	if s, ok := wsconn.Of(ws).(agentStopper); ok {
		return s.StopAgent(ctx, r.By, r.Actor, r.Message)
	}
	t := NewTokens(ws)
	// A token revoked or created meanwhile changes a version the batch
	// is conditioned on: read again and retry.
	for attempt := 0; ; attempt++ {
		ops, ids, err := t.revocations(ctx, r.Actor)
		if err != nil {
			return wire.AgentStop{}, err
		}
		ops = append(ops, workspace.StopActorOp{Actor: r.Actor, Message: r.Message})
		res, err := ws.Commit(tokenKey.Grant(ctx), workspace.Batch{Actor: r.By, Ops: ops})
		if errors.Is(err, workspace.ErrConflict) && attempt < 3 {
			continue
		}
		if err != nil {
			return wire.AgentStop{}, fmt.Errorf("stop agent %q: %w", truncate(r.Actor, 64), err)
		}
		return wire.AgentStopOf(r.Actor, ids, res.Events), nil
	}
}

// revocations are the ops that revoke every live token of actor, each
// conditioned on the version read, and those tokens' ids.
func (t *Tokens) revocations(ctx context.Context, actor string) ([]workspace.Op, []string, error) {
	all, err := t.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	var (
		ops []workspace.Op
		ids []string
	)
	for _, tk := range all {
		if tk.Actor != actor || tk.Revoked {
			continue
		}
		rec, n, err := t.get(ctx, tk.ID)
		if err != nil {
			return nil, nil, err
		}
		rec.Revoked = true
		body, err := json.Marshal(rec)
		if err != nil {
			return nil, nil, err
		}
		ops = append(ops, workspace.PutNoteOp{
			Note: workspace.NotePut{Kind: TokenKind, Key: tk.ID, Title: n.Title, Body: string(body)},
			Cond: workspace.Cond{IfVersion: n.Version, Message: "token " + tk.ID + " revoked: its agent was stopped"},
		})
		ids = append(ids, tk.ID)
	}
	return ops, ids, nil
}

// State is what an agent is doing, derived from what it holds and
// when it last wrote (see Rule and docs/agents.md).
type State string

// The agent states.
const (
	Working State = "working" // holds a live claim or lease and wrote within StaleAfter
	Stale   State = "stale"   // holds a claim or lease but wrote nothing within StaleAfter, or holds a lapsed claim
	Idle    State = "idle"    // holds nothing and wrote within GoneAfter
	Gone    State = "gone"    // holds nothing and wrote nothing within GoneAfter, or every token it had is revoked
)

// Rule holds the thresholds of the state rule. Zero fields take the
// defaults.
type Rule struct {
	// StaleAfter is how long an agent holding work may go without writing
	// anything (a heartbeat, a renewal, any write) before it is stale
	// (default DefaultStaleAfter).
	StaleAfter time.Duration
	// GoneAfter is how long an agent holding nothing may go without
	// writing before it is gone (default DefaultGoneAfter).
	GoneAfter time.Duration
	// Scan is how many of the newest events are read to find each agent's
	// last write, recent events and conflicts (default DefaultScan).
	Scan int64
	// Recent is how many of an agent's newest events a summary keeps
	// (default 20).
	Recent int
}

// Defaults of Rule.
const (
	DefaultStaleAfter = 2 * time.Minute
	DefaultGoneAfter  = time.Hour
	DefaultScan       = 10_000
)

func (r Rule) withDefaults() Rule {
	if r.StaleAfter <= 0 {
		r.StaleAfter = DefaultStaleAfter
	}
	if r.GoneAfter <= 0 {
		r.GoneAfter = DefaultGoneAfter
	}
	if r.Scan <= 0 {
		r.Scan = DefaultScan
	}
	if r.Recent <= 0 {
		r.Recent = 20
	}
	return r
}

// Agent is one actor's summary: its state, what it holds, and what it did
// lately.
type Agent struct {
	Actor string `json:"actor"`
	State State  `json:"state"`
	// LastSeen is the time of its newest event among those scanned (zero:
	// none).
	LastSeen time.Time         `json:"last_seen,omitzero"`
	Claims   []workspace.Task  `json:"claims"` // tasks in progress assigned to it
	Leases   []workspace.Lease `json:"leases"` // live leases it owns
	// Tokens are its tokens, revoked ones included; empty over a served
	// workspace, whose tokens only its server reads.
	Tokens []Token `json:"tokens"`
	// Recent are its newest events among those scanned, newest first.
	Recent []workspace.Event `json:"recent"`
	// Conflicts counts its conflict events among those scanned.
	Conflicts int `json:"conflicts"`
	// Denials counts its denied events (writes the policy refused) among
	// those scanned.
	Denials int `json:"denials"`
}

// List returns a summary of every actor that holds a claim, a lease or
// a token, or wrote one of the newest rule.Scan events, ordered by actor.
// It reads the live leases, the tasks in progress, the tokens and the
// newest events once each.
func List(ctx context.Context, ws *workspace.Workspace, rule Rule) ([]Agent, error) {
	rule = rule.withDefaults()
	by := map[string]*Agent{}
	get := func(actor string) *Agent {
		a := by[actor]
		if a == nil {
			a = &Agent{Actor: actor, Claims: []workspace.Task{}, Leases: []workspace.Lease{}, Tokens: []Token{}, Recent: []workspace.Event{}}
			by[actor] = a
		}
		return a
	}
	leases, err := ws.Locks().List(ctx)
	if err != nil {
		return nil, err
	}
	for _, l := range leases {
		a := get(l.Owner)
		a.Leases = append(a.Leases, l)
	}
	f := workspace.TaskFilter{Status: workspace.TaskInProgress, Limit: 1000}
	for {
		page, err := ws.Tasks().List(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, t := range page.Tasks {
			if t.Assignee != "" {
				a := get(t.Assignee)
				a.Claims = append(a.Claims, t)
			}
		}
		if page.Next == "" {
			break
		}
		f.After = page.Next
	}
	tokens, err := NewTokens(ws).List(ctx)
	switch {
	case errors.Is(err, workspace.ErrForbidden):
		// A served workspace: its tokens are its server's to read.
	case err != nil:
		return nil, err
	}
	for _, t := range tokens {
		a := get(t.Actor)
		a.Tokens = append(a.Tokens, t)
	}
	if err := scanEvents(ctx, ws, rule, get); err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]Agent, 0, len(by))
	for _, a := range by {
		a.State = rule.state(a, now)
		out = append(out, *a)
	}
	slices.SortFunc(out, func(x, y Agent) int { return strings.Compare(x.Actor, y.Actor) })
	return out, nil
}

// Get returns actor's summary (List's for one actor). An actor
// nothing is known of is ErrNotFound.
func Get(ctx context.Context, ws *workspace.Workspace, rule Rule, actor string) (Agent, error) {
	all, err := List(ctx, ws, rule)
	if err != nil {
		return Agent{}, err
	}
	for _, a := range all {
		if a.Actor == actor {
			return a, nil
		}
	}
	return Agent{}, fmt.Errorf("agent %q: nothing held or written by it: %w", truncate(actor, 64), workspace.ErrNotFound)
}

// scanEvents reads the newest rule.Scan events once, oldest first, and
// gives each actor its last write, newest events and conflict count.
func scanEvents(ctx context.Context, ws *workspace.Workspace, rule Rule, get func(string) *Agent) error {
	head, err := ws.Events().Head(ctx)
	if err != nil {
		return err
	}
	q := workspace.EventQuery{AfterSeq: max(0, head-rule.Scan), Limit: 1000}
	for q.AfterSeq < head {
		page, err := ws.Events().Read(ctx, q)
		var ce *workspace.CompactedError
		if errors.As(err, &ce) {
			q.AfterSeq = ce.Floor - 1
			continue
		}
		if err != nil {
			return err
		}
		for _, e := range page.Events {
			if e.Actor == "" || e.Seq > head {
				continue
			}
			a := get(e.Actor)
			a.LastSeen = e.Time
			switch e.Type {
			case workspace.EventConflict:
				a.Conflicts++
			case workspace.EventDenied:
				a.Denials++
			}
			a.Recent = append(a.Recent, e)
			if len(a.Recent) > rule.Recent {
				a.Recent = a.Recent[1:]
			}
		}
		if page.Next <= q.AfterSeq {
			break
		}
		q.AfterSeq = page.Next
	}
	return nil
}

// Explain states the rule that gives state, with r's thresholds (the
// defaults for zero fields): the text docs/agents.md tabulates.
func (r Rule) Explain(state State) string {
	r = r.withDefaults()
	switch state {
	case Working:
		return fmt.Sprintf("holds a claim or a lease, no claim of it has lapsed, and it wrote something within %v", r.StaleAfter)
	case Stale:
		return fmt.Sprintf("holds a claim or a lease but wrote nothing within %v, or holds a claim whose lease has lapsed", r.StaleAfter)
	case Idle:
		return fmt.Sprintf("holds nothing and wrote something within %v", r.GoneAfter)
	case Gone:
		return fmt.Sprintf("holds nothing and wrote nothing within %v, or every token it had is revoked", r.GoneAfter)
	}
	return "not a state: " + truncate(string(state), 32)
}

// state applies the rule to a, at now.
func (r Rule) state(a *Agent, now time.Time) State {
	slices.Reverse(a.Recent)
	fresh := !a.LastSeen.IsZero() && now.Sub(a.LastSeen) < r.StaleAfter
	lapsed := false
	for _, t := range a.Claims {
		if !t.LeaseExpiresAt.IsZero() && !t.LeaseExpiresAt.After(now) {
			lapsed = true
		}
	}
	if len(a.Claims) > 0 || len(a.Leases) > 0 {
		if fresh && !lapsed {
			return Working
		}
		return Stale
	}
	revoked := len(a.Tokens) > 0
	for _, t := range a.Tokens {
		revoked = revoked && t.Revoked
	}
	if revoked || a.LastSeen.IsZero() || now.Sub(a.LastSeen) >= r.GoneAfter {
		return Gone
	}
	return Idle
}

// truncate cuts s to n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

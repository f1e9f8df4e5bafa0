package shadow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentspace/agentspace/internal/printable"
	"github.com/agentspace/agentspace/workspace"
)

// DefaultAckTimeout is how long a checkpoint waits for its agent to ack
// the pause when CheckpointOptions.AckTimeout is zero.
const DefaultAckTimeout = 30 * time.Second

// The types of the messages a checkpoint sends its agent about the outcome.
const (
	MsgPromoted      = "shadow_promoted"  // info, no ack needed
	MsgDiscarded     = "shadow_discarded" // the whole shadow was dropped: needs an ack
	MsgPartialRevert = "partial_revert"   // only the violating paths were set back: needs an ack
)

// Outcomes of a checkpoint (Checkpoint.Outcome).
const (
	OutcomePromoted  = "promoted"
	OutcomeDiscarded = "discarded"
	OutcomeReverted  = "reverted" // only the violating paths
)

// Steps a checkpoint reports to CheckpointOptions.Progress, in order.
const (
	StepPaused    = "paused"    // the agent is paused (or was already)
	StepAck       = "ack"       // the wait for the pause's ack ended: Checkpoint.Acked says how
	StepValidated = "validated" // Checkpoint.Validation holds the outcome
	StepPromoted  = "promoted"
	StepDiscarded = "discarded"
	StepReverted  = "reverted"
	StepNotified  = "notified" // Checkpoint.Notice was sent
	StepResumed   = "resumed"
)

// CheckpointOptions configure a Checkpoint.
type CheckpointOptions struct {
	// AckTimeout is how long to wait for the agent to ack the pause
	// (default DefaultAckTimeout); it is also the pause message's
	// deadline, past which the engine escalates it to role:admin.
	AckTimeout time.Duration
	// OnlyViolations sets back only the paths an invalid diff broke a
	// rule on, keeping the rest in the shadow, instead of discarding it.
	OnlyViolations bool
	// Progress, when set, is called after each step with its name (a
	// Step* constant) and the record so far.
	Progress func(step string, c Checkpoint)
}

// Checkpoint is what a checkpoint did, step by step.
type Checkpoint struct {
	Shadow   string `json:"shadow"`
	Agent    string `json:"agent"` // the shadow's actor, the one paused
	Operator string `json:"operator"`
	// PauseMessage is the ID of the pause message the agent must ack.
	PauseMessage string `json:"pause_message"`
	// WasPaused is set when the agent was paused already: the pause is
	// someone else's (or a cut checkpoint's), so the checkpoint leaves
	// it in place and does not resume the agent.
	WasPaused bool `json:"was_paused,omitempty"`
	// Acked is whether the agent acked the pause within AckTimeout; the
	// checkpoint goes on either way, its writes being refused while paused.
	Acked      bool              `json:"acked"`
	Ack        *workspace.MsgAck `json:"ack,omitempty"`
	AckTimeout time.Duration     `json:"ack_timeout_ns"`
	Validation *Validation       `json:"validation,omitempty"`
	// Outcome is promoted, discarded or reverted; empty when a step failed.
	Outcome   string     `json:"outcome,omitempty"`
	Promotion *Promotion `json:"promotion,omitempty"`
	// Discarded is what a discard or revert did; after a whole discard its
	// Reverted lists every path the shadow had changed.
	Discarded *Discarded `json:"discarded,omitempty"`
	// Kept counts the changes left in the shadow after a partial revert.
	Kept int `json:"kept"`
	// Notice is the message that told the agent the outcome.
	Notice  *workspace.Msg `json:"notice,omitempty"`
	Resumed bool           `json:"resumed"`
}

// Checkpoint takes a checkpoint of the shadow ref for the operator, with
// the agent that works in it (the shadow's actor) held still:
//
//  1. it pauses the agent (a workspace.PauseActorOp committed by the
//     operator, which needs the admin "tokens" right: the engine checks
//     it), so the agent's writes are refused with workspace.ErrPaused;
//  2. it waits up to opts.AckTimeout for the agent to ack the pause
//     message, and records whether the ack came, going on either way;
//  3. it validates the shadow as the agent's work (the agent's rights and
//     leases), recorded by the operator;
//  4. if valid, it promotes the diff; if not, it discards the shadow, or
//     with opts.OnlyViolations sets back only the violating paths;
//  5. it tells the agent the outcome: an info message shadow_promoted, or
//     a shadow_discarded or partial_revert message that needs its ack
//     (severity warning, error when none of its changes were kept), with
//     data {"shadow", "reverted", "violations"};
//  6. it resumes the agent, in the batch that sends the outcome.
//
// Once the pause is committed, the agent is resumed whatever fails later
// (with a fresh context, so a cancelled ctx still resumes it), told why in
// the resume message, and the error is returned with the record so far.
// An agent that was paused already stays paused (Checkpoint.WasPaused).
// If the process dies mid-way, the pause stays: the engine keeps it as a
// record, the pause message escalates past its deadline, and an operator
// lifts it with a ResumeActorOp (`wsctl agent resume`); a promotion that
// was cut is finished by the shadow's next call, from its journal.
func (m *Manager) Checkpoint(ctx context.Context, ref, operator string, opts CheckpointOptions) (cp Checkpoint, err error) {
	if operator == "" {
		return cp, &workspace.InvalidError{Field: "operator", Reason: "is required: who takes the checkpoint"}
	}
	if opts.AckTimeout < 0 {
		return cp, &workspace.InvalidError{Field: "ack timeout", Reason: "must not be negative"}
	}
	if opts.AckTimeout == 0 {
		opts.AckTimeout = DefaultAckTimeout
	}
	s, err := m.Get(ctx, ref)
	if err != nil {
		return cp, err
	}
	if s.State != StateOpen {
		return cp, fmt.Errorf("shadow %s is %s: %w", s.ID, s.State, workspace.ErrInvalid)
	}
	agent := s.Actor
	if baseName(agent) == baseName(operator) {
		return cp, &workspace.InvalidError{Field: "operator", Reason: fmt.Sprintf("%q works in shadow %s: a checkpoint pauses its agent, so another actor must take it", operator, s.ID)}
	}
	cp = Checkpoint{Shadow: s.ID, Agent: agent, Operator: operator, AckTimeout: opts.AckTimeout}
	progress := func(step string) {
		if opts.Progress != nil {
			opts.Progress(step, cp)
		}
	}

	head, err := m.ws.Events().Head(ctx)
	if err != nil {
		return cp, err
	}
	res, err := m.ws.Commit(ctx, workspace.Batch{Actor: operator, Ops: []workspace.Op{workspace.PauseActorOp{
		Actor: agent, AckTimeout: opts.AckTimeout,
		Message: fmt.Sprintf("%s is taking a checkpoint of your shadow %s (%s): stop writing in it, ack this message, and wait; you will be told the outcome and resumed.", operator, s.ID, clean(s.Path, 500)),
	}}})
	if err != nil {
		return cp, fmt.Errorf("checkpoint %s: pause %s: %w", s.ID, agent, err)
	}
	pause := res.Results[0].Msg
	if pause == nil {
		return cp, fmt.Errorf("checkpoint %s: pause %s: the store answered without the pause message", s.ID, agent)
	}
	cp.PauseMessage = pause.ID
	// A pause of a paused actor writes nothing and answers with the first
	// pause's message: that pause is not this checkpoint's to lift.
	cp.WasPaused = len(res.Events) == 0
	if n := len(res.Events); n > 0 {
		head = res.Events[0].Seq - 1
	}
	done := false // the outcome's batch resumed the agent
	defer func() {
		if cp.WasPaused || done {
			return
		}
		// A fresh context: a cancelled or expired ctx must not leave the
		// agent paused.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		cause := "it was cancelled"
		if err != nil {
			cause = clean(err.Error(), 2000)
		}
		why := fmt.Sprintf("%s's checkpoint of shadow %s stopped: %s. Your writes are accepted again; the shadow is as the failed step left it.", operator, s.ID, cause)
		_, rerr := m.ws.Commit(rctx, workspace.Batch{Actor: operator, Ops: []workspace.Op{workspace.ResumeActorOp{Actor: agent, Message: why}}})
		if errors.Is(rerr, workspace.ErrNotFound) {
			return // someone resumed it meanwhile
		}
		if rerr != nil {
			err = errors.Join(err, fmt.Errorf("checkpoint %s: resume %s: %w (it stays paused: `wsctl agent resume %s`)", s.ID, agent, rerr, agent))
			return
		}
		cp.Resumed = true
		progress(StepResumed)
	}()
	progress(StepPaused)

	// The engine pauses, and asks the ack of, the agent's base name: a
	// pause of bob covers bob#2.
	acked, err := m.awaitAck(ctx, *pause, baseName(agent), head, opts.AckTimeout)
	if err != nil {
		return cp, fmt.Errorf("checkpoint %s: wait for %s's ack: %w", s.ID, agent, err)
	}
	cp.Acked = !slices.Contains(acked.Pending, baseName(agent))
	for i := range acked.Acks {
		if acked.Acks[i].For == baseName(agent) {
			cp.Ack = &acked.Acks[i]
		}
	}
	progress(StepAck)

	v, err := m.validate(ctx, s.ID, agent, operator, nil)
	if err != nil {
		return cp, fmt.Errorf("checkpoint %s: validate: %w", s.ID, err)
	}
	cp.Validation = &v
	progress(StepValidated)

	var notice workspace.NewMsg
	switch {
	case v.Passed:
		p, err := m.promote(ctx, s.ID, agent, operator)
		if err != nil {
			return cp, fmt.Errorf("checkpoint %s: promote: %w", s.ID, err)
		}
		cp.Promotion, cp.Outcome = &p, OutcomePromoted
		progress(StepPromoted)
		notice = promotedNotice(s, operator, p)
	case opts.OnlyViolations:
		d, err := m.Discard(ctx, s.ID, operator, true)
		if err != nil {
			return cp, fmt.Errorf("checkpoint %s: revert the violations: %w", s.ID, err)
		}
		left, err := m.Diff(ctx, s.ID)
		if err != nil {
			return cp, fmt.Errorf("checkpoint %s: diff after the revert: %w", s.ID, err)
		}
		cp.Discarded, cp.Outcome, cp.Kept = &d, OutcomeReverted, len(left.Changes)
		progress(StepReverted)
		notice = revertedNotice(s, operator, v, d.Reverted, cp.Kept)
	default:
		before, err := m.Diff(ctx, s.ID)
		if err != nil {
			return cp, fmt.Errorf("checkpoint %s: diff: %w", s.ID, err)
		}
		d, err := m.Discard(ctx, s.ID, operator, false)
		if err != nil {
			return cp, fmt.Errorf("checkpoint %s: discard: %w", s.ID, err)
		}
		d.Reverted = before.Paths()
		cp.Discarded, cp.Outcome = &d, OutcomeDiscarded
		progress(StepDiscarded)
		notice = discardedNotice(s, operator, v, d.Reverted)
	}

	ops := []workspace.Op{workspace.SendMessageOp{Message: notice}}
	if !cp.WasPaused {
		ops = append(ops, workspace.ResumeActorOp{Actor: agent,
			Message: fmt.Sprintf("%s's checkpoint of shadow %s is done (%s): your writes are accepted again; read the message before this one.", operator, s.ID, cp.Outcome)})
	}
	res, err = m.ws.Commit(ctx, workspace.Batch{Actor: operator, Ops: ops})
	resumed := err == nil && len(ops) == 2
	if len(ops) == 2 && errors.Is(err, workspace.ErrNotFound) {
		// Someone resumed the agent meanwhile: it is told all the same.
		done = true
		res, err = m.ws.Commit(ctx, workspace.Batch{Actor: operator, Ops: ops[:1]})
	}
	if err != nil {
		return cp, fmt.Errorf("checkpoint %s: tell %s the outcome: %w", s.ID, agent, err)
	}
	cp.Notice = res.Results[0].Msg
	progress(StepNotified)
	if resumed {
		done, cp.Resumed = true, true
		progress(StepResumed)
	}
	return cp, nil
}

// awaitAck returns the pause message once agent acked it, or as it is
// when timeout passes first. It follows the message's message.acked
// events from after (a seq at or before the pause), so an ack committed
// before the wait began is seen too, and re-reads the message on each.
func (m *Manager) awaitAck(ctx context.Context, msg workspace.Msg, agent string, after int64, timeout time.Duration) (workspace.Msg, error) {
	if !slices.Contains(msg.Pending, agent) {
		return msg, nil
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sub, err := m.ws.Events().Subscribe(wctx, workspace.SubscribeRequest{Heartbeat: -1, Query: workspace.EventQuery{
		AfterSeq: after, Types: []string{workspace.EventMessageAcked}, SubjectKind: workspace.SubjectMessage, SubjectID: msg.ID}})
	if err != nil {
		if timedOut(ctx, wctx) {
			return msg, nil
		}
		return msg, err
	}
	defer sub.Close()
	for slices.Contains(msg.Pending, agent) {
		ev, err := sub.Next(wctx)
		if err != nil {
			if timedOut(ctx, wctx) {
				return msg, nil
			}
			return msg, err
		}
		if ev.Progress {
			continue
		}
		if msg, err = m.ws.Messages().Get(ctx, msg.ID); err != nil {
			return msg, err
		}
	}
	return msg, nil
}

// timedOut reports whether the wait's own deadline ended it, not its
// caller: the ack did not come in time, and the checkpoint goes on. A
// store may wrap the deadline in its own error, so the contexts decide.
func timedOut(ctx, wctx context.Context) bool {
	return ctx.Err() == nil && errors.Is(wctx.Err(), context.DeadlineExceeded)
}

// baseName is actor without a "#suffix", as the engine pauses it.
func baseName(actor string) string {
	base, _, _ := strings.Cut(actor, "#")
	return base
}

// noticeData is the Data of a shadow_discarded or partial_revert message.
type noticeData struct {
	Shadow     string      `json:"shadow"`
	Dir        string      `json:"dir"`
	Reverted   []string    `json:"reverted"`   // the paths whose changes were dropped
	Violations []Violation `json:"violations"` // what the validation found
	Kept       int         `json:"kept"`       // changes left in the shadow
	// Truncated is set when the lists were cut to fit a message's data.
	Truncated bool `json:"truncated,omitempty"`
}

// maxNoticeData keeps a notice's data under the engine's limit on a
// message's data (64 KiB), with room to spare.
const maxNoticeData = 60 << 10

// noticeListMax is how many paths or violations a notice's body names.
const noticeListMax = 20

// encode marshals d, halving its lists until it fits maxNoticeData.
func (d noticeData) encode() json.RawMessage {
	if d.Reverted == nil {
		d.Reverted = []string{}
	}
	if d.Violations == nil {
		d.Violations = []Violation{}
	}
	for {
		b, _ := json.Marshal(d) // plain structs: cannot fail
		if len(b) <= maxNoticeData || (len(d.Reverted) == 0 && len(d.Violations) == 0) {
			return b
		}
		d.Truncated = true
		d.Reverted = d.Reverted[:len(d.Reverted)/2]
		d.Violations = d.Violations[:len(d.Violations)/2]
		for i := range d.Violations {
			d.Violations[i].Detail = clean(d.Violations[i].Detail, 200)
		}
	}
}

func promotedNotice(s Shadow, operator string, p Promotion) workspace.NewMsg {
	body := fmt.Sprintf("%s took a checkpoint of your shadow %s: it passed validation and its %d changes were promoted to %s", operator, s.ID, len(p.Diff.Changes), clean(s.Dir, 500))
	if p.Artifact != "" {
		body += fmt.Sprintf(" (the diff is kept as artifact %s)", p.Artifact)
	}
	body += ".\n\nWhat to do: nothing; go on working in the shadow, whose base is now the promoted state."
	data, _ := json.Marshal(map[string]any{"shadow": s.ID, "dir": s.Dir, "promotion": p.ID, "artifact": p.Artifact, "changes": len(p.Diff.Changes)})
	return workspace.NewMsg{To: []string{baseName(s.Actor)}, Type: MsgPromoted, Severity: workspace.SeverityInfo,
		Subject: "checkpoint: shadow " + s.ID + " promoted", Body: body, Data: data}
}

func discardedNotice(s Shadow, operator string, v Validation, reverted []string) workspace.NewMsg {
	var b strings.Builder
	fmt.Fprintf(&b, "%s took a checkpoint of your shadow %s: its validation found %s, so the whole shadow was discarded. None of its %d changed paths reached %s, and its directory %s is gone.\n",
		operator, s.ID, count(len(v.Violations), "violation"), len(reverted), clean(s.Dir, 500), clean(s.Path, 500))
	listViolations(&b, v.Violations)
	listPaths(&b, "Discarded", reverted)
	fmt.Fprintf(&b, "\nWhat to do: ack this message. If the work is still needed, open a new shadow (`wsctl shadow open %s`), redo it within the rules above, and validate it (`wsctl shadow validate`) before the next checkpoint.", clean(s.Dir, 500))
	return workspace.NewMsg{To: []string{baseName(s.Actor)}, Type: MsgDiscarded, Severity: workspace.SeverityError,
		Subject: "checkpoint: shadow " + s.ID + " discarded", Body: b.String(), RequiresAck: true,
		Data: noticeData{Shadow: s.ID, Dir: s.Dir, Reverted: reverted, Violations: v.Violations}.encode()}
}

func revertedNotice(s Shadow, operator string, v Validation, reverted []string, kept int) workspace.NewMsg {
	var b strings.Builder
	fmt.Fprintf(&b, "%s took a checkpoint of your shadow %s: its validation found %s. The %s that broke a rule were set back, in the shadow, to the real tree's version; %s kept in the shadow, not promoted.\n",
		operator, s.ID, count(len(v.Violations), "violation"), count(len(reverted), "path"), count(kept, "change"))
	listViolations(&b, v.Violations)
	listPaths(&b, "Reverted", reverted)
	fmt.Fprintf(&b, "\nWhat to do: ack this message. Redo what the reverted paths needed within the rules above if it is still needed, then validate the shadow (`wsctl shadow validate %s`) for the next checkpoint.", s.ID)
	sev := workspace.SeverityWarning
	if kept == 0 {
		sev = workspace.SeverityError // nothing of the agent's work is left
	}
	return workspace.NewMsg{To: []string{baseName(s.Actor)}, Type: MsgPartialRevert, Severity: sev,
		Subject: fmt.Sprintf("checkpoint: shadow %s, %s reverted", s.ID, count(len(reverted), "path")), Body: b.String(), RequiresAck: true,
		Data: noticeData{Shadow: s.ID, Dir: s.Dir, Reverted: reverted, Violations: v.Violations, Kept: kept}.encode()}
}

func listViolations(b *strings.Builder, vs []Violation) {
	if len(vs) == 0 {
		return
	}
	b.WriteString("\nViolations:\n")
	for i, v := range vs {
		if i == noticeListMax {
			fmt.Fprintf(b, "- … and %d more (the message's data lists them)\n", len(vs)-i)
			break
		}
		detail, _, _ := strings.Cut(v.Detail, "\n")
		fmt.Fprintf(b, "- %s %s: %s\n", v.Rule, orDash(clean(v.Path, 300)), clean(detail, 300))
	}
}

func listPaths(b *strings.Builder, title string, paths []string) {
	if len(paths) == 0 {
		return
	}
	fmt.Fprintf(b, "\n%s:\n", title)
	for i, p := range paths {
		if i == noticeListMax {
			fmt.Fprintf(b, "- … and %d more (the message's data lists them)\n", len(paths)-i)
			break
		}
		fmt.Fprintf(b, "- %s\n", clean(p, 300))
	}
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clean makes s fit a message's text: one line of at most n bytes, with
// anything the engine would refuse there (control and format characters,
// invalid UTF-8) quoted instead. File names and validator output are
// data, and may hold any of them.
func clean(s string, n int) string {
	if printable.Problem(s, false) != "" || strings.ContainsAny(s, "\n\r\t") {
		s = strconv.QuoteToGraphic(s)
		s = s[1 : len(s)-1]
	}
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// messagePolicy gives the message cases roles with listed members.
const messagePolicy = `
default_role = "worker"

[roles.worker]
artifacts_read  = ["**"]
artifacts_write = ["**"]
notes_read = ["*"]
notes_write = ["*"]
tasks = ["*"]
locks = ["**"]

[roles.reviewer]
artifacts_read = ["**"]
messages = ["lead", "role:reviewer"]

[actors]
root = ["admin"]
lead = ["worker"]
rev1 = ["reviewer"]
rev2 = ["reviewer"]
rev3 = ["reviewer"]
`

// messageCases are the cases of messages, acknowledgement and pause.
var messageCases = []coreCase{
	{"MessageInboxCursorAndAckOnce", testMessageInboxCursorAndAckOnce},
	{"MessageRoleIsAnsweredByOneMemberUnlessEach", testMessageRoleAnsweredOnce},
	{"MessageReplyJoinsItsParentsThread", testMessageThreads},
	{"MessageRidesInTheBatchOfItsWrite", testMessageInABatch},
	{"MessageBadInputIsRefusedAndWritesNothing", testMessageBadInput},
	{"MessagePolicyDecidesWhoMayMessageWhom", testMessagePolicy},
	{"MessageEscalatesOnceWithAControlledClock", testMessageEscalatesOnce},
	{"MessageRacingAcksRecordOne", testMessageRacingAcks},
	{"PauseGatesWritesButNotAcksOrRenewals", testPauseGatesWrites},
	{"PauseIsLiftedByAnotherOperator", testPauseLiftedByAnotherOperator},
	{"PauseIsSeenByTheAgentItWakes", testPauseSeenByTheWokenAgent},
	{"MessageRetentionKeepsWhatStillOwesAnAck", testMessageRetention},
}

// asPrincipal is ctx acting as actor: reads through a server always have
// a principal, and in process it binds an inbox read to its reader.
func asPrincipal(ctx context.Context, actor string) context.Context {
	return workspace.AsActor(ctx, actor)
}

// present makes actor known to the workspace (it has written once).
func present(t *testing.T, ws *workspace.Workspace, actors ...string) {
	t.Helper()
	for _, a := range actors {
		_, err := ws.Notes().Put(asPrincipal(testCtx(t), a), as(a), workspace.NotePut{Kind: "friction", Key: "hello-" + a, Body: "here"})
		require.NoError(t, err)
	}
}

func inboxOf(t *testing.T, ws *workspace.Workspace, q workspace.InboxQuery) workspace.InboxPage {
	t.Helper()
	p, err := ws.Messages().Inbox(asPrincipal(testCtx(t), q.Actor), q)
	require.NoError(t, err)
	return p
}

func msgIDs(ms []workspace.Msg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func eventsOfType(t *testing.T, ws *workspace.Workspace, typ string) []workspace.Event {
	t.Helper()
	page, err := ws.Events().Read(asPrincipal(testCtx(t), "root"), workspace.EventQuery{Types: []string{typ}})
	require.NoError(t, err)
	return page.Events
}

// testMessageInboxCursorAndAckOnce: a message that needs an ack shows as
// unread and unacknowledged; a read moves the durable cursor (a new handle
// resumes there); an ack is recorded once, with its reply; a second ack
// answers the first's record and writes nothing; only a recipient acks.
func testMessageInboxCursorAndAckOnce(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	present(t, ws, "worker")
	lead := asPrincipal(ctx, "lead")
	m1, err := ws.Messages().Send(lead, as("lead"), workspace.NewMsg{To: []string{"worker"}, Subject: "API", Body: "use bearer tokens",
		RequiresAck: true, Data: json.RawMessage(`{"task":"t1"}`)})
	require.NoError(t, err)
	assert.Equal(t, "lead", m1.From)
	assert.Equal(t, m1.ID, m1.Thread)
	assert.Equal(t, []string{"worker"}, m1.Pending)
	assert.Equal(t, "note", m1.Type)
	assert.Equal(t, workspace.SeverityInfo, m1.Severity)
	assert.JSONEq(t, `{"task":"t1"}`, string(m1.Data))
	m2, err := ws.Messages().Send(lead, as("lead"), workspace.NewMsg{To: []string{"worker"}, Body: "fyi", Severity: workspace.SeverityWarning})
	require.NoError(t, err)

	p := inboxOf(t, ws, workspace.InboxQuery{Actor: "worker", Unread: true})
	assert.Equal(t, []string{m1.ID, m2.ID}, msgIDs(p.Messages))
	assert.Equal(t, 2, p.Unread)
	assert.Equal(t, 1, p.Unacked)
	assert.Empty(t, inboxOf(t, ws, workspace.InboxQuery{Actor: "lead"}).Messages, "a sender's inbox holds what was sent to it")

	require.NoError(t, ws.Messages().MarkRead(asPrincipal(ctx, "worker"), "worker", m1.ID))
	other := open(t, dsn)
	p = inboxOf(t, other, workspace.InboxQuery{Actor: "worker", Unread: true})
	assert.Equal(t, []string{m2.ID}, msgIDs(p.Messages), "the cursor is durable: another handle resumes after it")
	assert.Equal(t, m1.ID, p.Cursor)
	require.NoError(t, other.Messages().MarkRead(asPrincipal(ctx, "worker"), "worker", m1.ID))
	assert.Equal(t, m1.ID, inboxOf(t, other, workspace.InboxQuery{Actor: "worker"}).Cursor, "a cursor never moves back")
	p = inboxOf(t, other, workspace.InboxQuery{Actor: "worker", Unacked: true})
	assert.Equal(t, []string{m1.ID}, msgIDs(p.Messages))

	_, err = ws.Messages().Ack(asPrincipal(ctx, "lead"), as("lead"), m1.ID, "")
	require.ErrorIs(t, err, workspace.ErrForbidden, "the sender owes no ack")
	_, err = ws.Messages().Ack(asPrincipal(ctx, "worker"), as("worker"), m2.ID, "")
	require.ErrorIs(t, err, workspace.ErrInvalid, "a message that needs no ack cannot be acked")

	acked, err := ws.Messages().Ack(asPrincipal(ctx, "worker"), as("worker"), m1.ID, "will do")
	require.NoError(t, err)
	require.Len(t, acked.Acks, 1)
	assert.Equal(t, "worker", acked.Acks[0].By)
	assert.Equal(t, "will do", acked.Acks[0].Reply)
	assert.Empty(t, acked.Pending)
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	again, err := other.Messages().Ack(asPrincipal(ctx, "worker"), as("worker"), m1.ID, "twice")
	require.NoError(t, err)
	assert.Equal(t, acked.Acks, again.Acks, "a second ack answers the first one's record")
	head2, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, head, head2, "a second ack writes nothing")
	assert.Len(t, eventsOfType(t, ws, workspace.EventMessageAcked), 1)
	assert.Len(t, eventsOfType(t, ws, workspace.EventMessageSent), 2)
	assert.Zero(t, inboxOf(t, ws, workspace.InboxQuery{Actor: "worker"}).Unacked)

	got, err := ws.Messages().Get(asPrincipal(ctx, "worker"), m1.ID)
	require.NoError(t, err)
	assert.Equal(t, acked.Version, got.Version)
	_, err = ws.Messages().Get(asPrincipal(ctx, "stranger"), m1.ID)
	assert.ErrorIs(t, err, workspace.ErrNotFound, "a message is read only by its sender and recipients")
	_, err = ws.Messages().Inbox(asPrincipal(ctx, "stranger"), workspace.InboxQuery{Actor: "worker"})
	assert.ErrorIs(t, err, workspace.ErrForbidden, "an agent reads only its own inbox")
	_, err = ws.Notes().Get(ctx, "msg", m1.ID)
	assert.ErrorIs(t, err, workspace.ErrForbidden, "the records are read only through the message operations")
}

// testMessageRoleAnsweredOnce: a role message is answered by its first
// acker; another member's ack returns that record. With Each, every
// member the policy names owes its own ack.
func testMessageRoleAnsweredOnce(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	applyPolicy(t, ctx, ws, messagePolicy)
	lead := asPrincipal(ctx, "lead")
	one, err := ws.Messages().Send(lead, as("lead"), workspace.NewMsg{To: []string{"role:reviewer"}, Subject: "review", Body: "PR 7", RequiresAck: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"role:reviewer"}, one.Pending)
	for _, r := range []string{"rev1", "rev2"} {
		p := inboxOf(t, ws, workspace.InboxQuery{Actor: r, Unacked: true})
		assert.Equal(t, []string{one.ID}, msgIDs(p.Messages), "%s holds the role", r)
	}
	a1, err := ws.Messages().Ack(asPrincipal(ctx, "rev1"), as("rev1"), one.ID, "mine")
	require.NoError(t, err)
	a2, err := ws.Messages().Ack(asPrincipal(ctx, "rev2"), as("rev2"), one.ID, "")
	require.NoError(t, err)
	assert.Equal(t, a1.Acks, a2.Acks, "the first acker answered for the role")
	require.Len(t, a2.Acks, 1)
	assert.Equal(t, "role:reviewer", a2.Acks[0].For)
	assert.Zero(t, inboxOf(t, ws, workspace.InboxQuery{Actor: "rev2"}).Unacked)
	_, err = ws.Messages().Ack(asPrincipal(ctx, "lead"), as("lead"), one.ID, "")
	assert.ErrorIs(t, err, workspace.ErrForbidden, "a non-member cannot ack a role message")

	each, err := ws.Messages().Send(lead, as("lead"), workspace.NewMsg{To: []string{"role:reviewer"}, Each: true, Body: "everyone read the ADR", RequiresAck: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"rev1", "rev2", "rev3"}, each.Pending)
	_, err = ws.Messages().Ack(asPrincipal(ctx, "rev1"), as("rev1"), each.ID, "")
	require.NoError(t, err)
	assert.Zero(t, inboxOf(t, ws, workspace.InboxQuery{Actor: "rev1"}).Unacked)
	assert.Equal(t, 1, inboxOf(t, ws, workspace.InboxQuery{Actor: "rev2"}).Unacked, "each member owes its own ack")
	m, err := ws.Messages().Get(asPrincipal(ctx, "lead"), each.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"rev2", "rev3"}, m.Pending)
}

// testMessageThreads: a reply joins its parent's thread, and an inbox
// lists one thread.
func testMessageThreads(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	present(t, ws, "a", "b")
	root, err := ws.Messages().Send(asPrincipal(ctx, "a"), as("a"), workspace.NewMsg{To: []string{"b"}, Subject: "q", Body: "which db?"})
	require.NoError(t, err)
	other, err := ws.Messages().Send(asPrincipal(ctx, "a"), as("a"), workspace.NewMsg{To: []string{"b"}, Body: "unrelated"})
	require.NoError(t, err)
	reply, err := ws.Messages().Send(asPrincipal(ctx, "b"), as("b"), workspace.NewMsg{To: []string{"a"}, ReplyTo: root.ID, Body: "postgres"})
	require.NoError(t, err)
	assert.Equal(t, root.ID, reply.Thread)
	again, err := ws.Messages().Send(asPrincipal(ctx, "a"), as("a"), workspace.NewMsg{To: []string{"b"}, ReplyTo: reply.ID, Body: "ok"})
	require.NoError(t, err)
	assert.Equal(t, root.ID, again.Thread, "a reply to a reply stays in the thread")
	p := inboxOf(t, ws, workspace.InboxQuery{Actor: "b", Thread: root.ID})
	assert.Equal(t, []string{root.ID, again.ID}, msgIDs(p.Messages))
	assert.NotContains(t, msgIDs(p.Messages), other.ID)
	_, err = ws.Messages().Send(asPrincipal(ctx, "c"), as("c"), workspace.NewMsg{To: []string{"a"}, ReplyTo: root.ID, Body: "me too"})
	assert.ErrorIs(t, err, workspace.ErrForbidden, "only a participant replies into a thread")
}

// testMessageInABatch: a message commits atomically with the write it is
// about, and a failed batch sends nothing.
func testMessageInABatch(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	present(t, ws, "reviewer")
	res, err := ws.Commit(ctx, workspace.Batch{Actor: "dev", Ops: []workspace.Op{
		workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "src/a.go", Content: []byte("package a")}},
		workspace.SendMessageOp{Message: workspace.NewMsg{To: []string{"reviewer"}, Subject: "src/a.go", Body: "ready for review", RequiresAck: true}},
	}})
	require.NoError(t, err)
	require.Len(t, res.Results, 2)
	require.NotNil(t, res.Results[1].Msg)
	require.Len(t, res.Events, 2)
	assert.Equal(t, res.Events[0].Seq+1, res.Events[1].Seq)
	assert.Equal(t, workspace.EventMessageSent, res.Events[1].Type)
	assert.Equal(t, res.Results[1].Msg.ID, res.Events[1].Subject.ID)

	_, err = ws.Commit(ctx, workspace.Batch{Actor: "dev", Ops: []workspace.Op{
		workspace.SendMessageOp{Message: workspace.NewMsg{To: []string{"reviewer"}, Body: "second"}},
		workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "src/a.go", Content: []byte("again")}},
	}})
	require.ErrorIs(t, err, workspace.ErrAlreadyExists)
	p := inboxOf(t, ws, workspace.InboxQuery{Actor: "reviewer"})
	assert.Len(t, p.Messages, 1, "the failed batch sent nothing")
}

// testMessageBadInput: each bad message is refused as invalid (or
// forbidden) and the log does not move.
func testMessageBadInput(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	present(t, ws, "w")
	lead := asPrincipal(ctx, "lead")
	plain, err := ws.Messages().Send(lead, as("lead"), workspace.NewMsg{To: []string{"w"}, Body: "fyi"})
	require.NoError(t, err)
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	for name, m := range map[string]workspace.NewMsg{
		"unknown actor":        {To: []string{"nobody-here"}, Body: "x"},
		"unknown role":         {To: []string{"role:ghosts"}, Body: "x"},
		"no recipient":         {Body: "x"},
		"empty body":           {To: []string{"w"}, Body: "  "},
		"data not an object":   {To: []string{"w"}, Body: "x", Data: json.RawMessage(`[1,2]`)},
		"data not JSON":        {To: []string{"w"}, Body: "x", Data: json.RawMessage(`{oops`)},
		"deadline in the past": {To: []string{"w"}, Body: "x", RequiresAck: true, Deadline: time.Now().Add(-time.Hour)},
		"deadline without ack": {To: []string{"w"}, Body: "x", Deadline: time.Now().Add(time.Hour)},
		"body over the limit":  {To: []string{"w"}, Body: strings.Repeat("x", workspace.MaxTextLen+1)},
		"bad severity":         {To: []string{"w"}, Body: "x", Severity: "loud"},
		"bad type":             {To: []string{"w"}, Body: "x", Type: "Not A Word"},
		"recipient twice":      {To: []string{"w", "w"}, Body: "x"},
		"reply to no message":  {To: []string{"w"}, Body: "x", ReplyTo: "0193a1b2-0000-7000-8000-00000000dead"},
	} {
		_, err := ws.Messages().Send(lead, as("lead"), m)
		if !errors.Is(err, workspace.ErrInvalid) && !errors.Is(err, workspace.ErrNotFound) && !errors.Is(err, workspace.ErrTooLarge) {
			t.Errorf("%s: got %v, want ErrInvalid (ErrTooLarge, ErrNotFound)", name, err)
		}
	}
	_, err = ws.Messages().Ack(asPrincipal(ctx, "w"), as("w"), plain.ID, "")
	assert.ErrorIs(t, err, workspace.ErrInvalid, "an ack of a message that needs none")
	_, err = ws.Messages().Ack(asPrincipal(ctx, "w"), as("w"), "not-a-uuid", "")
	assert.ErrorIs(t, err, workspace.ErrInvalid)
	_, err = ws.Messages().Inbox(ctx, workspace.InboxQuery{})
	assert.ErrorIs(t, err, workspace.ErrInvalid, "an inbox names its actor")
	after, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, head, after, "nothing was written")
	assert.Len(t, inboxOf(t, ws, workspace.InboxQuery{Actor: "w"}).Messages, 1)
}

// testMessagePolicy: the policy's messages rule decides who may message
// whom; a refusal is a denied event and nothing else.
func testMessagePolicy(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	applyPolicy(t, ctx, ws, messagePolicy)
	rev := asPrincipal(ctx, "rev1")
	_, err := ws.Messages().Send(rev, as("rev1"), workspace.NewMsg{To: []string{"lead"}, Body: "done"})
	require.NoError(t, err, "a reviewer may message the lead")
	_, err = ws.Messages().Send(rev, as("rev1"), workspace.NewMsg{To: []string{"lead", "root"}, Body: "psst"})
	requireForbidden(t, err, "rev1", "message.send", "messages")
	assert.Len(t, inboxOf(t, ws, workspace.InboxQuery{Actor: "lead"}).Messages, 1, "the refused message reached no one")
	_, err = ws.Messages().Send(asPrincipal(ctx, "lead"), as("lead"), workspace.NewMsg{To: []string{"root", "role:reviewer"}, Body: "a role with no messages rule may message anyone"})
	require.NoError(t, err)
}

// testMessageEscalatesOnceWithAControlledClock: a message that needs an ack
// and passes its deadline unacknowledged is escalated exactly once however
// many checkers run: an event, a message to the escalation target, and a
// mark on the message. An ack before the deadline escalates nothing.
func testMessageEscalatesOnce(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn := h.NewDSN(t)
	var mu sync.Mutex
	now := time.Now().UTC()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	opts := workspace.Options{Clock: clock, Private: true}
	ws, err := workspace.Open(ctx, dsn, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	applyPolicy(t, ctx, ws, messagePolicy)
	present(t, ws, "w")
	lead := asPrincipal(ctx, "lead")
	late, err := ws.Messages().Send(lead, as("lead"), workspace.NewMsg{To: []string{"w"}, Subject: "deploy?", Body: "ack by noon",
		RequiresAck: true, Deadline: clock().Add(time.Hour)})
	require.NoError(t, err)
	assert.Equal(t, []string{"role:admin"}, late.EscalateTo, "the default target is the admin role")
	onTime, err := ws.Messages().Send(lead, as("lead"), workspace.NewMsg{To: []string{"w"}, Body: "and this", RequiresAck: true,
		Deadline: clock().Add(time.Hour), EscalateTo: []string{"lead"}})
	require.NoError(t, err)
	_, err = ws.Messages().Ack(asPrincipal(ctx, "w"), as("w"), onTime.ID, "")
	require.NoError(t, err)

	got, err := ws.Messages().Escalate(ctx, "checker")
	require.NoError(t, err)
	assert.Empty(t, got, "nothing is due before the deadline")

	advance(2 * time.Hour)
	var wg sync.WaitGroup
	counts := make([]int, 4)
	for i := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w2, err := workspace.Open(ctx, dsn, opts)
			if !assert.NoError(t, err) {
				return
			}
			defer func() { _ = w2.Close() }()
			esc, err := w2.Messages().Escalate(ctx, "checker")
			assert.NoError(t, err)
			counts[i] = len(esc)
		}()
	}
	wg.Wait()
	total := 0
	for _, c := range counts {
		total += c
	}
	assert.Equal(t, 1, total, "four racing checkers escalate the late message once")
	evs := eventsOfType(t, ws, workspace.EventMessageEscalated)
	require.Len(t, evs, 1)
	assert.Equal(t, late.ID, evs[0].Subject.ID)
	m, err := ws.Messages().Get(asPrincipal(ctx, "lead"), late.ID)
	require.NoError(t, err)
	assert.False(t, m.EscalatedAt.IsZero())
	p := inboxOf(t, ws, workspace.InboxQuery{Actor: "root"})
	require.Len(t, p.Messages, 1, "the admin role got the escalation")
	assert.Equal(t, "escalation", p.Messages[0].Type)
	assert.Equal(t, late.Thread, p.Messages[0].Thread)
	var data map[string]any
	require.NoError(t, json.Unmarshal(p.Messages[0].Data, &data))
	assert.Equal(t, late.ID, data["message"])
	// A late ack is still recorded, and escalates nothing again.
	_, err = ws.Messages().Ack(asPrincipal(ctx, "w"), as("w"), late.ID, "sorry")
	require.NoError(t, err)
	advance(time.Hour)
	got, err = ws.Messages().Escalate(ctx, "checker")
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Len(t, eventsOfType(t, ws, workspace.EventMessageEscalated), 1)
}

// testMessageRacingAcks: eight handles, each a store of its own as another
// process's is, ack one role message at once: one ack is recorded, and
// every acker gets that record.
func testMessageRacingAcks(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	policy := messagePolicy + "\n"
	for i := range 8 {
		policy = strings.Replace(policy, "[actors]\n", "[actors]\nr"+string(rune('a'+i))+" = [\"reviewer\"]\n", 1)
	}
	applyPolicy(t, ctx, ws, policy)
	m, err := ws.Messages().Send(asPrincipal(ctx, "lead"), as("lead"), workspace.NewMsg{To: []string{"role:reviewer"}, Body: "one of you", RequiresAck: true})
	require.NoError(t, err)
	results := make([]workspace.Msg, 8)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			actor := "r" + string(rune('a'+i))
			w, err := workspace.Open(ctx, dsnWith(dsn, "ws_private", "true"))
			if !assert.NoError(t, err) {
				return
			}
			defer func() { _ = w.Close() }()
			results[i], err = w.Messages().Ack(asPrincipal(ctx, actor), as(actor), m.ID, actor)
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	assert.Len(t, eventsOfType(t, ws, workspace.EventMessageAcked), 1)
	for _, r := range results {
		require.Len(t, r.Acks, 1)
		assert.Equal(t, results[0].Acks[0], r.Acks[0])
	}
}

// testPauseGatesWrites: a paused actor's writes are refused with
// ErrPaused (its "#suffix" processes' too) while its acks, renewals and
// heartbeats pass; the pause reaches it as a message that needs its ack;
// resume lifts the gate. Pausing needs the admin right.
func testPauseGatesWrites(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	_, err := ws.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "t1"})
	require.NoError(t, err)
	_, err = ws.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "t2"})
	require.NoError(t, err)
	w := asPrincipal(ctx, "w")
	task, err := ws.Tasks().Claim(w, workspace.ClaimRequest{Actor: "w", Lease: time.Hour})
	require.NoError(t, err)
	lease, err := ws.Locks().Acquire(w, workspace.AcquireRequest{Resource: "file:a", Owner: "w", TTL: time.Hour})
	require.NoError(t, err)

	res, err := ws.Commit(asPrincipal(ctx, "root"), workspace.Batch{Actor: "root", Ops: []workspace.Op{workspace.PauseActorOp{Actor: "w", Message: "hold on", AckTimeout: time.Hour}}})
	require.NoError(t, err)
	pm := res.Results[0].Msg
	require.NotNil(t, pm)
	assert.Equal(t, "pause", pm.Type)
	assert.True(t, pm.RequiresAck)
	p := inboxOf(t, ws, workspace.InboxQuery{Actor: "w", Unacked: true})
	assert.True(t, p.Paused)
	assert.Equal(t, []string{pm.ID}, msgIDs(p.Messages))

	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(w, as("w"), workspace.NewArtifact{Name: "out.md", Content: []byte("x")})
	var pe *workspace.PausedError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "root", pe.By)
	_, err = ws.Tasks().Claim(w, workspace.ClaimRequest{Actor: "w"})
	assert.ErrorIs(t, err, workspace.ErrPaused)
	_, err = ws.Locks().Acquire(w, workspace.AcquireRequest{Resource: "file:b", Owner: "w", TTL: time.Minute})
	assert.ErrorIs(t, err, workspace.ErrPaused)
	_, err = ws.Locks().Acquire(asPrincipal(ctx, "w"), workspace.AcquireRequest{Resource: "file:c", Owner: "w#merger-1", TTL: time.Minute})
	assert.ErrorIs(t, err, workspace.ErrPaused, "a process of the actor's is paused with it")
	_, err = ws.Messages().Send(w, as("w"), workspace.NewMsg{To: []string{"root"}, Body: "why?"})
	assert.ErrorIs(t, err, workspace.ErrPaused)
	// Another store's handle that reads the pauses for every write
	// (ws_policy_recheck=0) is held by the gate too.
	other := open(t, dsnWith(storeDSN(h, dsn), "ws_policy_recheck", "0"))
	_, err = other.Artifacts().Create(w, as("w"), workspace.NewArtifact{Name: "other.md", Content: []byte("x")})
	assert.ErrorIs(t, err, workspace.ErrPaused, "the pause holds on a handle of another store")
	after, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, head, after, "refused writes leave no trace")

	_, err = ws.Locks().Renew(w, lease, time.Hour)
	assert.NoError(t, err, "a renewal keeps what it holds alive")
	_, err = ws.Locks().Acquire(w, workspace.AcquireRequest{Resource: "file:a", Owner: "w", TTL: time.Hour})
	assert.NoError(t, err, "acquiring again what it holds is a renewal")
	_, err = ws.Tasks().Heartbeat(w, as("w"), task.ID, time.Hour)
	assert.NoError(t, err)
	_, err = ws.Messages().Ack(w, as("w"), pm.ID, "pausing")
	assert.NoError(t, err, "an ack passes")

	_, err = ws.Commit(asPrincipal(ctx, "root"), workspace.Batch{Actor: "root", Ops: []workspace.Op{workspace.ResumeActorOp{Actor: "w"}}})
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(w, as("w"), workspace.NewArtifact{Name: "out.md", Content: []byte("x")})
	assert.NoError(t, err)
	assert.Len(t, eventsOfType(t, ws, workspace.EventActorPaused), 1)
	assert.Len(t, eventsOfType(t, ws, workspace.EventActorResumed), 1)
	_, err = ws.Commit(ctx, workspace.Batch{Actor: "root", Ops: []workspace.Op{workspace.ResumeActorOp{Actor: "w"}}})
	assert.ErrorIs(t, err, workspace.ErrNotFound, "resuming an actor that is not paused")
}

// testPauseSeenByTheWokenAgent: an agent waiting on its inbox, on the
// handle it writes through (whose cache of the pauses is fresh from a write
// just before), is woken by its pause message and writes at once: the
// write is refused as paused, every time. The pause is not a bound away
// from the message that announces it (DESIGN.md, "Messages,
// acknowledgement, pause").
func testPauseSeenByTheWokenAgent(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	w := asPrincipal(ctx, "w")
	for round := range 10 {
		_, err := ws.Notes().Put(w, as("w"), workspace.NotePut{Kind: "decision", Key: fmt.Sprint("warm-", round), Body: "x"})
		require.NoError(t, err, "round %d: the agent writes before its pause", round)
		type saw struct{ wake, write error }
		out := make(chan saw, 1)
		go func() {
			var s saw
			defer func() { out <- s }()
			_, s.wake = ws.Messages().Inbox(w, workspace.InboxQuery{Actor: "w", Unacked: true, Wait: true})
			if s.wake == nil {
				_, s.write = ws.Notes().Put(w, as("w"), workspace.NotePut{Kind: "decision", Key: fmt.Sprint("woken-", round), Body: "x"})
			}
		}()
		res, err := ws.Commit(asPrincipal(ctx, "root"), workspace.Batch{Actor: "root", Ops: []workspace.Op{workspace.PauseActorOp{Actor: "w", Message: "hold on"}}})
		require.NoError(t, err)
		s := <-out
		require.NoError(t, s.wake)
		require.ErrorIs(t, s.write, workspace.ErrPaused, "round %d: the woken agent's write", round)
		_, err = ws.Messages().Ack(w, as("w"), res.Results[0].Msg.ID, "ok")
		require.NoError(t, err)
		_, err = ws.Commit(asPrincipal(ctx, "root"), workspace.Batch{Actor: "root", Ops: []workspace.Op{workspace.ResumeActorOp{Actor: "w"}}})
		require.NoError(t, err)
	}
}

// testPauseLiftedByAnotherOperator: an operator resumes a pause another
// made (the one who paused may be gone), and the resume joins the pause's
// thread though it could not read the pause message.
func testPauseLiftedByAnotherOperator(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	present(t, ws, "w")
	res, err := ws.Commit(asPrincipal(ctx, "root"), workspace.Batch{Actor: "root", Ops: []workspace.Op{workspace.PauseActorOp{Actor: "w"}}})
	require.NoError(t, err)
	pm := res.Results[0].Msg
	require.NotNil(t, pm)
	_, err = ws.Commit(asPrincipal(ctx, "ops"), workspace.Batch{Actor: "ops", Ops: []workspace.Op{workspace.ResumeActorOp{Actor: "w"}}})
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(asPrincipal(ctx, "w"), as("w"), workspace.NewArtifact{Name: "out.md", Content: []byte("x")})
	assert.NoError(t, err, "resumed")
	p := inboxOf(t, ws, workspace.InboxQuery{Actor: "w"})
	require.Len(t, p.Messages, 2)
	assert.Equal(t, "resume", p.Messages[1].Type)
	assert.Equal(t, "ops", p.Messages[1].From)
	assert.Equal(t, pm.Thread, p.Messages[1].Thread)
}

// testMessageRetention: gc removes old messages that owe no ack, with
// every index entry (inboxes, threads), and keeps one that still owes an
// ack whatever its age; a dry run counts what would go.
func testMessageRetention(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	present(t, ws, "w")
	lead := asPrincipal(ctx, "lead")
	plain, err := ws.Messages().Send(lead, as("lead"), workspace.NewMsg{To: []string{"w"}, Body: "fyi"})
	require.NoError(t, err)
	acked, err := ws.Messages().Send(lead, as("lead"), workspace.NewMsg{To: []string{"w"}, Body: "ack me", RequiresAck: true})
	require.NoError(t, err)
	_, err = ws.Messages().Ack(asPrincipal(ctx, "w"), as("w"), acked.ID, "ok")
	require.NoError(t, err)
	owed, err := ws.Messages().Send(lead, as("lead"), workspace.NewMsg{To: []string{"w"}, Body: "still waiting", RequiresAck: true})
	require.NoError(t, err)

	young, err := ws.GC(asPrincipal(ctx, "root"), workspace.GCPolicy{Actor: "gc", KeepMessagesFor: time.Hour})
	require.NoError(t, err)
	assert.Zero(t, young.Messages.Count, "every message was sent within the hour")
	time.Sleep(2 * time.Millisecond) // every message is older than a millisecond by now
	dry, err := ws.GC(asPrincipal(ctx, "root"), workspace.GCPolicy{Actor: "gc", KeepMessagesFor: time.Millisecond, DryRun: true})
	require.NoError(t, err)
	assert.Equal(t, int64(2), dry.Messages.Count)
	r, err := ws.GC(asPrincipal(ctx, "root"), workspace.GCPolicy{Actor: "gc", KeepMessagesFor: time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, dry.Messages, r.Messages, "the dry run counted what went")
	for _, gone := range []string{plain.ID, acked.ID} {
		_, err := ws.Messages().Get(asPrincipal(ctx, "w"), gone)
		assert.ErrorIs(t, err, workspace.ErrNotFound)
	}
	p := inboxOf(t, ws, workspace.InboxQuery{Actor: "w"})
	assert.Equal(t, []string{owed.ID}, msgIDs(p.Messages), "the inbox lost its removed messages and kept the owed one")
	assert.Equal(t, 1, p.Unacked)
	_, err = ws.Messages().Ack(asPrincipal(ctx, "w"), as("w"), owed.ID, "")
	require.NoError(t, err)
}

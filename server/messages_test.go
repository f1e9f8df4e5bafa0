package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// messagePolicy gives the message tests a worker role, a reviewer role
// that may message only the lead, and an admin.
const messagePolicy = `
default_role = "worker"

[roles.worker]
artifacts_read  = ["**"]
artifacts_write = ["**"]
notes_read = ["*"]
notes_write = ["*"]

[roles.reviewer]
artifacts_read = ["**"]
messages = ["lead"]

[actors]
root = ["admin"]
lead = ["worker"]
w    = ["worker"]
rev1 = ["reviewer"]
`

// msgEnv is a server that requires tokens, under messagePolicy, with a
// token for each actor of the policy.
type msgEnv struct {
	*env
	tok map[string][]string // actor: its bearer header
}

func newMsgEnv(t *testing.T, opts server.Options) *msgEnv {
	t.Helper()
	opts.RequireToken = true
	e := &msgEnv{env: newEnv(t, sqliteDSN(t), opts), tok: map[string][]string{}}
	ctx := context.Background()
	_, err := e.ws.Artifacts().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(messagePolicy)})
	require.NoError(t, err)
	for _, a := range []string{"root", "lead", "w", "rev1"} {
		tok, _, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: a, By: "root"})
		require.NoError(t, err)
		e.tok[a] = bearer(tok)
	}
	return e
}

// TestMessageRoutesSendReadAckAndRefuseWhatTheEngineRefuses: a message
// sent over HTTP is the token's actor's; a body naming another sender is
// forbidden; only a participant reads it, only its recipient reads its
// inbox and acks it (once, with a reply), the cursor moves, the policy
// decides whom a role may message, and a batch carries send_message.
func TestMessageRoutesSendReadAckAndRefuseWhatTheEngineRefuses(t *testing.T) {
	e := newMsgEnv(t, server.Options{})
	var m workspace.Msg
	e.ok(201, &m, "POST", "/v1/messages", map[string]any{"to": []string{"w"}, "subject": "API", "body": "use bearer tokens",
		"requires_ack": true, "data": map[string]any{"task": "t1"}}, e.tok["lead"]...)
	assert.Equal(t, "lead", m.From)
	assert.Equal(t, []string{"w"}, m.Pending)
	assert.JSONEq(t, `{"task":"t1"}`, string(m.Data))

	head := e.head()
	for _, forged := range []map[string]any{
		{"to": []string{"w"}, "body": "x", "actor": "root"},
		{"to": []string{"w"}, "body": "x", "from": "root"},
		{"to": []string{"w"}, "body": "x", "actor": "lead", "from": "root"},
	} {
		err := e.fails(403, "POST", "/v1/messages", forged, e.tok["lead"]...)
		require.ErrorIs(t, err, workspace.ErrForbidden, "%v", forged)
	}
	err := e.fails(403, "POST", "/v1/messages", map[string]any{"to": []string{"root"}, "body": "psst"}, e.tok["rev1"]...)
	var fe *workspace.ForbiddenError
	require.ErrorAs(t, err, &fe, "the policy lets a reviewer message only the lead")
	assert.Equal(t, "message.send", fe.Action)
	err = e.fails(400, "POST", "/v1/messages", map[string]any{"to": []string{"w"}, "body": "x", "data": "not an object"}, e.tok["lead"]...)
	require.ErrorIs(t, err, workspace.ErrInvalid)
	e.onlyDenied(head)

	var got workspace.Msg
	e.ok(200, &got, "GET", "/v1/messages/"+m.ID, nil, e.tok["w"]...)
	assert.Equal(t, m.ID, got.ID)
	require.ErrorIs(t, e.fails(404, "GET", "/v1/messages/"+m.ID, nil, e.tok["rev1"]...), workspace.ErrNotFound, "not rev1's to read")

	var page workspace.InboxPage
	e.ok(200, &page, "GET", "/v1/inbox?unread=true", nil, e.tok["w"]...)
	require.Len(t, page.Messages, 1)
	assert.Equal(t, 1, page.Unread)
	assert.Equal(t, 1, page.Unacked)
	require.ErrorIs(t, e.fails(403, "GET", "/v1/inbox?actor=w", nil, e.tok["rev1"]...), workspace.ErrForbidden, "another's inbox")
	e.ok(200, &page, "GET", "/v1/inbox?actor=w", nil, e.tok["root"]...)
	assert.Len(t, page.Messages, 1, "an admin reads any inbox")

	head = e.head()
	require.ErrorIs(t, e.fails(403, "POST", "/v1/messages/"+m.ID+"/ack", map[string]any{}, e.tok["rev1"]...), workspace.ErrForbidden, "not rev1's to ack")
	require.ErrorIs(t, e.fails(403, "POST", "/v1/messages/"+m.ID+"/ack", map[string]any{"actor": "w"}, e.tok["rev1"]...), workspace.ErrForbidden, "nor as w")
	e.onlyDenied(head)
	var acked workspace.Msg
	e.ok(200, &acked, "POST", "/v1/messages/"+m.ID+"/ack", map[string]any{"reply": "will do"}, e.tok["w"]...)
	require.Len(t, acked.Acks, 1)
	assert.Equal(t, "w", acked.Acks[0].By)
	assert.Equal(t, "will do", acked.Acks[0].Reply)
	var again workspace.Msg
	e.ok(200, &again, "POST", "/v1/messages/"+m.ID+"/ack", map[string]any{"reply": "twice"}, e.tok["w"]...)
	assert.Equal(t, acked.Acks, again.Acks, "a second ack answers the first one's record")

	require.ErrorIs(t, e.fails(403, "POST", "/v1/inbox/read", map[string]any{"actor": "w", "id": m.ID}, e.tok["rev1"]...), workspace.ErrForbidden)
	e.ok(204, nil, "POST", "/v1/inbox/read", map[string]any{"id": m.ID}, e.tok["w"]...)
	e.ok(200, &page, "GET", "/v1/inbox?unread=true", nil, e.tok["w"]...)
	assert.Empty(t, page.Messages)
	assert.NotNil(t, page.Messages, "an empty page lists no messages, not null")
	assert.Equal(t, m.ID, page.Cursor)

	var res workspace.BatchResult
	e.ok(200, &res, "POST", "/v1/batch", map[string]any{"ops": []any{
		map[string]any{"op": "put_note", "kind": "decision", "key": "db", "body": "postgres"},
		map[string]any{"op": "send_message", "msg": map[string]any{"to": []string{"w"}, "body": "decided: postgres", "requires_ack": true}},
	}}, e.tok["lead"]...)
	require.Len(t, res.Results, 2)
	require.NotNil(t, res.Results[1].Msg)
	assert.Equal(t, "lead", res.Results[1].Msg.From)
	e.ok(200, &res, "POST", "/v1/batch", map[string]any{"ops": []any{
		map[string]any{"op": "ack_message", "id": res.Results[1].Msg.ID},
	}}, e.tok["w"]...)

	var evs workspace.EventPage
	e.ok(200, &evs, "GET", "/v1/events/history?subject_kind=message&type=message.acked", nil, e.tok["root"]...)
	assert.Len(t, evs.Events, 2, "the log's message events are filtered by their subject kind")
}

// onlyDenied requires that the log moved by nothing but denied events
// since head.
func (e *env) onlyDenied(head int64) {
	e.t.Helper()
	evs, err := e.ws.Events().Read(context.Background(), workspace.EventQuery{AfterSeq: head})
	require.NoError(e.t, err)
	for _, ev := range evs.Events {
		assert.Equal(e.t, workspace.EventDenied, ev.Type, "a refusal wrote %+v", ev)
	}
}

// TestInboxLongPollAnswersAMessageOrTheEmptyPageAtTheBound: a long poll
// asking to wait longer than the server's bound gets the empty page with
// the inbox's counts at the bound; one that waits while a message is sent
// gets that message.
func TestInboxLongPollAnswersAMessageOrTheEmptyPageAtTheBound(t *testing.T) {
	e := newMsgEnv(t, server.Options{MaxWait: 50 * time.Millisecond})
	var page workspace.InboxPage
	e.ok(200, &page, "GET", "/v1/inbox?unacked=true&wait=1h", nil, e.tok["w"]...)
	assert.Empty(t, page.Messages)
	assert.Zero(t, page.Unacked)

	e2 := newMsgEnv(t, server.Options{MaxWait: time.Minute})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var p workspace.InboxPage
		st, out := e2.do("GET", "/v1/inbox?wait=1m", nil, e2.tok["w"]...)
		if assert.Equal(t, 200, st, "%s", out) && assert.NoError(t, json.Unmarshal(out, &p)) && assert.Len(t, p.Messages, 1) {
			assert.Equal(t, "wake up", p.Messages[0].Body)
		}
	}()
	e2.ok(201, nil, "POST", "/v1/messages", map[string]any{"to": []string{"w"}, "body": "wake up"}, e2.tok["lead"]...)
	wg.Wait()
	require.ErrorIs(t, e2.fails(400, "GET", "/v1/inbox?wait=soon", nil, e2.tok["w"]...), workspace.ErrInvalid)
}

// inboxStream opens /v1/inbox/stream with the headers hdr (resuming
// after lastID unless it is negative) and returns its records as they
// come.
func inboxStream(t *testing.T, base string, lastID int64, hdr ...string) (<-chan sseRecord, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/inbox/stream", nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if lastID >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	ch := make(chan sseRecord, 100)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var rec sseRecord
		have := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if have {
					ch <- rec
				}
				rec, have = sseRecord{}, false
			case strings.HasPrefix(line, "id: "):
				rec.ID, _ = strconv.ParseInt(line[4:], 10, 64)
				have = true
			case strings.HasPrefix(line, "data: "):
				rec.Data = line[6:]
				have = true
			}
		}
	}()
	return ch, cancel
}

// nextInbox is the stream's next record that is not a heartbeat.
func nextInbox(t *testing.T, ch <-chan sseRecord) (int64, wire.InboxEvent) {
	t.Helper()
	for {
		r, ok := next(t, ch)
		require.True(t, ok, "the stream ended")
		if r.Data == "" {
			continue
		}
		var ev wire.InboxEvent
		require.NoError(t, json.Unmarshal([]byte(r.Data), &ev))
		return r.ID, ev
	}
}

// TestInboxStreamShowsOnlyOnesOwnInboxAndResumes: w's stream gets what is
// sent to w and to its role, and the ack of it, never a message to
// another; a reconnect with Last-Event-ID resumes after the last record.
// Another's inbox stream is refused.
func TestInboxStreamShowsOnlyOnesOwnInboxAndResumes(t *testing.T) {
	e := newMsgEnv(t, server.Options{})
	ch, cancel := inboxStream(t, e.hs.URL, -1, e.tok["w"]...)
	send := func(from string, body map[string]any) workspace.Msg {
		var m workspace.Msg
		e.ok(201, &m, "POST", "/v1/messages", body, e.tok[from]...)
		return m
	}
	send("lead", map[string]any{"to": []string{"rev1"}, "body": "for rev1 only"})
	toW := send("lead", map[string]any{"to": []string{"w"}, "body": "for w", "requires_ack": true})
	send("rev1", map[string]any{"to": []string{"lead"}, "body": "for the lead only"})
	toRole := send("lead", map[string]any{"to": []string{"role:worker"}, "body": "for the workers"})
	e.ok(200, nil, "POST", "/v1/messages/"+toW.ID+"/ack", map[string]any{}, e.tok["w"]...)

	id1, r1 := nextInbox(t, ch)
	assert.Equal(t, workspace.EventMessageSent, r1.Type)
	assert.Equal(t, toW.ID, r1.Message.ID)
	assert.Equal(t, id1, r1.Seq)
	_, r2 := nextInbox(t, ch)
	assert.Equal(t, toRole.ID, r2.Message.ID, "a message to a role w holds")
	id3, r3 := nextInbox(t, ch)
	assert.Equal(t, workspace.EventMessageAcked, r3.Type)
	assert.Equal(t, toW.ID, r3.Message.ID)
	require.Len(t, r3.Message.Acks, 1)
	cancel()

	last := send("lead", map[string]any{"to": []string{"w"}, "body": "while away"})
	ch, cancel = inboxStream(t, e.hs.URL, id1, e.tok["w"]...)
	defer cancel()
	_, r := nextInbox(t, ch)
	assert.Equal(t, toRole.ID, r.Message.ID, "resumed after the last id received")
	id, r := nextInbox(t, ch)
	assert.Equal(t, id3, id)
	_, r = nextInbox(t, ch)
	assert.Equal(t, last.ID, r.Message.ID)

	st, out := e.do("GET", "/v1/inbox/stream?actor=w", nil, e.tok["rev1"]...)
	assert.Equal(t, 403, st, "%s", out)
	st, out = e.do("GET", "/v1/inbox/stream?after=x", nil, e.tok["w"]...)
	assert.Equal(t, 400, st, "%s", out)
}

// TestPauseRouteGatesWritesWithPausedAndResumeLiftsIt: an admin pauses w
// over HTTP; w's writes answer 423 paused (a *PausedError to a client)
// while its ack of the pause passes; a non-admin cannot pause; resume
// lifts the gate.
func TestPauseRouteGatesWritesWithPausedAndResumeLiftsIt(t *testing.T) {
	e := newMsgEnv(t, server.Options{})
	head := e.head()
	require.ErrorIs(t, e.fails(403, "POST", "/v1/agents/w/pause", map[string]any{}, e.tok["lead"]...), workspace.ErrForbidden)
	e.onlyDenied(head)

	var p wire.AgentPause
	e.ok(200, &p, "POST", "/v1/agents/w/pause", map[string]any{"message": "hold on", "ack_timeout": "1h"}, e.tok["root"]...)
	require.NotNil(t, p.Message)
	assert.Equal(t, "w", p.Actor)
	assert.Equal(t, "pause", p.Message.Type)
	assert.Equal(t, []string{"w"}, p.Message.Pending)
	assert.False(t, p.Message.Deadline.IsZero())

	err := e.fails(423, "POST", "/v1/artifacts", map[string]any{"name": "x.md", "content": "x"}, e.tok["w"]...)
	var pe *workspace.PausedError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "w", pe.Actor)
	assert.Equal(t, "root", pe.By)
	assert.False(t, pe.Since.IsZero())
	require.ErrorIs(t, e.fails(423, "POST", "/v1/messages", map[string]any{"to": []string{"lead"}, "body": "x"}, e.tok["w"]...), workspace.ErrPaused)
	var page workspace.InboxPage
	e.ok(200, &page, "GET", "/v1/inbox", nil, e.tok["w"]...)
	assert.True(t, page.Paused)
	e.ok(200, nil, "POST", "/v1/messages/"+p.Message.ID+"/ack", map[string]any{"reply": "holding"}, e.tok["w"]...)

	require.ErrorIs(t, e.fails(400, "POST", "/v1/agents/w/pause", map[string]any{"ack_timeout": "soon"}, e.tok["root"]...), workspace.ErrInvalid)
	var r wire.AgentPause
	e.ok(200, &r, "POST", "/v1/agents/w/resume", map[string]any{}, e.tok["root"]...)
	assert.Nil(t, r.Message)
	assert.NotEmpty(t, r.Events)
	e.ok(201, nil, "POST", "/v1/artifacts", map[string]any{"name": "x.md", "content": "x"}, e.tok["w"]...)
	require.ErrorIs(t, e.fails(404, "POST", "/v1/agents/w/resume", map[string]any{}, e.tok["root"]...), workspace.ErrNotFound, "w is not paused")
}

// TestServerEscalatesDueMessagesItself: with nobody reading an inbox, the
// server's own escalator escalates a message past its deadline (by the
// store's controlled clock), once, seen as the message.escalated event.
func TestServerEscalatesDueMessagesItself(t *testing.T) {
	var mu sync.Mutex
	now := time.Now().UTC()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ctx := context.Background()
	ws, err := workspace.Open(ctx, sqliteDSN(t), workspace.Options{Clock: clock})
	require.NoError(t, err)
	srv, err := server.New(ws, server.Options{EscalateEvery: 5 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Drain(); _ = ws.Close() })
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "w"}, workspace.NotePut{Kind: "friction", Key: "hello", Body: "here"})
	require.NoError(t, err)
	m, err := ws.Messages().Send(ctx, workspace.Write{Actor: "lead"}, workspace.NewMsg{To: []string{"w"}, Body: "ack by noon",
		RequiresAck: true, Deadline: clock().Add(time.Hour)})
	require.NoError(t, err)
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: head,
		Types: []string{workspace.EventMessageEscalated}}})
	require.NoError(t, err)
	defer func() { _ = sub.Close() }()
	// While nothing is due, escalating only reads: a server
	// checking every second costs its store no write.
	before, ok := ws.CommitStats()
	require.True(t, ok)
	none, err := ws.Messages().Escalate(ctx, "checker")
	require.NoError(t, err)
	assert.Empty(t, none)
	after, _ := ws.CommitStats()
	assert.Equal(t, before.Groups, after.Groups, "no write while nothing is due")

	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got, err := sub.Next(wctx)
	require.NoError(t, err, "no escalation within 30s")
	assert.Equal(t, m.ID, got.Event.Subject.ID)
	assert.Equal(t, "agentspace-server", got.Event.Actor)
	esc, err := ws.Messages().Get(ctx, m.ID)
	require.NoError(t, err)
	assert.False(t, esc.EscalatedAt.IsZero())
	srv.Drain()
	evs, err := ws.Events().Read(ctx, workspace.EventQuery{Types: []string{workspace.EventMessageEscalated}})
	require.NoError(t, err)
	assert.Len(t, evs.Events, 1, "escalated once")
}

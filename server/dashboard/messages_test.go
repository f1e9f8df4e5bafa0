package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/policy"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/server/dashboard"
	"github.com/agentspace/agentspace/workspace"
)

// clock is a controlled clock for the message engine's deadlines.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// newClockedEnv is newEnv whose workspace sets and checks deadlines by a
// clock that starts two hours behind the real one: a deadline set an
// hour ahead of it is already past for the dashboard, which reads the
// real time, once the clock catches up and the engine escalates it.
func newClockedEnv(t *testing.T) (*env, *clock) {
	t.Helper()
	c := &clock{now: time.Now().UTC().Add(-2 * time.Hour)}
	e := newEnvOn(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"), server.Options{}, workspace.Options{Clock: c.Now})
	return e, c
}

// messaged is what messaging sent.
type messaged struct {
	fyi, question, late workspace.Msg
}

// messaging seeds the team's work and sends planner three messages: a
// note that needs no ack, lead's question that needs its ack within the
// (real) hour, and reviewer's error report whose deadline passed an hour
// ago, escalated (by a checker) once the clock caught up.
func messaging(t *testing.T, e *env, c *clock) messaged {
	t.Helper()
	seed(t, e.ws)
	ctx := context.Background()
	var m messaged
	var err error
	m.fyi, err = e.ws.Messages().Send(ctx, workspace.Write{Actor: "lead"}, workspace.NewMsg{To: []string{"planner"}, Subject: "CI is green again", Body: "fyi"})
	require.NoError(t, err)
	m.question, err = e.ws.Messages().Send(ctx, workspace.Write{Actor: "lead"}, workspace.NewMsg{To: []string{"planner"}, Type: "question",
		Subject: "Which token lifetime?", Body: "15 minutes or an hour?", RequiresAck: true, Deadline: c.Now().Add(3 * time.Hour)})
	require.NoError(t, err)
	m.late, err = e.ws.Messages().Send(ctx, workspace.Write{Actor: "reviewer"}, workspace.NewMsg{To: []string{"planner"}, Type: "review",
		Severity: workspace.SeverityError, Subject: "Tests fail on main", Body: "login_test.go fails since your change",
		Data: []byte(`{"failing":["TestLogin"]}`), RequiresAck: true, Deadline: c.Now().Add(time.Hour)})
	require.NoError(t, err)
	c.advance(2 * time.Hour)
	esc, err := e.ws.Messages().Escalate(ctx, "checker")
	require.NoError(t, err)
	require.Len(t, esc, 1)
	require.Equal(t, m.late.ID, esc[0].ID)
	return m
}

// TestAgentPageShowsItsInboxToAnOperator: an admin reads planner's page:
// its unread and awaiting counts, the two messages awaiting its ack with
// their deadlines (the overdue one marked escalated), and its recent
// messages, newest first, with sender, type, severity, subject and
// whether each was acked; each links to its thread.
func TestAgentPageShowsItsInboxToAnOperator(t *testing.T) {
	e, c := newClockedEnv(t)
	m := messaging(t, e, c)
	admin := e.token("ops", policy.AdminRole)

	code, page := e.get("/ui/agent?actor=planner", "Authorization", "Bearer "+admin)
	require.Equal(t, http.StatusOK, code, page)
	assert.Regexp(t, `id="agent-inbox">3 unread · 2 awaiting its ack · <span class="tag escalated">1 escalated</span>`, page)
	awaiting := section(t, page, `id="agent-awaiting"`, "</table>")
	assert.Contains(t, awaiting, "Which token lifetime?")
	assert.Contains(t, awaiting, "Tests fail on main")
	assert.NotContains(t, awaiting, "CI is green again", "a note that needs no ack awaits nothing")
	assert.Regexp(t, `Tests fail on main</a></td><td class="status"><span class="tag warn">awaits ack</span> from <span class="mono">planner</span> · by <span title="[^"]+">[^<]+</span> <span class="tag bad">overdue</span> <span class="tag escalated"`, awaiting)
	assert.Regexp(t, `Which token lifetime\?</a></td><td class="status"><span class="tag warn">awaits ack</span> from <span class="mono">planner</span> · by <span title="[^"]+">[^<]+</span> <time class="countdown" data-expires="[^"]+">(59m\d+s|1h0m) left</time>`, awaiting)
	assert.Less(t, strings.Index(awaiting, "Which token lifetime?"), strings.Index(awaiting, "Tests fail on main"), "oldest first")

	recent := section(t, page, `id="agent-messages"`, "</table>")
	for _, want := range []string{
		`<a href="/ui/agent?actor=reviewer">reviewer</a></td><td class="to">planner</td><td class="mtype">review</td><td><span class="tag sev-error">error</span></td>`,
		`<td class="mtype">question</td><td><span class="tag sev-info">info</span></td>`,
		`<td class="mtype">note</td>`, "CI is green again",
		`href="/ui/message?id=` + m.late.ID + `#msg-` + m.late.ID + `"`,
	} {
		assert.Contains(t, recent, want)
	}
	assert.Less(t, strings.Index(recent, "Tests fail on main"), strings.Index(recent, "CI is green again"), "newest first")

	// Acked, the question leaves the awaiting list and shows acked.
	_, err := e.ws.Messages().Ack(context.Background(), workspace.Write{Actor: "planner"}, m.question.ID, "an hour")
	require.NoError(t, err)
	_, page = e.get("/ui/agent?actor=planner", "Authorization", "Bearer "+admin)
	assert.NotContains(t, section(t, page, `id="agent-awaiting"`, "</table>"), "Which token lifetime?")
	assert.Regexp(t, `Which token lifetime\?</a></td><td class="status"><span class="tag ok">acked</span>`, page)
	assert.Contains(t, page, "1 awaiting its ack")
}

// TestAgentInboxIsAnOperatorsView: another agent's token and an anonymous
// reader get planner's page with the engine's refusal where its inbox
// would be, and none of its messages; planner's own token reads its own.
func TestAgentInboxIsAnOperatorsView(t *testing.T) {
	e, c := newClockedEnv(t)
	messaging(t, e, c)
	watcher := e.token("watcher", "")
	planner := e.token("planner", "")
	for _, hdr := range [][]string{{"Authorization", "Bearer " + watcher}, nil} {
		code, page := e.get("/ui/agent?actor=planner", hdr...)
		require.Equal(t, http.StatusOK, code, page)
		assert.Contains(t, page, `<div class="error" role="alert" id="agent-inbox"><p>refused: `)
		assert.Contains(t, page, "an agent reads only its own inbox (an operator needs the admin role)")
		assert.NotContains(t, page, "Which token lifetime?")
		assert.NotContains(t, page, "Tests fail on main")
		assert.NotContains(t, page, "/ui/action/agent/pause", "no pause for a reader")
	}
	code, page := e.get("/ui/agent?actor=planner", "Authorization", "Bearer "+planner)
	require.Equal(t, http.StatusOK, code, page)
	assert.Contains(t, page, "3 unread · 2 awaiting its ack")
	assert.Contains(t, page, "Which token lifetime?")
}

// TestMessagesPageListsWhatAwaitsAnAckAndWhatWasEscalated: an admin's
// messages page lists the team's messages that owe an ack or were
// escalated, newest first (by their latest send or escalation), not the
// note nor the escalation's own message; an escalated message stays once
// acked. Another agent sees only what it is party to.
func TestMessagesPageListsWhatAwaitsAnAckAndWhatWasEscalated(t *testing.T) {
	e, c := newClockedEnv(t)
	m := messaging(t, e, c)
	admin := e.token("ops", policy.AdminRole)
	reviewer := e.token("reviewer", "")
	watcher := e.token("watcher", "")

	code, page := e.get("/ui/messages", "Authorization", "Bearer "+admin)
	require.Equal(t, http.StatusOK, code, page)
	assert.Contains(t, page, `hx-trigger="sse:messages"`, "it follows the message events")
	assert.Contains(t, page, `id="messages-summary">2 awaiting an ack (1 overdue), 1 escalated, newest first.`)
	rows := section(t, page, `id="message-rows"`, "</tbody>")
	assert.Equal(t, 2, strings.Count(rows, `<tr class="msg`))
	assert.NotContains(t, rows, "CI is green again")
	assert.NotContains(t, rows, "unacknowledged: ", "the escalation's own message needs no ack")
	assert.Less(t, strings.Index(rows, "Tests fail on main"), strings.Index(rows, "Which token lifetime?"), "its escalation is the newest event")
	assert.Contains(t, rows, `<span class="tag escalated"`)
	assert.Contains(t, rows, `href="/ui/message?id=`+m.question.ID+`#msg-`+m.question.ID+`"`)

	ctx := context.Background()
	for _, id := range []string{m.question.ID, m.late.ID} {
		_, err := e.ws.Messages().Ack(ctx, workspace.Write{Actor: "planner"}, id, "on it")
		require.NoError(t, err)
	}
	_, page = e.get("/ui/messages", "Authorization", "Bearer "+admin)
	rows = section(t, page, `id="message-rows"`, "</tbody>")
	assert.NotContains(t, rows, "Which token lifetime?", "acked: it awaits nothing")
	assert.Regexp(t, `Tests fail on main</a></td><td class="status"><span class="tag ok">acked</span> <span class="tag escalated"`, rows, "escalated for good")
	assert.Contains(t, page, "0 awaiting an ack (0 overdue), 1 escalated")

	_, page = e.get("/ui/messages", "Authorization", "Bearer "+reviewer)
	rows = section(t, page, `id="message-rows"`, "</tbody>")
	assert.Contains(t, rows, "Tests fail on main", "the reviewer sent it")
	assert.Contains(t, page, "an operator (log in with an admin token) sees the whole team")
	_, page = e.get("/ui/messages", "Authorization", "Bearer "+watcher)
	assert.Contains(t, page, "no message awaits an ack or was escalated")
	assert.Contains(t, page, "more not shown (not yours to read, or removed)")

	code, body := e.get("/ui/messages?before=x")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, `before &#34;x&#34;: want a seq`)
}

// TestMessagesPageHasAnOlderPage: past a page's worth (50 rows), the page
// links to the older ones, and the older page lists what the first did
// not.
func TestMessagesPageHasAnOlderPage(t *testing.T) {
	e := newEnv(t, server.Options{})
	ctx := context.Background()
	_, err := e.ws.Notes().Put(ctx, workspace.Write{Actor: "worker"}, workspace.NotePut{Kind: "friction", Key: "here", Title: "here"})
	require.NoError(t, err, "a recipient is an agent the workspace knows")
	n := dashboard.DefaultPageSize + 3
	for i := range n {
		_, err := e.ws.Messages().Send(ctx, workspace.Write{Actor: "lead"}, workspace.NewMsg{To: []string{"worker"},
			Subject: "question #" + itoa64(int64(i)) + ".", Body: "?", RequiresAck: true})
		require.NoError(t, err)
	}
	admin := e.token("ops", policy.AdminRole)
	_, page := e.get("/ui/messages", "Authorization", "Bearer "+admin)
	rows := section(t, page, `id="message-rows"`, "</tbody>")
	assert.Equal(t, dashboard.DefaultPageSize, strings.Count(rows, `<tr class="msg`))
	assert.Contains(t, rows, "question #"+itoa64(int64(n-1))+".")
	assert.NotContains(t, rows, "question #2.")
	older := regexp.MustCompile(`href="(/ui/messages\?before=\d+)"`).FindStringSubmatch(page)
	require.NotNil(t, older, page)
	_, page = e.get(older[1], "Authorization", "Bearer "+admin)
	rows = section(t, page, `id="message-rows"`, "</tbody>")
	assert.Equal(t, 3, strings.Count(rows, `<tr class="msg`))
	for _, want := range []string{"question #2.", "question #1.", "question #0."} {
		assert.Contains(t, rows, want)
	}
	assert.Contains(t, page, `href="/ui/messages">← newest</a>`)
	assert.NotContains(t, page, `older →`)
}

// TestMessageThreadShowsItsMessagesInOrder: a message's page is its
// thread, oldest first: the question, planner's reply, their bodies, data
// and acks with their replies. A bad id is the caller's mistake; a
// message one may not read is not found.
func TestMessageThreadShowsItsMessagesInOrder(t *testing.T) {
	e, c := newClockedEnv(t)
	m := messaging(t, e, c)
	ctx := context.Background()
	reply, err := e.ws.Messages().Send(ctx, workspace.Write{Actor: "planner"}, workspace.NewMsg{To: []string{"lead"}, ReplyTo: m.question.ID,
		Subject: "Re: token lifetime", Body: "An hour, with refresh tokens."})
	require.NoError(t, err)
	_, err = e.ws.Messages().Ack(ctx, workspace.Write{Actor: "planner"}, m.question.ID, "answered in the thread")
	require.NoError(t, err)
	admin := e.token("ops", policy.AdminRole)
	lead := e.token("lead", "")

	for _, tok := range []string{admin, lead} {
		code, page := e.get("/ui/message?id="+reply.ID, "Authorization", "Bearer "+tok)
		require.Equal(t, http.StatusOK, code, page)
		assert.Contains(t, page, `id="thread-summary">2 messages in this thread, oldest first.`)
		q, r := strings.Index(page, `id="msg-`+m.question.ID+`"`), strings.Index(page, `id="msg-`+reply.ID+`"`)
		require.Positive(t, q)
		assert.Less(t, q, r, "in sending order")
		assert.Contains(t, page, `<article class="msg-card sev-info focus" id="msg-`+reply.ID+`">`)
		assert.Contains(t, page, "15 minutes or an hour?")
		assert.Contains(t, page, "An hour, with refresh tokens.")
		assert.Contains(t, page, `acked by <span class="mono">planner</span> at`)
		assert.Contains(t, page, "<q>answered in the thread</q>")
		assert.Contains(t, page, `in reply to <a href="#msg-`+m.question.ID+`"`)
	}
	_, page := e.get("/ui/message?id="+m.late.ID, "Authorization", "Bearer "+admin)
	assert.Contains(t, page, "login_test.go fails since your change")
	assert.Contains(t, page, `id="thread-summary">2 messages in this thread`)
	assert.Contains(t, page, `<span class="mtype">escalation</span> · unacknowledged: Tests fail on main`, "its escalation joined its thread")
	assert.Contains(t, page, "&#34;failing&#34;: [\n    &#34;TestLogin&#34;\n  ]", "its data, indented")
	assert.Contains(t, page, `<span class="tag escalated"`)

	// lead reads a reply sent to it in a thread whose first message is
	// not its own: the thread as lead may read it.
	fwd, err := e.ws.Messages().Send(ctx, workspace.Write{Actor: "planner"}, workspace.NewMsg{To: []string{"lead"}, ReplyTo: m.late.ID,
		Subject: "Re: Tests fail on main", Body: "Fixing it; the release slips an hour."})
	require.NoError(t, err)
	code, page := e.get("/ui/message?id="+fwd.ID, "Authorization", "Bearer "+lead)
	require.Equal(t, http.StatusOK, code, page)
	assert.Contains(t, page, `id="thread-summary">1 messages in this thread`)
	assert.Contains(t, page, "the release slips an hour")
	assert.NotContains(t, page, "login_test.go fails since your change", "not lead's to read")

	watcher := e.token("watcher", "")
	for _, c := range []struct {
		path, tok string
		code      int
		want      string
	}{
		{"/ui/message", admin, 400, "id: missing"},
		{"/ui/message?id=nonsense", admin, 400, "not a message id"},
		{"/ui/message?id=01890000-0000-7000-8000-000000000000", admin, 404, "not found"},
		{"/ui/message?id=" + m.question.ID, watcher, 404, "not found"},
	} {
		code, body := e.get(c.path, "Authorization", "Bearer "+c.tok)
		assert.Equal(t, c.code, code, c.path)
		assert.Contains(t, body, c.want, c.path)
	}
}

// TestOperatorPausesAndResumesAnAgent: an admin pauses planner from its
// page with an ack timeout: a pause batch as the admin, planner's writes
// refused, its page saying by whom and since when with a resume button
// and the pause message awaiting its ack; resume lifts it. A reader's
// token, a forged CSRF token and bad input are refused with nothing
// written.
func TestOperatorPausesAndResumesAnAgent(t *testing.T) {
	e := newEnv(t, server.Options{})
	seed(t, e.ws)
	ctx := context.Background()
	admin := e.token("ops", policy.AdminRole)
	reader := e.token("watcher", "")
	form := url.Values{"actor": {"planner"}, "ack_timeout": {"10m"}}

	code, page := e.get("/ui/agent?actor=planner", "Authorization", "Bearer "+admin)
	require.Equal(t, http.StatusOK, code, page)
	assert.Contains(t, page, `action="/ui/action/agent/pause"`)
	assert.Contains(t, page, `name="ack_timeout"`)
	assert.NotContains(t, page, `action="/ui/action/agent/resume"`)

	head := func() int64 {
		h, err := e.ws.Events().Head(ctx)
		require.NoError(t, err)
		return h
	}
	before := head()
	cookie := dashboard.CookieName + "=" + admin
	for _, c := range []struct {
		name string
		form url.Values
		hdr  []string
		code int
		want string
	}{
		{"a reader's token", form, []string{"Authorization", "Bearer " + reader}, 403, "operator actions need a token with the admin role"},
		{"no token", form, nil, 403, "operator actions need a token"},
		{"a forged CSRF token", url.Values{"actor": {"planner"}, "csrf": {"0123456789abcdef0123456789abcdef"}}, []string{"Cookie", cookie}, 403, "CSRF token is missing or stale"},
		{"no CSRF token", form, []string{"Cookie", cookie}, 403, "CSRF token is missing or stale"},
		{"no actor", url.Values{"ack_timeout": {"10m"}}, []string{"Authorization", "Bearer " + admin}, 400, "actor: missing"},
		{"a bad timeout", url.Values{"actor": {"planner"}, "ack_timeout": {"soon"}}, []string{"Authorization", "Bearer " + admin}, 400, "ack timeout &#34;soon&#34;"},
		{"a timeout out of range", url.Values{"actor": {"planner"}, "ack_timeout": {"100000h"}}, []string{"Authorization", "Bearer " + admin}, 409, "out of range"},
	} {
		code, body := e.post("/ui/action/agent/pause", c.form, c.hdr...)
		assert.Equal(t, c.code, code, c.name)
		assert.Contains(t, body, c.want, c.name)
	}
	assert.Equal(t, before, head(), "nothing written")

	code, body := e.post("/ui/action/agent/pause", form, "Authorization", "Bearer "+admin)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "paused planner; its pause message awaits its ack by ")
	_, err := e.ws.Notes().Put(ctx, workspace.Write{Actor: "planner"}, workspace.NotePut{Kind: "decision", Key: "while-paused", Title: "x"})
	var pe *workspace.PausedError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "ops", pe.By, "the pause is the operator's")
	code, body = e.post("/ui/action/agent/pause", form, "Authorization", "Bearer "+admin)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "planner was already paused")

	_, page = e.get("/ui/agent?actor=planner", "Authorization", "Bearer "+admin)
	assert.Regexp(t, `<span class="tag bad" id="agent-paused">paused</span> by <span class="mono">ops</span> since <span title="[^"]+">[^<]+ UTC</span>`, page)
	assert.Contains(t, page, `action="/ui/action/agent/resume"`)
	assert.NotContains(t, page, `action="/ui/action/agent/pause"`)
	awaiting := section(t, page, `id="agent-awaiting"`, "</table>")
	assert.Contains(t, awaiting, "paused by ops")
	assert.Contains(t, awaiting, `<td class="mtype">pause</td>`)
	_, page = e.get("/ui/agent?actor=planner", "Authorization", "Bearer "+reader)
	assert.Contains(t, page, `id="agent-paused">paused</span> by <span class="mono">ops</span>`, "the pause is in the log, for any reader")

	code, body = e.post("/ui/action/agent/resume", url.Values{"actor": {"planner"}}, "Authorization", "Bearer "+reader)
	assert.Equal(t, http.StatusForbidden, code, body)
	code, body = e.post("/ui/action/agent/resume", url.Values{"actor": {"planner"}}, "Authorization", "Bearer "+admin)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "resumed planner")
	_, err = e.ws.Notes().Put(ctx, workspace.Write{Actor: "planner"}, workspace.NotePut{Kind: "decision", Key: "after-resume", Title: "x"})
	require.NoError(t, err)
	_, page = e.get("/ui/agent?actor=planner", "Authorization", "Bearer "+admin)
	assert.NotContains(t, page, `id="agent-paused"`)
	assert.Contains(t, page, `action="/ui/action/agent/pause"`)
	code, body = e.post("/ui/action/agent/resume", url.Values{"actor": {"planner"}}, "Authorization", "Bearer "+admin)
	assert.Equal(t, http.StatusConflict, code)
	assert.Contains(t, body, "is not paused")
	p, err := e.ws.Events().Read(ctx, workspace.EventQuery{Types: []string{workspace.EventActorPaused, workspace.EventActorResumed}})
	require.NoError(t, err)
	require.Len(t, p.Events, 2)
	assert.Equal(t, "ops", p.Events[0].Actor)
	assert.Equal(t, "ops", p.Events[1].Actor)
}

// TestPauseWithAPolicyIsTheEnginesToDecide: where the workspace has a
// policy, a token without the admin right may press the button (the
// policy decides operator actions), and the engine refuses its pause.
func TestPauseWithAPolicyIsTheEnginesToDecide(t *testing.T) {
	e := newEnv(t, server.Options{})
	ctx := context.Background()
	_, err := e.ws.Artifacts().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: workspace.PolicyArtifact, Content: []byte(opsPolicy)})
	require.NoError(t, err)
	opal := e.token("opal", "")
	before, err := e.ws.Events().Head(ctx)
	require.NoError(t, err)
	code, body := e.post("/ui/action/agent/pause", url.Values{"actor": {"wendy"}}, "Authorization", "Bearer "+opal)
	assert.Equal(t, http.StatusForbidden, code, body)
	assert.Contains(t, body, "refused: ")
	after, err := e.ws.Events().Head(ctx)
	require.NoError(t, err)
	assert.LessOrEqual(t, after, before+1, "at most the denial is recorded")
	p, err := e.ws.Events().Read(ctx, workspace.EventQuery{AfterSeq: before, Types: []string{workspace.EventActorPaused}})
	require.NoError(t, err)
	assert.Empty(t, p.Events)
}

// section is the part of page from the first from to the next to.
func section(t *testing.T, page, from, to string) string {
	t.Helper()
	i := strings.Index(page, from)
	require.GreaterOrEqual(t, i, 0, "the page has no %s", from)
	j := strings.Index(page[i:], to)
	require.GreaterOrEqual(t, j, 0)
	return page[i : i+j]
}

// TestTimelineMarksEscalationsOnTheLaneThatOwedTheAck: the escalation of
// reviewer's report (its deadline passed by the controlled clock, no
// sleep) is a mark on planner's lane, which owed the ack, not on the lane
// of the checker that ran the escalation; it links to the message. A
// role's unanswered message is marked on the role's own lane. A reader
// who may not read the messages gets no mark, and a count of them.
func TestTimelineMarksEscalationsOnTheLaneThatOwedTheAck(t *testing.T) {
	e, c := newClockedEnv(t)
	m := messaging(t, e, c)
	ctx := context.Background()
	role, err := e.ws.Messages().Send(ctx, workspace.Write{Actor: "lead"}, workspace.NewMsg{To: []string{"role:admin"},
		Subject: "Rotate the signing key", Body: "any admin", RequiresAck: true, Deadline: c.Now().Add(time.Minute), EscalateTo: []string{"lead"}})
	require.NoError(t, err)
	c.advance(2 * time.Minute)
	esc, err := e.ws.Messages().Escalate(ctx, "checker")
	require.NoError(t, err)
	require.Len(t, esc, 1)
	admin := e.token("ops", policy.AdminRole)

	code, page := e.get("/ui/timeline?span=15m", "Authorization", "Bearer "+admin)
	require.Equal(t, http.StatusOK, code, page)
	laneY := func(name, href string) string {
		t.Helper()
		re := regexp.MustCompile(`y1="([\d.]+)" y2="[\d.]+"></line><a href="` + regexp.QuoteMeta(href) + `"><title>` + regexp.QuoteMeta(name) + `</title>`)
		g := re.FindStringSubmatch(page)
		require.NotNil(t, g, "no lane of %s", name)
		return g[1]
	}
	markY := func(id string) float64 {
		t.Helper()
		re := regexp.MustCompile(`<a href="/ui/message\?id=` + id + `#msg-` + id + `"><circle class="mark escalated" cx="[\d.]+" cy="([\d.]+)" r="4"><title>([^<]*)</title>`)
		g := re.FindStringSubmatch(page)
		require.NotNil(t, g, "no escalation mark of %s", id)
		return parseFloat(t, g[1])
	}
	assert.Equal(t, parseFloat(t, laneY("planner", "/ui/agent?actor=planner"))+12, markY(m.late.ID), "on planner's lane")
	assert.Equal(t, parseFloat(t, laneY("role:admin", "/ui/messages"))+12, markY(role.ID), "on the role's lane")
	assert.Contains(t, page, "planner owed an ack to reviewer&#39;s &#34;Tests fail on main&#34;")
	assert.Contains(t, page, "; still owed")
	assert.NotContains(t, page, ">checker</text>", "the checker owed nothing: no lane")
	assert.Contains(t, page, `<span class="key escalated"></span>escalated`)

	// Acked since, the mark stays, and says so.
	_, err = e.ws.Messages().Ack(ctx, workspace.Write{Actor: "planner"}, m.late.ID, "fixed")
	require.NoError(t, err)
	_, page = e.get("/ui/timeline?span=15m", "Authorization", "Bearer "+admin)
	assert.Contains(t, page, "planner owed an ack to reviewer&#39;s &#34;Tests fail on main&#34; by ")
	assert.Contains(t, page, "; acked since")

	_, page = e.get("/ui/timeline?span=15m")
	assert.NotContains(t, page, `class="mark escalated"`)
	assert.Contains(t, page, "; 2 escalations of messages not yours to read not drawn")
}

func parseFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err)
	return f
}

// TestMessagesOfHostileContentAreInert: a message whose subject, body,
// reply and data attack the page renders escaped on the messages page,
// its thread and its recipient's page, format characters shown as
// [U+XXXX].
func TestMessagesOfHostileContentAreInert(t *testing.T) {
	e := newEnv(t, server.Options{})
	ctx := context.Background()
	_, err := e.ws.Notes().Put(ctx, workspace.Write{Actor: hostileActors[1]}, workspace.NotePut{Kind: "friction", Key: "here", Title: "here"})
	require.NoError(t, err)
	m, err := e.ws.Messages().Send(ctx, workspace.Write{Actor: hostileActors[0]}, workspace.NewMsg{To: []string{hostileActors[1]},
		Subject: `<img src=x onerror=alert(1)> gnp.exe`, Body: "<script>alert(2)</script>\u202eevil",
		Data: []byte(`{"x":"<svg onload=alert(3)>"}`), RequiresAck: true})
	require.NoError(t, err)
	_, err = e.ws.Messages().Ack(ctx, workspace.Write{Actor: hostileActors[1]}, m.ID, `"><iframe src=javascript:alert(4)>`)
	require.NoError(t, err)
	_, err = e.ws.Messages().Send(ctx, workspace.Write{Actor: hostileActors[0]}, workspace.NewMsg{To: []string{hostileActors[1]},
		Subject: "javascript:alert(5)", Body: "x", RequiresAck: true})
	require.NoError(t, err)
	admin := e.token("ops", policy.AdminRole)
	for _, p := range []string{"/ui/messages", "/ui/message?id=" + m.ID, "/ui/agent?" + url.Values{"actor": {hostileActors[1]}}.Encode()} {
		code, page := e.get(p, "Authorization", "Bearer "+admin)
		require.Equal(t, http.StatusOK, code, p)
		assertInert(t, p, page)
		assert.NotContains(t, page, "\u202e", p)
		assert.NotContains(t, page, `href="javascript:`, p)
	}
	_, page := e.get("/ui/message?id="+m.ID, "Authorization", "Bearer "+admin)
	assert.Contains(t, page, "&lt;script&gt;alert(2)&lt;/script&gt;[U&#43;202E]evil")
	assert.Contains(t, page, `&#34;x&#34;: &#34;\u003csvg onload=alert(3)\u003e&#34;`, "its data, as the engine keeps it")
	assert.Contains(t, page, "<q>&#34;&gt;&lt;iframe src=javascript:alert(4)&gt;</q>")
}

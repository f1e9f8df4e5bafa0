package dashboard_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// TestMessagesInABrowser: an admin opens the messages page, which lists
// what awaits an ack and what was escalated and follows a message sent
// through another handle; a row opens the message's thread; planner's
// page shows its pending messages, and its pause button (confirmed, with
// an ack timeout) pauses it, the page then saying by whom, and resume
// lifts it. With AGENTSPACE_TEST_SCREENSHOTS set the screenshots land
// there (docs/ keeps them as dashboard-messages.png and
// dashboard-agent-inbox.png).
func TestMessagesInABrowser(t *testing.T) {
	tab := browser(t)
	e, c := newClockedEnv(t)
	m := messaging(t, e, c)
	shots := screenshotDir(t)
	ctx := context.Background()
	_, err := e.ws.Messages().Send(ctx, workspace.Write{Actor: "lead"}, workspace.NewMsg{To: []string{"builder", "tester"}, Each: true, Type: "handoff",
		Severity: workspace.SeverityWarning, Subject: "Freeze merges until the release is cut", Body: "ack when your branch is parked",
		RequiresAck: true, Deadline: c.Now().Add(45 * time.Minute)})
	require.NoError(t, err)
	_, err = e.ws.Messages().Ack(ctx, workspace.Write{Actor: "builder"}, mustLast(t, e, "builder"), "parked")
	require.NoError(t, err)
	admin := e.token("ops", "admin")

	p := tab(t)
	require.NoError(t, chromedp.Do(p,
		chromedp.Navigate(e.hs.URL+"/ui/login"),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), admin),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS("#col-ready")),
		chromedp.Click(`//nav/a[text()="Messages"]`),
		chromedp.WaitVisible(chromedp.CSS("#messages-table"))))
	assert.Contains(t, textOf(t, p, "#messages-summary"), "3 awaiting an ack (1 overdue), 1 escalated")
	rows := textOf(t, p, "#message-rows")
	for _, want := range []string{"Tests fail on main", "Which token lifetime?", "Freeze merges until the release is cut", "escalated", "overdue"} {
		assert.Contains(t, rows, want)
	}
	assert.NotContains(t, rows, "CI is green again")

	// Live: a message sent through another handle appears at the top.
	streamOpen(t, p)
	_, err = e.other().Messages().Send(ctx, workspace.Write{Actor: "lead"}, workspace.NewMsg{To: []string{"reviewer"}, Type: "question",
		Subject: "Can you review the login endpoint today?", Body: "by five", RequiresAck: true, Deadline: time.Now().Add(90 * time.Minute)})
	require.NoError(t, err)
	waitFor(t, p, `//tbody[@id="message-rows"]/tr[1][contains(., "Can you review the login endpoint today?")]`, 5*time.Second)
	screenshot(t, p, shots, "messages")

	// A row opens its thread.
	require.NoError(t, chromedp.Do(p,
		chromedp.Click(`//tbody[@id="message-rows"]//a[text()="Tests fail on main"]`),
		chromedp.WaitVisible(chromedp.CSS("#thread"))))
	assert.Contains(t, textOf(t, p, "#msg-"+m.late.ID), "login_test.go fails since your change")

	// planner's page: its inbox, then pause and resume.
	require.NoError(t, chromedp.Do(p,
		chromedp.Navigate(e.hs.URL+"/ui/agent?"+url.Values{"actor": {"planner"}}.Encode()),
		chromedp.WaitVisible(chromedp.CSS("#agent-awaiting"))))
	assert.Contains(t, textOf(t, p, "#agent-inbox"), "2 awaiting its ack")
	awaiting := textOf(t, p, "#agent-awaiting")
	assert.Contains(t, awaiting, "Which token lifetime?")
	assert.Contains(t, awaiting, "escalated")
	screenshot(t, p, shots, "agent-inbox")

	streamOpen(t, p)
	confirmed, err := chromedp.Run(p, chromedp.Evaluate[bool](`(() => { window.confirm = () => true; return true; })()`))
	require.NoError(t, err)
	require.True(t, confirmed)
	require.NoError(t, chromedp.Do(p,
		chromedp.SetValue(chromedp.CSS(`input[name="ack_timeout"]`), "5m"),
		chromedp.Click(chromedp.CSS(`form[action="/ui/action/agent/pause"] button`))))
	waitFor(t, p, `//div[@id="flash"][contains(., "paused planner; its pause message awaits its ack by")]`, 5*time.Second)
	waitFor(t, p, `//div[@id="agent-pause"][contains(., "paused by ops since")]`, 5*time.Second)
	waitFor(t, p, `//table[@id="agent-awaiting"]//td[@class="mtype"][text()="pause"]`, 5*time.Second)
	_, err = e.ws.Notes().Put(ctx, workspace.Write{Actor: "planner"}, workspace.NotePut{Kind: "decision", Key: "paused-write", Title: "x"})
	require.ErrorIs(t, err, workspace.ErrPaused)

	require.NoError(t, chromedp.Do(p, chromedp.Click(chromedp.CSS(`form[action="/ui/action/agent/resume"] button`))))
	waitFor(t, p, `//div[@id="flash"][contains(., "resumed planner")]`, 5*time.Second)
	waitFor(t, p, `//form[@action="/ui/action/agent/pause"]`, 5*time.Second)
	_, err = e.ws.Notes().Put(ctx, workspace.Write{Actor: "planner"}, workspace.NotePut{Kind: "decision", Key: "resumed-write", Title: "x"})
	require.NoError(t, err)
}

// mustLast is the newest message in actor's inbox.
func mustLast(t *testing.T, e *env, actor string) string {
	t.Helper()
	p, err := e.ws.Messages().Inbox(context.Background(), workspace.InboxQuery{Actor: actor})
	require.NoError(t, err)
	require.NotEmpty(t, p.Messages)
	return p.Messages[len(p.Messages)-1].ID
}

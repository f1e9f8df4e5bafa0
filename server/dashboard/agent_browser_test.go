package dashboard_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// TestAgentPageInABrowser: an admin opens planner's page from the agents
// list and from its timeline lane; the page shows its state with the rule,
// its claim, lease, tokens and recent events, follows a write of planner's
// made through another handle, and its stop button (confirmed) stops
// planner, after which the page shows it gone. With
// AGENTSPACE_TEST_SCREENSHOTS set the screenshot lands there (docs/ keeps
// it as dashboard-agent.png).
func TestAgentPageInABrowser(t *testing.T) {
	tab := browser(t)
	e := newEnv(t, server.Options{})
	s := seed(t, e.ws)
	shots := screenshotDir(t)
	ctx := context.Background()
	_, err := e.ws.Artifacts().Update(ctx, workspace.Write{Actor: "planner", IfVersion: 2, Message: "tighten the plan"}, workspace.ByName("plans/auth.md"),
		workspace.ArtifactChange{Content: []byte("# stale\n")})
	require.ErrorIs(t, err, workspace.ErrConflict)
	_, _, err = e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "planner", Role: "worker", By: "setup"})
	require.NoError(t, err)
	admin := e.token("ops", "admin")

	p := tab(t)
	require.NoError(t, chromedp.Do(p,
		chromedp.Navigate(e.hs.URL+"/ui/login"),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), admin),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS("#col-ready")),
		chromedp.Navigate(e.hs.URL+"/ui/agents"),
		chromedp.WaitVisible(chromedp.CSS("table.agents")),
		chromedp.Click(`//table[contains(@class,"agents")]//a[text()="planner"]`),
		chromedp.WaitVisible(chromedp.CSS("#agent-state"))))
	assert.Equal(t, "working", textOf(t, p, "#agent-state"))
	assert.Contains(t, textOf(t, p, "#agent-rule-of-state"), "working: holds a claim or a lease")
	assert.Contains(t, textOf(t, p, "#agent-claims"), "Write the auth plan")
	assert.Contains(t, textOf(t, p, "#agent-leases"), s.lease.Resource)
	assert.Contains(t, textOf(t, p, "#agent-tokens"), "worker")
	assert.Contains(t, textOf(t, p, "#agent-summary"), "1 conflicts")
	assert.Contains(t, textOf(t, p, "#agent-events"), "expected version 2, current is 3: tighten the plan")

	// Live: planner writes through another handle; its page shows it.
	streamOpen(t, p)
	_, err = e.other().Notes().Put(ctx, workspace.Write{Actor: "planner"}, workspace.NotePut{Kind: "decision", Key: "live-from-planner", Title: "Decided while watched"})
	require.NoError(t, err)
	waitFor(t, p, `//tbody[@id="agent-events"]/tr[1][contains(., "live-from-planner")]`, 5*time.Second)
	screenshot(t, p, shots, "agent")

	// The timeline's lane of planner opens the same page.
	require.NoError(t, chromedp.Do(p,
		chromedp.Navigate(e.hs.URL+"/ui/timeline?span=15m"),
		chromedp.WaitVisible(chromedp.CSS("svg#timeline")),
		chromedp.Click(`//*[local-name()="g" and @class="lane"]/*[local-name()="a"][*[local-name()="text" and text()="planner"]]`),
		chromedp.WaitVisible(chromedp.CSS("#agent-state"))))
	assert.Equal(t, "planner", textOf(t, p, "#agent-name"))

	// Stop, confirmed (the page's confirm answers yes): the page follows
	// to gone.
	streamOpen(t, p)
	confirmed, err := chromedp.Run(p, chromedp.Evaluate[bool](`(() => { window.confirm = () => true; return true; })()`))
	require.NoError(t, err)
	require.True(t, confirmed)
	require.NoError(t, chromedp.Do(p, chromedp.Click(chromedp.CSS(`.agent-stop button`))))
	waitFor(t, p, `//div[@id="flash"][contains(., "stopped planner: 1 tokens revoked, 1 leases ended, 1 claims returned")]`, 5*time.Second)
	waitFor(t, p, `//span[@id="agent-state"][text()="gone"]`, 5*time.Second)
	_, err = e.ws.Locks().Get(ctx, s.lease.Resource)
	assert.ErrorIs(t, err, workspace.ErrNotFound)
}

package dashboard_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// browser starts headless chromium for t and returns a function that
// opens a tab with a deadline.
func browser(t *testing.T) func(t *testing.T) context.Context {
	t.Helper()
	path := chromium(t)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1500, 950),
	)
	t.Cleanup(cancelAlloc)
	b, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	require.NoError(t, chromedp.Do(b), "start chromium")
	return func(t *testing.T) context.Context {
		ctx, cancel := chromedp.NewContext(b)
		t.Cleanup(cancel)
		ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
		t.Cleanup(cancelT)
		return ctx
	}
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o600))
}

// waitFor waits up to within for an XPath to match.
func waitFor(t *testing.T, ctx context.Context, xpath string, within time.Duration) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	require.NoError(t, chromedp.Do(wctx, chromedp.WaitReady(xpath)), "waiting for %s", xpath)
}

// streamOpen waits until the page's event stream is open.
func streamOpen(t *testing.T, ctx context.Context) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const el = document.querySelector('[sse-connect]'); return !!(el && el['htmx-internal-data'] && el['htmx-internal-data'].sseEventSource && el['htmx-internal-data'].sseEventSource.readyState === 1); })()`, chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "the page's event stream did not open")
}

// TestTimelineAndChartsInABrowser runs the example team (examples/
// agentteam) in another process while the timeline is open, and watches
// the timeline draw its agents live; then it shows the team's session in
// a window around it, the charts, shadows and change sets, and a page
// of hostile names. With AGENTSPACE_TEST_SCREENSHOTS set the screenshots
// land there (docs/ keeps them).
func TestTimelineAndChartsInABrowser(t *testing.T) {
	tab := browser(t)
	shots := screenshotDir(t)
	e := newEnv(t, server.Options{})
	ctx := context.Background()

	t.Run("the timeline follows the example team run by another process", func(t *testing.T) {
		page := tab(t)
		require.NoError(t, chromedp.Do(page, chromedp.Navigate(e.hs.URL+"/ui/timeline?span=15m"), chromedp.WaitVisible(chromedp.CSS("svg#timeline"))))
		assert.Contains(t, textOf(t, page, "#timeline-summary"), "0 agents")
		streamOpen(t, page)

		// The example team, as its own process: go run ./examples/agentteam.
		cmd := exec.Command("go", "run", "../../examples/agentteam", "-dsn", e.dsn)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		// The planner only makes tasks: nothing of its is drawn, no lane.
		for _, lane := range []string{"worker-1", "worker-2", "reviewer"} {
			waitFor(t, page, `//*[local-name()="text" and @class="lane-name" and .="`+lane+`"]`, 10*time.Second)
		}
		waitFor(t, page, `//*[local-name()="rect" and @class="attempt done"]`, 10*time.Second)
		waitFor(t, page, `//*[local-name()="rect" and starts-with(@class, "hold ")]`, 10*time.Second)
	})

	// Two stale writes on the team's artifacts, so the picture has
	// conflicts to mark.
	p, err := e.ws.Artifacts().List(ctx, workspace.ArtifactFilter{Limit: 2})
	require.NoError(t, err)
	require.NotEmpty(t, p.Artifacts)
	for _, a := range p.Artifacts {
		_, err := e.ws.Artifacts().Update(ctx, workspace.Write{Actor: "late-editor", IfVersion: a.Version + 1, Message: "edited an old copy"},
			workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("stale\n")})
		require.ErrorIs(t, err, workspace.ErrConflict)
	}
	// The session's window: its first event to its last, and a margin.
	evs, err := e.ws.Events().Read(ctx, workspace.EventQuery{Limit: 10_000})
	require.NoError(t, err)
	require.NotEmpty(t, evs.Events)
	first, last := evs.Events[0].Time, evs.Events[len(evs.Events)-1].Time
	margin := max(last.Sub(first)/20, 10*time.Millisecond)
	from, to := first.Add(-margin), last.Add(margin)
	if to.Sub(from) < time.Second {
		to = from.Add(time.Second)
	}
	window := url.Values{"from": {from.UTC().Format(time.RFC3339Nano)}, "to": {to.UTC().Format(time.RFC3339Nano)}}.Encode()

	t.Run("the team's session, zoomed to fit", func(t *testing.T) {
		page := tab(t)
		require.NoError(t, chromedp.Do(page, chromedp.Navigate(e.hs.URL+"/ui/timeline?"+window), chromedp.WaitVisible(chromedp.CSS("svg#timeline"))))
		summary := textOf(t, page, "#timeline-summary")
		assert.Contains(t, summary, "4 agents", "the three workers and the late editor")
		assert.Contains(t, summary, "2 marks")
		n, err := chromedp.Run(page, chromedp.Evaluate[int](`document.querySelectorAll("svg#timeline rect.attempt.done").length`))
		require.NoError(t, err)
		assert.Equal(t, 4, n, "each of the team's four tasks is one attempt, done")
		screenshot(t, page, shots, "timeline")
		// A bar opens its task's events.
		require.NoError(t, chromedp.Do(page,
			chromedp.Click(`//*[local-name()="rect" and @class="attempt done"]`),
			chromedp.WaitVisible(chromedp.CSS("#events"))))
		loc, err := chromedp.Run(page, chromedp.Location())
		require.NoError(t, err)
		assert.Contains(t, loc, "/ui/feed?kind=task&subject=")
		assert.Contains(t, textOf(t, page, "#events"), "task.claimed")
	})

	t.Run("the charts of the session", func(t *testing.T) {
		page := tab(t)
		require.NoError(t, chromedp.Do(page, chromedp.Navigate(e.hs.URL+"/ui/charts?"+window), chromedp.WaitVisible(chromedp.CSS("#chart-depth svg"))))
		assert.Contains(t, textOf(t, page, "#charts-summary"), "4 done, 0 failed, 2 conflicts")
		assert.Contains(t, textOf(t, page, "#contention"), "late-editor ×1")
		screenshot(t, page, shots, "charts")
	})

	t.Run("shadows and change sets", func(t *testing.T) {
		set := changeSetsAndShadows(t, e.ws)
		page := tab(t)
		require.NoError(t, chromedp.Do(page, chromedp.Navigate(e.hs.URL+"/ui/changes?all=1"), chromedp.WaitVisible(chromedp.CSS("table.changesets"))))
		assert.Contains(t, textOf(t, page, "table.changesets"), set)
		assert.Contains(t, textOf(t, page, "table.shadows"), "worker-2")
		screenshot(t, page, shots, "changes")
		require.NoError(t, chromedp.Do(page,
			chromedp.Click(`//a[.="`+set+`"]`),
			chromedp.WaitVisible(chromedp.CSS("table.diff"))))
		ins, err := chromedp.Run(page, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.diff tr.ins td.text")].map(e => e.textContent)`))
		require.NoError(t, err)
		assert.Equal(t, []string{"step 1.5", "# FAQ"}, ins)
		screenshot(t, page, shots, "changeset")
	})

	t.Run("hostile names stay text", func(t *testing.T) {
		h := newEnv(t, server.Options{})
		evil := `ev"il<script>alert(1)</script>`
		tk, err := h.ws.Tasks().Create(ctx, workspace.Write{Actor: evil}, workspace.NewTask{Title: hostile})
		require.NoError(t, err)
		_, err = h.ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: evil, Lease: time.Minute})
		require.NoError(t, err)
		_, err = h.ws.Tasks().Complete(ctx, workspace.Write{Actor: evil}, tk.ID, workspace.TaskResult{Summary: hostile})
		require.NoError(t, err)
		a, err := h.ws.Artifacts().Create(ctx, workspace.Write{Actor: evil}, workspace.NewArtifact{Name: `x/"'><svg onload=alert(5)>.md`, Content: []byte("a\n")})
		require.NoError(t, err)
		_, err = h.ws.Artifacts().Update(ctx, workspace.Write{Actor: "bidi", IfVersion: a.Version + 1, Message: "\u202egnp.exe"}, workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("b\n")})
		require.ErrorIs(t, err, workspace.ErrConflict)

		page := tab(t)
		for _, path := range []string{"/ui/timeline?span=15m", "/ui/charts?span=15m"} {
			require.NoError(t, chromedp.Do(page, chromedp.Navigate(h.hs.URL+path), chromedp.WaitVisible(chromedp.CSS("nav.window"))))
			// Only our three scripts, no element the names could have made.
			scripts, err := chromedp.Run(page, chromedp.Evaluate[[]string](`[...document.scripts].map(s => s.getAttribute("src"))`))
			require.NoError(t, err)
			assert.Equal(t, []string{"/ui/static/htmx.min.js", "/ui/static/htmx-ext-sse.min.js", "/ui/static/dash.js"}, scripts, path)
			bad, err := chromedp.Run(page, chromedp.Evaluate[int](`document.querySelectorAll("img, iframe, [onload], [onerror], svg svg").length`))
			require.NoError(t, err)
			assert.Zero(t, bad, path)
		}
		require.NoError(t, chromedp.Do(page, chromedp.Navigate(h.hs.URL+"/ui/timeline?span=15m"), chromedp.WaitVisible(chromedp.CSS("svg#timeline"))))
		lanes, err := chromedp.Run(page, chromedp.Evaluate[[]string](`[...document.querySelectorAll("svg#timeline text.lane-name")].map(e => e.textContent)`))
		require.NoError(t, err)
		assert.Contains(t, lanes, `ev"il<script>alert(1)…`, "the name is drawn as text, clipped to the lanes' column")
		full, err := chromedp.Run(page, chromedp.Evaluate[[]string](`[...document.querySelectorAll("svg#timeline g.lane a > title")].map(e => e.textContent)`))
		require.NoError(t, err)
		assert.Contains(t, full, evil, "the whole name is the lane's tooltip")
		titles, err := chromedp.Run(page, chromedp.Evaluate[string](`[...document.querySelectorAll("svg#timeline title")].map(e => e.textContent).join("\n")`))
		require.NoError(t, err)
		assert.Contains(t, titles, "[U+202E]gnp.exe", "the bidi override is shown, not obeyed")
		assert.True(t, strings.Contains(titles, hostile), "the title is the text, escaped")
		screenshot(t, page, shots, "timeline-hostile")
	})
}

func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(t, err, sel)
	return s
}

package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/testskip"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// The browser test writes through a child process: this test binary,
// run again with these variables, makes one write and exits.
const (
	childDSN   = "AGENTSPACE_DASH_CHILD_DSN"
	childWrite = "AGENTSPACE_DASH_CHILD_WRITE" // task:TITLE or note:KEY
)

func TestMain(m *testing.M) {
	if dsn := os.Getenv(childDSN); dsn != "" {
		os.Exit(childMain(dsn, os.Getenv(childWrite)))
	}
	os.Exit(m.Run())
}

func childMain(dsn, what string) int {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, dsn, workspace.Options{MustExist: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer ws.Close()
	w := workspace.Write{Actor: "child-process", Message: "written by another process"}
	kind, arg, _ := strings.Cut(what, ":")
	switch kind {
	case "task":
		_, err = ws.Tasks().Create(ctx, w, workspace.NewTask{Title: arg, Priority: 7})
	case "note":
		_, err = ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "decision", Key: arg, Title: "Decided in another process"})
	default:
		err = fmt.Errorf("child: unknown write %q", what)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// writeFromAnotherProcess runs the child and returns when its write is
// committed.
func writeFromAnotherProcess(t *testing.T, dsn, what string) time.Time {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDSN+"="+dsn, childWrite+"="+what)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return time.Now()
}

// chromium finds Debian's chromium, or skips; with
// AGENTSPACE_TEST_REQUIRE_CHROMIUM=1 (set by .ci/run) a missing browser
// fails the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("AGENTSPACE_TEST_CHROMIUM"), "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testskip.Skip(t, "AGENTSPACE_TEST_REQUIRE_CHROMIUM", "SKIP: chromium is not installed: the browser test did not run (apt-get install chromium)")
	return ""
}

// screenshotDir is where the browser test saves its screenshots:
// AGENTSPACE_TEST_SCREENSHOTS, or the test's own temporary directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("AGENTSPACE_TEST_SCREENSHOTS"); d != "" {
		require.NoError(t, os.MkdirAll(d, 0o750))
		return d
	}
	return t.TempDir()
}

func TestDashboardInABrowser(t *testing.T) {
	path := chromium(t)
	e := newEnv(t, server.Options{})
	s := seed(t, e.ws)
	shots := screenshotDir(t)

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
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	require.NoError(t, chromedp.Do(browser), "start chromium")

	// tab opens a new tab of the one browser; each step has a deadline.
	tab := func(t *testing.T) context.Context {
		ctx, cancel := chromedp.NewContext(browser)
		t.Cleanup(cancel)
		ctx, cancelT := context.WithTimeout(ctx, 30*time.Second)
		t.Cleanup(cancelT)
		return ctx
	}
	shoot := func(t *testing.T, ctx context.Context, name string) {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(shots, name+".png"), png, 0o600))
	}
	text := func(t *testing.T, ctx context.Context, sel string) string {
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, sel)
		return s
	}
	// appears waits for an XPath to match, and says how long it took.
	appears := func(t *testing.T, ctx context.Context, xpath string, within time.Duration) time.Duration {
		start := time.Now()
		wctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		require.NoError(t, chromedp.Do(wctx, chromedp.WaitReady(xpath)), "waiting for %s", xpath)
		return time.Since(start)
	}
	// connected waits until the page's event stream is open.
	connected := func(t *testing.T, ctx context.Context) {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => { const el = document.querySelector('[sse-connect]'); return !!(el && el['htmx-internal-data'] && el['htmx-internal-data'].sseEventSource && el['htmx-internal-data'].sseEventSource.readyState === 1); })()`, chromedp.WithPollingTimeout(10*time.Second)))
		require.NoError(t, err, "the page's event stream did not open")
	}

	t.Run("board follows a write from another process", func(t *testing.T) {
		ctx := tab(t)
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(e.hs.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#col-ready"))))
		assert.Contains(t, text(t, ctx, "#col-ready"), "Update the changelog")
		assert.Contains(t, text(t, ctx, "#col-waiting"), "Build the login endpoint")
		assert.Contains(t, text(t, ctx, "#col-in_progress"), "planner")
		assert.Contains(t, text(t, ctx, "#col-failed"), "Flaky integration test")
		assert.Contains(t, text(t, ctx, "#col-done"), "Set up CI")
		connected(t, ctx)
		wrote := writeFromAnotherProcess(t, e.dsn, "task:Live task from another process")
		appears(t, ctx, `//section[@id="col-ready"]//article[contains(., "Live task from another process")]`, 5*time.Second)
		t.Logf("the board showed another process's task %v after its commit", time.Since(wrote).Round(time.Millisecond))
		left := text(t, ctx, `#col-in_progress time.countdown`)
		assert.Regexp(t, `^\d+m\d+s left$`, left, "the claim's lease counts down")
		shoot(t, ctx, "board")
	})

	t.Run("feed follows live", func(t *testing.T) {
		ctx := tab(t)
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(e.hs.URL+"/ui/feed"), chromedp.WaitVisible(chromedp.CSS("#events"))))
		feed := text(t, ctx, "#events")
		assert.Contains(t, feed, "Write the auth plan", "tasks by title, not id")
		assert.NotContains(t, feed, s.plan.ID)
		connected(t, ctx)
		wrote := writeFromAnotherProcess(t, e.dsn, "note:live-decision")
		appears(t, ctx, `//tbody[@id="events"]/tr[1][contains(., "live-decision") and contains(., "child-process")]`, 5*time.Second)
		t.Logf("the feed showed another process's note %v after its commit", time.Since(wrote).Round(time.Millisecond))
		shoot(t, ctx, "feed")
	})

	t.Run("every other view", func(t *testing.T) {
		ctx := tab(t)
		for _, c := range []struct{ path, sel, want, shot string }{
			{"/ui/locks", "table.locks", "file:src/auth.go", "locks"},
			{"/ui/artifacts?prefix=plans/", "table.files", "plans/auth.md", "artifacts"},
			{"/ui/artifact?name=plans/auth.md", "article.markdown h1", "Auth plan", "artifact"},
			{"/ui/notes", "div.notes", "Use JWT access tokens", "notes"},
			{"/ui/agents", "table.agents", "planner", "agents"},
		} {
			require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(e.hs.URL+c.path), chromedp.WaitVisible(chromedp.CSS(c.sel))), c.path)
			assert.Contains(t, text(t, ctx, c.sel), c.want, c.path)
			shoot(t, ctx, c.shot)
		}
	})

	t.Run("diff between two versions", func(t *testing.T) {
		ctx := tab(t)
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(e.hs.URL+"/ui/artifact?name=plans/auth.md"), chromedp.WaitVisible(chromedp.CSS(".versions"))))
		// Follow the history's diff link of v2 (v1 -> v2), then pick v1 -> v3.
		require.NoError(t, chromedp.Do(ctx,
			chromedp.Click(`//li[contains(@class,"version")][a[text()="v2"]]/a[text()="diff"]`),
			chromedp.WaitVisible(chromedp.CSS("#diff-summary"))))
		assert.Contains(t, text(t, ctx, "#diff-summary"), "v1 (planner) → v2 (planner)")
		require.NoError(t, chromedp.Do(ctx,
			chromedp.SetValue(chromedp.CSS(`select[name="b"]`), "3"),
			chromedp.Click(chromedp.CSS(`form.filters button`)),
			chromedp.WaitVisible(`//p[@id="diff-summary"][contains(., "v3")]`)))
		ins, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.diff tr.ins td.text")].map(e => e.textContent)`))
		require.NoError(t, err)
		del, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.diff tr.del td.text")].map(e => e.textContent)`))
		require.NoError(t, err)
		assert.Equal(t, []string{"- refresh tokens"}, ins)
		assert.Equal(t, []string{"- sessions"}, del)
		shoot(t, ctx, "diff")
	})

	t.Run("an operator action needs the admin token", func(t *testing.T) {
		ctx := tab(t)
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(e.hs.URL+"/ui/locks"), chromedp.WaitVisible(chromedp.CSS("table.locks"))))
		buttons, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("form[action='/ui/action/lock/release']").length`))
		require.NoError(t, err)
		assert.Zero(t, buttons, "no action buttons without the admin token")
		// A form posted by hand from the page is refused.
		status, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(
			`fetch("/ui/action/lock/release", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "resource=%s"}).then(r => r.status)`, s.lease.Resource),
			chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		assert.Equal(t, 403, status)
		_, err = e.ws.Locks().Get(context.Background(), s.lease.Resource)
		require.NoError(t, err, "the lock is still held")

		// Logged in with an admin token, the button releases it, and the
		// page shows it gone.
		admin := e.token("ops", "admin")
		require.NoError(t, chromedp.Do(ctx,
			chromedp.Navigate(e.hs.URL+"/ui/login"),
			chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), admin),
			chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
			chromedp.WaitVisible(chromedp.CSS("#col-ready")),
			chromedp.Navigate(e.hs.URL+"/ui/locks"),
			chromedp.WaitVisible(chromedp.CSS(`form[action="/ui/action/lock/release"] button`))))
		assert.Contains(t, text(t, ctx, "#who"), "ops (admin)")
		connected(t, ctx)
		require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`form[action="/ui/action/lock/release"] button`))))
		appears(t, ctx, `//div[@id="flash"][contains(., "released file:src/auth.go")]`, 5*time.Second)
		appears(t, ctx, `//p[@id="lock-count"][contains(., "0 live leases")]`, 5*time.Second)
		p, err := e.ws.Events().Read(context.Background(), workspace.EventQuery{Types: []string{workspace.EventLockForced}})
		require.NoError(t, err)
		require.Len(t, p.Events, 1)
		assert.Equal(t, "ops", p.Events[0].Actor)
	})
}

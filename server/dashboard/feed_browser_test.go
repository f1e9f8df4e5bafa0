package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// feedCells measures, in the page, each cell of the event tables' one-line
// columns: how many lines its text takes, and its text.
const feedCells = `[...document.querySelectorAll("table.feed td.seq, table.feed td.when, table.feed td.etype, table.feed td.v")].map(td => {
	const r = document.createRange();
	r.selectNodeContents(td);
	const tops = new Set([...r.getClientRects()].filter(b => b.width > 0).map(b => Math.round(b.top)));
	return {cls: td.className, text: td.textContent, lines: tops.size};
})`

type feedCell struct {
	Cls   string `json:"cls"`
	Text  string `json:"text"`
	Lines int    `json:"lines"`
}

// TestFeedColumnsKeepToOneLineAt1400px: at 1400 px, with three-digit
// seqs, long event types and messages of long unbroken words, the
// seq, time, type and version of each row stay on one line, and the
// message wraps in the room left.
func TestFeedColumnsKeepToOneLineAt1400px(t *testing.T) {
	tab := browser(t)
	e := newEnv(t, server.Options{})
	ctx := context.Background()
	long := strings.Repeat("validation-output-without-a-space-", 12)
	for i := range 120 {
		_, err := e.ws.Notes().Put(ctx, workspace.Write{Actor: "integration-runner-" + fmt.Sprint(i%3), Message: fmt.Sprintf("run %d: %s", i, long)},
			workspace.NotePut{Kind: "friction", Key: fmt.Sprintf("run-%03d-of-the-nightly-integration-suite", i), Title: "nightly"})
		require.NoError(t, err)
	}
	a, err := e.ws.Artifacts().Create(ctx, workspace.Write{Actor: "planner", Message: long}, workspace.NewArtifact{Name: "plans/a-rather-long-name/of-a-plan-in-a-folder.md", Content: []byte("v1")})
	require.NoError(t, err)
	_, err = e.ws.Artifacts().Update(ctx, workspace.Write{Actor: "planner", Message: long}, workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err)
	_, err = e.ws.Artifacts().Rollback(ctx, workspace.Write{Actor: "planner", Message: long}, workspace.ByID(a.ID), 1)
	require.NoError(t, err, "artifact.rolled_back: the longest event type")

	shots := screenshotDir(t)
	for _, path := range []string{"/ui/feed", "/ui/agent?actor=planner"} {
		page := tab(t)
		require.NoError(t, chromedp.Do(page,
			chromedp.EmulateViewport(1400, 900),
			chromedp.Navigate(e.hs.URL+path),
			chromedp.WaitVisible(chromedp.CSS("table.feed td.seq"))))
		cells, err := chromedp.Run(page, chromedp.Evaluate[[]feedCell](feedCells))
		require.NoError(t, err)
		require.NotEmpty(t, cells, path)
		digits := 0
		for _, c := range cells {
			assert.Equal(t, 1, c.Lines, "%s: %s cell %q takes %d lines", path, c.Cls, c.Text, c.Lines)
			if strings.Contains(c.Cls, "seq") {
				digits = max(digits, len(c.Text))
			}
		}
		if path == "/ui/feed" {
			assert.Equal(t, 3, digits, "three-digit seqs")
			// The message column wraps instead of pushing the page wider.
			wide, err := chromedp.Run(page, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= 1400`))
			require.NoError(t, err)
			assert.True(t, wide, "the feed fits 1400 px")
			screenshot(t, page, shots, "feed-long")
		}
	}
}

package dashboard

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

// TestAWindowPastTheBoundSaysSo: a window holding more events than one
// view reads (the bound lowered from 1,000,000 to one page of 10,000, over
// 12,000 real events) stops there: both pages say so, the timeline draws
// what it read (notes alone: no lane), and the charts leave out the queue
// depth, whose counts back from now would need every event.
func TestAWindowPastTheBoundSaysSo(t *testing.T) {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	for i := range 12 {
		ops := make([]workspace.Op, 1000)
		for j := range ops {
			ops[j] = workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("k%d-%d", i, j), Title: "bulk"}}
		}
		if _, err := ws.Commit(ctx, workspace.Batch{Actor: "bulk", Ops: ops}); err != nil {
			t.Fatal(err)
		}
	}
	h, err := New(ws, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	h.scan = 10_000
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v", path, resp.StatusCode, err)
		}
		return string(b)
	}
	const said = "This window holds more events than one view reads"
	charts := get("/ui/charts?span=1h")
	if !strings.Contains(charts, said) || !strings.Contains(charts, "left out: the window holds too many events") {
		t.Errorf("the charts do not say they stopped at the bound")
	}
	if !strings.Contains(charts, `id="charts-summary">10000 events`) {
		t.Errorf("the charts did not count the 10,000 events read")
	}
	timeline := get("/ui/timeline?span=1h")
	if !strings.Contains(timeline, said) || !strings.Contains(timeline, `id="timeline-summary">10000 events, 0 agents`) {
		t.Errorf("the timeline does not say it stopped at the bound, or did not draw what it read")
	}
	h.scan = maxScan
	if strings.Contains(get("/ui/charts?span=1h"), said) {
		t.Errorf("under the bound, the charts say they stopped")
	}
}

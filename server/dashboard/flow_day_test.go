package dashboard

import (
	"bytes"
	"context"
	"html/template"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestADayOfTenThousandEvents lays out the timeline and the charts of a
// synthetic day of 10,000 events (dayOfEvents: ten agents, about 1,600
// tasks) and renders both pages. With AGENTSPACE_TEST_SCREENSHOTS set and
// chromium installed it also screenshots them there, to look at whether
// the day reads at a glance (docs/dashboard-day-*.png).
func TestADayOfTenThousandEvents(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := window{From: start, To: start.Add(24 * time.Hour), Span: 24 * time.Hour}
	f := newFlow(w.From, w.To)
	evs, recs := dayOfEvents(10_000, start)
	for _, e := range evs {
		f.add(e)
	}
	f.settleBy(recs)
	f.finish()
	f.depthFrom(nil)
	tv, cv := timelineOf(w, f, false), chartsOf(w, f, false)
	if len(tv.Lanes) != 10 || len(tv.Bars) < 3000 || len(tv.Marks) < 240 || tv.Dropped != 0 {
		t.Fatalf("timeline: %d lanes, %d bars, %d marks, %d dropped", len(tv.Lanes), len(tv.Bars), len(tv.Marks), tv.Dropped)
	}
	if cv.Totals.Done < 1300 || cv.Totals.Conflicts < 190 || len(cv.Top) != 20 || len(cv.Depth.Lines) != 3 {
		t.Fatalf("charts: %+v, %d contended", cv.Totals, len(cv.Top))
	}

	tmpl, err := template.New("dashboard").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]string{}
	for name, v := range map[string]any{"timeline": tv, "charts": cv} {
		var body, page bytes.Buffer
		if err := tmpl.ExecuteTemplate(&body, name, viewData{Now: w.To, V: v}); err != nil {
			t.Fatal(err)
		}
		pd := pageData{Title: name, Nav: name, Body: template.HTML(body.String())} // #nosec G203 -- rendered by html/template
		if err := tmpl.ExecuteTemplate(&page, "layout", pd); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(page.String(), "<svg") {
			t.Fatalf("%s: no drawing", name)
		}
		pages[name] = page.String()
	}

	dir := os.Getenv("AGENTSPACE_TEST_SCREENSHOTS")
	path, _ := exec.LookPath("chromium")
	if dir == "" || path == "" {
		t.Log("no screenshots: AGENTSPACE_TEST_SCREENSHOTS or chromium missing")
		return
	}
	static, _ := fs.Sub(staticFS, "static")
	mux := http.NewServeMux()
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{name}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(pages[r.PathValue("name")]))
	})
	hs := httptest.NewServer(mux)
	defer hs.Close()
	actx, cancel := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1500, 950))
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for name := range pages {
		if err := chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/"+name), chromedp.WaitVisible(chromedp.CSS("svg"))); err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "day-"+name+".png"), png, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

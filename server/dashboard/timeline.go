package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// Window bounds.
const (
	defaultSpan = time.Hour
	minSpan     = 100 * time.Millisecond
	maxSpan     = 31 * 24 * time.Hour
)

// window is the stretch of time a timeline or chart page shows: from and
// to as RFC 3339 query parameters, or span (a Go duration) back from now.
// Without to the page follows the log live.
type window struct {
	From, To time.Time
	Span     time.Duration
	Live     bool
}

// parseWindow reads a page's window from its query. A query that names
// no window gets the last hour; or, when the log's
// first event (first; zero for an empty log) is less than an hour old,
// the stretch from a twentieth of it before that event to now, so that a
// short session fills the drawing.
func parseWindow(q url.Values, now, first time.Time) (window, error) {
	w := window{Span: defaultSpan, Live: q.Get("to") == ""}
	if !namesWindow(q) && !first.IsZero() && now.Sub(first) < defaultSpan {
		d := now.Sub(first)
		w.Span = max(d+d/20, minSpan)
	}
	if s := q.Get("span"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < minSpan || d > maxSpan {
			return w, invalid("span %q: want a duration from 100ms to 744h, like 15m or 6h", truncate(s, 32))
		}
		w.Span = d
	}
	w.To = now
	if s := q.Get("to"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return w, invalid("to %q: want a time like 2026-01-02T15:04:05Z", truncate(s, 40))
		}
		w.To = t
	}
	w.From = w.To.Add(-w.Span)
	if s := q.Get("from"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return w, invalid("from %q: want a time like 2026-01-02T15:04:05Z", truncate(s, 40))
		}
		w.From = t
	}
	w.Span = w.To.Sub(w.From)
	if w.Span < minSpan || w.Span > maxSpan {
		return w, invalid("the window from %s to %s: want from 100 milliseconds to 31 days", w.From.UTC().Format(time.RFC3339Nano), w.To.UTC().Format(time.RFC3339Nano))
	}
	w.From, w.To = w.From.UTC(), w.To.UTC()
	return w, nil
}

// namesWindow reports whether q chooses the window.
func namesWindow(q url.Values) bool {
	return q.Get("span") != "" || q.Get("from") != "" || q.Get("to") != ""
}

// firstEvent is the time of the log's oldest event kept, when a page's
// query names no window (the default window fits it); else, or for an
// empty log, zero.
func (h *Handler) firstEvent(ctx context.Context, q url.Values) (time.Time, error) {
	if namesWindow(q) {
		return time.Time{}, nil
	}
	st, err := h.ws.Status(ctx)
	if err != nil {
		return time.Time{}, err
	}
	p, err := h.ws.Events().Read(ctx, workspace.EventQuery{AfterSeq: max(st.Floor-1, 0), Limit: 1})
	if err != nil || len(p.Events) == 0 {
		return time.Time{}, err
	}
	return p.Events[0].Time, nil
}

// pageWindow is the window a timeline or charts page asks for.
func (h *Handler) pageWindow(ctx context.Context, r *http.Request) (window, error) {
	q := r.URL.Query()
	first, err := h.firstEvent(ctx, q)
	if err != nil {
		return window{}, err
	}
	return parseWindow(q, h.now(), first)
}

// layout is how the axes write a time of the window.
func (w window) layout() string {
	switch {
	case w.Span > 24*time.Hour:
		return "01-02 15:04"
	case w.Span < 10*time.Second:
		return "15:04:05.000"
	case w.Span < 10*time.Minute:
		return "15:04:05"
	}
	return "15:04"
}

// link is the page's URL for another window.
func (w window) link(path string, from, to time.Time) string {
	return path + "?" + encode("from", from.UTC().Format(time.RFC3339Nano), "to", to.UTC().Format(time.RFC3339Nano))
}

// windowNav are the zoom and pan links of a window.
type windowNav struct {
	Earlier, Later, In, Out, Now string
	Spans                        []spanLink
}

type spanLink struct {
	Label, URL string
	On         bool
}

func (w window) nav(path string) windowNav {
	half := w.Span / 2
	mid := w.From.Add(half)
	n := windowNav{
		Earlier: w.link(path, w.From.Add(-half), w.To.Add(-half)),
		In:      w.link(path, mid.Add(-max(half/2, minSpan/2)), mid.Add(max(half/2, minSpan/2))),
		Now:     path,
	}
	if !w.Live {
		n.Later = w.link(path, w.From.Add(half), w.To.Add(half))
	}
	if out := w.Span * 2; out <= maxSpan {
		if w.Live {
			n.Out = path + "?" + encode("span", out.String())
		} else {
			n.Out = w.link(path, mid.Add(-w.Span), mid.Add(w.Span))
		}
	}
	if w.Span/2 < minSpan {
		n.In = ""
	}
	for _, s := range []struct {
		label string
		d     time.Duration
	}{{"15m", 15 * time.Minute}, {"1h", time.Hour}, {"6h", 6 * time.Hour}, {"24h", 24 * time.Hour}, {"7d", 7 * 24 * time.Hour}} {
		n.Spans = append(n.Spans, spanLink{Label: s.label, URL: path + "?" + encode("span", s.d.String()), On: w.Live && w.Span == s.d})
	}
	return n
}

// readFlow reads the log once, from the window's start to the head, into
// a flow: at most h.scan (maxScan) events, in pages of the largest read the API
// allows.
func (h *Handler) readFlow(ctx context.Context, w window) (*flow, bool, error) {
	st, err := h.ws.Status(ctx)
	if err != nil {
		return nil, false, err
	}
	f := newFlow(w.From, w.To)
	q := workspace.EventQuery{Since: w.From, AfterSeq: max(st.Floor-1, 0), Limit: 10_000}
	scanned := 0
	for {
		p, err := h.ws.Events().Read(ctx, q)
		if err != nil {
			return nil, false, err
		}
		for _, e := range p.Events {
			f.add(e)
		}
		scanned += len(p.Events)
		if len(p.Events) < q.Limit || p.Next == 0 {
			break
		}
		if scanned >= h.scan {
			f.finish()
			return f, true, nil
		}
		q.AfterSeq = p.Next
	}
	if err := h.settleTasks(ctx, f); err != nil {
		return nil, false, err
	}
	f.finish()
	f.depthFrom(st.Tasks)
	return f, false, nil
}

// settleByGet is how many tasks settleTasks reads one by one; past it, it
// lists every task instead.
const settleByGet = 256

// settleTasks reads the record of each task whose last task.updated
// events the pass could not settle, and settles them by it.
func (h *Handler) settleTasks(ctx context.Context, f *flow) error {
	ids := f.unsettled()
	if len(ids) == 0 {
		return nil
	}
	recs := make(map[string]workspace.Task, len(ids))
	if len(ids) <= settleByGet {
		for _, id := range ids {
			t, err := h.ws.Tasks().Get(ctx, id)
			if errors.Is(err, workspace.ErrNotFound) {
				continue // removed since: its last moves stay unknown
			}
			if err != nil {
				return err
			}
			recs[id] = t
		}
	} else {
		want := make(map[string]bool, len(ids))
		for _, id := range ids {
			want[id] = true
		}
		q := workspace.TaskFilter{Limit: 1000}
		for {
			p, err := h.ws.Tasks().List(ctx, q)
			if err != nil {
				return err
			}
			for _, t := range p.Tasks {
				if want[t.ID] {
					recs[t.ID] = t
				}
			}
			if p.Next == "" {
				break
			}
			q.After = p.Next
		}
	}
	f.settleBy(recs)
	return nil
}

// The timeline's drawing, in SVG user units.
const (
	tlWidth = 1200.0
	tlLabel = 170.0 // the lane names' column
	tlLane  = 30.0
	tlAxis  = 26.0
	tlRight = 40.0 // room for the last tick's label
)

type timelineView struct {
	Window    window
	Nav       windowNav
	Truncated bool // the window holds more than maxScan events
	Events    int
	Height    float64
	Lanes     []svgLane
	Ticks     []svgTick
	Bars      []svgBar
	Marks     []svgMark
	Hidden    int // lanes not drawn
	Dropped   int // bars and marks not kept
	// Unread counts the escalations whose message the viewer may not
	// read: the engine does not say whose they were.
	Unread   int
	Outcomes []string
}

type svgLane struct {
	Name string // as drawn: at most laneChars characters
	Full string
	Y    float64
	URL  string
}

type svgTick struct {
	X     float64
	Label string
}

type svgBar struct {
	X, Y, W, H float64
	Class      string
	URL        string
	Title      string
}

type svgMark struct {
	X, Y  float64
	Class string
	URL   string
	Title string
}

func (h *Handler) loadTimeline(ctx context.Context, r *http.Request, _ Identity) (any, error) {
	w, err := h.pageWindow(ctx, r)
	if err != nil {
		return nil, err
	}
	f, truncated, err := h.readFlow(ctx, w)
	if err != nil {
		return nil, err
	}
	unread, err := h.escalationMarks(ctx, f)
	if err != nil {
		return nil, err
	}
	v := timelineOf(w, f, truncated)
	v.Unread = unread
	return v, nil
}

// timelineOf lays out the timeline of f.
func timelineOf(w window, f *flow, truncated bool) timelineView {
	v := timelineView{Window: w, Nav: w.nav("/ui/timeline"), Truncated: truncated, Events: f.Events,
		Dropped:  f.Dropped + f.DropMark,
		Outcomes: []string{outDone, outFailed, outReleased, outLapsed, outCancelled, outBlocked, outSetAside, outOpen}}
	names := make([]string, 0, len(f.lanes))
	for n := range f.lanes {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > maxLanes {
		v.Hidden = len(names) - maxLanes
		names = names[:maxLanes]
	}
	laneY := map[string]float64{}
	for i, n := range names {
		y := tlAxis + float64(i)*tlLane
		laneY[n] = y
		url := agentLink(n)
		if strings.HasPrefix(n, "role:") {
			url = "/ui/messages" // a role's ack, owed by any one of its members
		}
		v.Lanes = append(v.Lanes, svgLane{Name: clip(visible(n), laneChars), Full: visible(n), Y: y, URL: url})
	}
	v.Height = tlAxis + float64(max(len(names), 1))*tlLane + 4
	span := float64(w.Span)
	x := func(t time.Time) float64 {
		d := min(max(float64(t.Sub(w.From)), 0), span)
		return round1(tlLabel + d/span*(tlWidth-tlLabel-tlRight))
	}
	for i := 0; i <= 6; i++ {
		t := w.From.Add(time.Duration(float64(w.Span) * float64(i) / 6))
		v.Ticks = append(v.Ticks, svgTick{X: x(t), Label: t.Format(w.layout())})
	}
	for _, b := range f.bars {
		y, ok := laneY[b.Actor]
		if !ok {
			continue
		}
		x0, x1 := x(b.Start), x(b.End)
		sb := svgBar{X: x0, W: max(round1(x1-x0), 2)}
		d := span0(b.End.Sub(b.Start))
		if b.Lock {
			sb.Y, sb.H, sb.Class = y+21, 4, "hold "+b.Outcome
			sb.URL = subjectLink(workspace.Subject{Kind: workspace.SubjectLock, ID: b.ID, Name: b.Name})
			sb.Title = b.Actor + " held " + b.Name + " for " + d + ": " + b.Outcome
		} else {
			sb.Y, sb.H, sb.Class = y+5, 14, "attempt "+b.Outcome
			sb.URL = "/ui/feed?" + encode("kind", workspace.SubjectTask, "subject", b.Name)
			sb.Title = b.Actor + ": " + b.Name + " (" + d + "): " + b.Outcome
		}
		if b.Clipped {
			sb.Title += " (began before the window)"
		}
		sb.Title = visible(sb.Title)
		v.Bars = append(v.Bars, sb)
	}
	for _, m := range f.marks {
		y, ok := laneY[m.Actor]
		if !ok {
			continue
		}
		sm := svgMark{X: x(m.At), Y: y + 12, Class: m.Type, URL: m.URL, Title: visible(m.Title)}
		if sm.URL == "" {
			sm.URL = "/ui/feed?" + encode("type", m.Type, "actor", m.Actor)
		}
		if m.Title == "" {
			sm.Title = visible(m.Type + " by " + m.Actor + " on " + m.Subject + " at " + m.At.UTC().Format("15:04:05") + ": " + m.Message)
		}
		v.Marks = append(v.Marks, sm)
	}
	return v
}

// laneChars is how much of an agent's name fits the lanes' column.
const laneChars = 22

// clip shortens s to n characters, the last one an ellipsis.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

func span0(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
	return span(d)
}

// The charts' drawing.
const (
	chW = 1100.0
	chH = 160.0
	chL = 50.0 // the y axis labels' column
	chR = 40.0 // room for the last tick's label
)

type chartsView struct {
	Window     window
	Nav        windowNav
	Truncated  bool
	Events     int
	Depth      chart
	Throughput chart
	Collisions chart
	Holds      []holdRow
	HoldN      int
	Waits      []holdRow
	WaitN      int
	Waited     string // all waits added up
	Longest    string // the longest wait, and on what
	WaitChart  chart  // time spent waiting per interval
	Top        []contentionRow
	Other      int
	Totals     struct{ Done, Failed, Claimed, Conflicts, Denials int }
}

// chart is one SVG chart: polylines or bars over the window's buckets.
type chart struct {
	Max    int
	Lines  []chartLine
	Bars   []chartBar
	Ticks  []svgTick
	YTicks []svgTick
}

type chartLine struct {
	Class  string
	Label  string
	Points string
	Last   int
}

type chartBar struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

type holdRow struct {
	Label string
	N     int
	Pct   float64
}

type contentionRow struct {
	Subject                   string
	URL                       string
	Total, Conflicts, Denials int
	Forced, Waits             int
	By                        []string
}

func (h *Handler) loadCharts(ctx context.Context, r *http.Request, _ Identity) (any, error) {
	w, err := h.pageWindow(ctx, r)
	if err != nil {
		return nil, err
	}
	f, truncated, err := h.readFlow(ctx, w)
	if err != nil {
		return nil, err
	}
	return chartsOf(w, f, truncated), nil
}

// chartsOf lays out the charts of f.
func chartsOf(w window, f *flow, truncated bool) chartsView {
	v := chartsView{Window: w, Nav: w.nav("/ui/charts"), Truncated: truncated, Events: f.Events, HoldN: f.HoldN, Other: f.Other}
	ticks := func() []svgTick {
		var out []svgTick
		for i := 0; i <= 6; i++ {
			t := w.From.Add(time.Duration(float64(w.Span) * float64(i) / 6))
			out = append(out, svgTick{X: round1(chL + float64(i)/6*(chW-chL-chR)), Label: t.Format(w.layout())})
		}
		return out
	}
	bw := (chW - chL - chR) / flowBuckets
	bx := func(i int) float64 { return round1(chL + float64(i)*bw) }
	yOf := func(n, top int) float64 { return round1(chH - float64(n)/float64(max(top, 1))*(chH-10)) }
	yTicks := func(top int) []svgTick {
		return []svgTick{{X: yOf(0, top), Label: "0"}, {X: yOf(top, top), Label: itoa(top)}}
	}

	// Queue depth: a line per state, at each interval's end.
	if !truncated {
		top := 1
		for _, b := range f.Buckets {
			top = max(top, b.Ready, b.Running, b.Blocked)
		}
		for _, s := range []struct {
			class, label string
			get          func(bucket) int
		}{
			{"ready", "pending", func(b bucket) int { return b.Ready }},
			{"running", "in progress", func(b bucket) int { return b.Running }},
			{"blocked", "blocked", func(b bucket) int { return b.Blocked }},
		} {
			pts := make([]byte, 0, flowBuckets*16)
			for i, b := range f.Buckets {
				pts = strconv.AppendFloat(pts, bx(i+1), 'f', 1, 64)
				pts = append(pts, ',')
				pts = strconv.AppendFloat(pts, yOf(s.get(b), top), 'f', 1, 64)
				pts = append(pts, ' ')
			}
			v.Depth.Lines = append(v.Depth.Lines, chartLine{Class: s.class, Label: s.label, Points: string(pts), Last: s.get(f.Buckets[flowBuckets-1])})
		}
		v.Depth.Max, v.Depth.Ticks, v.Depth.YTicks = top, ticks(), yTicks(top)
	}

	// Throughput, collisions and lock waits: bars per interval, stacked.
	// A bar's title is its count, its label and its interval.
	type part = struct {
		class, label string
		get          func(bucket) int
	}
	stack := func(c *chart, parts []part) {
		top := 1
		for _, b := range f.Buckets {
			sum := 0
			for _, p := range parts {
				sum += p.get(b)
			}
			top = max(top, sum)
		}
		for i, b := range f.Buckets {
			base := 0
			for _, p := range parts {
				n := p.get(b)
				if n == 0 {
					continue
				}
				y1, y0 := yOf(base+n, top), yOf(base, top)
				c.Bars = append(c.Bars, chartBar{X: bx(i) + 1, Y: y1, W: round1(max(bw-2, 1)), H: round1(y0 - y1), Class: p.class,
					Title: itoa(n) + " " + p.label + " from " + w.From.Add(time.Duration(i)*f.step).Format("15:04:05") + " to " + w.From.Add(time.Duration(i+1)*f.step).Format("15:04:05")})
				base += n
			}
		}
		c.Max, c.Ticks, c.YTicks = top, ticks(), yTicks(top)
	}
	stack(&v.Throughput, []part{{"done", "done", func(b bucket) int { return b.Done }}, {"failed", "failed", func(b bucket) int { return b.Failed }}})
	stack(&v.Collisions, []part{{"conflict", "conflict", func(b bucket) int { return b.Conflicts }}, {"denied", "denied", func(b bucket) int { return b.Denials }}})
	stack(&v.WaitChart, []part{{"waited", "ms waited, by acquires that ended", func(b bucket) int { return int(b.Waited.Milliseconds()) }}})
	for _, b := range f.Buckets {
		v.Totals.Done += b.Done
		v.Totals.Failed += b.Failed
		v.Totals.Claimed += b.Claimed
		v.Totals.Conflicts += b.Conflicts
		v.Totals.Denials += b.Denials
	}

	hist := func(labels []string, counts []int, total int) []holdRow {
		var rows []holdRow
		for i, n := range counts {
			pct := 0.0
			if total > 0 {
				pct = round1(float64(n) / float64(total) * 100)
			}
			rows = append(rows, holdRow{Label: labels[i], N: n, Pct: pct})
		}
		return rows
	}
	v.Holds = hist([]string{"under 1s", "1–10s", "10s–1m", "1–5m", "5–30m", "30m–1h", "over 1h"}, f.holdHist[:], f.HoldN)
	v.Waits = hist([]string{"under 100ms", "100ms–1s", "1–10s", "10s–1m", "1–5m", "5–30m", "over 30m"}, f.waitHist[:], f.WaitN)
	v.WaitN, v.Waited = f.WaitN, f.Waited.Round(time.Millisecond).String()
	if f.WaitN > 0 {
		v.Longest = f.Longest.Round(time.Millisecond).String() + " on " + visible(f.LongestOn)
	}

	for _, c := range f.top(20) {
		row := contentionRow{Subject: visible(c.Subject), URL: c.Link, Total: c.total(), Conflicts: c.Conflicts, Denials: c.Denials, Forced: c.Forced, Waits: c.Waits}
		by := make([]string, 0, len(c.By))
		for a := range c.By {
			by = append(by, a)
		}
		sort.Slice(by, func(i, j int) bool {
			if c.By[by[i]] != c.By[by[j]] {
				return c.By[by[i]] > c.By[by[j]]
			}
			return by[i] < by[j]
		})
		for _, a := range by[:min(len(by), 5)] {
			row.By = append(row.By, visible(a)+" ×"+itoa(c.By[a]))
		}
		if len(by) > 5 {
			row.By = append(row.By, "+"+itoa(len(by)-5)+" more")
		}
		v.Top = append(v.Top, row)
	}
	return v
}

// liveWindow follows the log while the window ends now (no "to").
func liveWindow(q url.Values) string {
	if q.Get("to") != "" {
		return ""
	}
	return streamEvents
}

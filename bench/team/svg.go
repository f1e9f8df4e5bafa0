package team

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Hand-written SVG: three charts of a run, small enough to commit.

// opColor is each op's colour in every chart.
var opColor = map[string]string{
	OpClaim: "#1f77b4", "done": "#6baed6", "add": "#9ecae1", OpPut: "#2ca02c", OpHot: "#ff7f0e",
	OpLock: "#9467bd", "fenced": "#c5b0d5", "unlock": "#8c6d31", "inbox": "#bcbd22", "ack": "#17becf", OpMsg: "#e377c2", OpNote: "#7f7f7f",
}

const (
	svgW      = 900
	svgLeft   = 70
	svgRight  = 150
	svgTop    = 30
	plotWidth = svgW - svgLeft - svgRight
)

type svgDoc struct{ strings.Builder }

func newSVG(h int, title string) *svgDoc {
	d := &svgDoc{}
	fmt.Fprintf(d, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", svgW, h, svgW, h)
	fmt.Fprintf(d, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, h)
	fmt.Fprintf(d, `<text x="%d" y="18" font-size="13" font-weight="bold">%s</text>`+"\n", svgLeft, html.EscapeString(title))
	return d
}

func (d *svgDoc) end() string {
	_, _ = d.WriteString("</svg>\n") // a strings.Builder's writes never fail
	return d.String()
}

func (d *svgDoc) text(x, y float64, anchor, s string) {
	fmt.Fprintf(d, `<text x="%.1f" y="%.1f" text-anchor="%s">%s</text>`+"\n", x, y, anchor, html.EscapeString(s))
}

func (d *svgDoc) legend(ops []string, y0 float64) {
	for i, op := range ops {
		y := y0 + float64(i)*15
		fmt.Fprintf(d, `<rect x="%d" y="%.1f" width="10" height="10" fill="%s"/>`+"\n", svgW-svgRight+15, y, opColor[op])
		d.text(float64(svgW-svgRight+30), y+9, "start", op)
	}
}

// timeAxis draws the x axis (seconds) under a plot of height h at top.
func (d *svgDoc) timeAxis(wall float64, top, h float64) {
	y := top + h
	fmt.Fprintf(d, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black"/>`+"\n", svgLeft, y, svgLeft+plotWidth, y)
	step := niceStep(wall / 8)
	for t := 0.0; t <= wall+1e-9; t += step {
		x := svgLeft + t/wall*plotWidth
		fmt.Fprintf(d, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x, y, x, y+4)
		d.text(x, y+16, "middle", fmt.Sprintf("%gs", t))
	}
}

// marks draws the run's marks as red vertical lines over a plot.
func (d *svgDoc) marks(rep *Report, wall, top, h float64) {
	for i, m := range rep.Marks {
		t := m.At.Sub(rep.Start).Seconds()
		x := svgLeft + t/wall*plotWidth
		fmt.Fprintf(d, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="red" stroke-width="1.5" stroke-dasharray="4 2"/>`+"\n", x, top, x, top+h)
		d.text(x+3, top+12+float64(i%3)*12, "start", m.What)
	}
}

func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func (rep *Report) presentOps() []string {
	var out []string
	for _, o := range rep.Ops {
		if o.OK > 0 {
			out = append(out, o.Op)
		}
	}
	return out
}

// maxLanes is how many agents' lanes the timeline draws.
const maxLanes = 50

// timelineSVG draws a lane per agent (up to maxLanes): each stretch of the
// lane coloured by the op the agent did most in it, red where an attempt
// met an unavailable store, an unknown outcome or an error.
func timelineSVG(rep *Report, r *run) string {
	const bins = 80
	lanes := min(rep.Agents, maxLanes)
	laneH := math.Max(2, math.Min(12, 400/float64(lanes)))
	laneH = math.Max(laneH, 190/float64(max(lanes, 1))) // room for the legend
	plotH := laneH * float64(lanes)
	shown := fmt.Sprintf("%d agents", rep.Agents)
	if rep.Agents > maxLanes {
		shown = fmt.Sprintf("%d of %d agents", maxLanes, rep.Agents)
	}
	d := newSVG(int(plotH)+svgTop+50, "Timeline, a lane per agent ("+shown+"): its most frequent op; red: unavailable, unknown or failed")
	wall := math.Max(rep.WallSeconds, 1e-3)
	counts := make([][]map[string]int, lanes)
	bad := make([][]bool, lanes)
	for i := range counts {
		counts[i] = make([]map[string]int, bins)
		bad[i] = make([]bool, bins)
	}
	r.mu.Lock()
	start := r.start.UnixNano()
	for _, rec := range r.recs {
		if rec.Agent >= lanes {
			continue
		}
		b := min(bins-1, max(0, int(float64(rec.Start-start)/1e9/wall*bins)))
		if rec.Err != "" && !expected(rec.Err) {
			bad[rec.Agent][b] = true
			continue
		}
		if counts[rec.Agent][b] == nil {
			counts[rec.Agent][b] = map[string]int{}
		}
		counts[rec.Agent][b][rec.Op]++
	}
	r.mu.Unlock()
	// One path per colour, a rectangle per run of a lane's stretches.
	bw := float64(plotWidth) / bins
	paths := map[string]*strings.Builder{}
	var colours []string
	for a := range lanes {
		y := svgTop + float64(a)*laneH
		runStart, runColor := 0, ""
		flush := func(end int) {
			if runColor == "" {
				return
			}
			p := paths[runColor]
			if p == nil {
				p = &strings.Builder{}
				paths[runColor] = p
				colours = append(colours, runColor)
			}
			w := float64(end-runStart) * bw
			fmt.Fprintf(p, "M%.1f %.1fh%.1fv%.1fh%.1fz", svgLeft+float64(runStart)*bw, y, w, math.Max(1, laneH-0.5), -w)
		}
		for b := range bins {
			c := ""
			if bad[a][b] {
				c = "red"
			} else if m := counts[a][b]; len(m) > 0 {
				best, bn := "", -1
				for _, op := range opOrder {
					if m[op] > bn {
						best, bn = op, m[op]
					}
				}
				c = opColor[best]
			}
			if c != runColor {
				flush(b)
				runStart, runColor = b, c
			}
		}
		flush(bins)
	}
	for _, c := range colours {
		fmt.Fprintf(d, `<path fill="%s" d="%s"/>`+"\n", c, paths[c].String())
	}
	if lanes > 0 {
		d.text(svgLeft-5, svgTop+laneH, "end", "agent 0")
		d.text(svgLeft-5, svgTop+plotH, "end", fmt.Sprintf("agent %d", lanes-1))
	}
	d.timeAxis(wall, svgTop, plotH)
	d.marks(rep, wall, svgTop, plotH)
	d.legend(opOrder, svgTop)
	return d.end()
}

// line draws a polyline of (t, v) points.
func (d *svgDoc) line(pts [][2]float64, color string, dashed bool) {
	if len(pts) == 0 {
		return
	}
	var b strings.Builder
	for _, p := range pts {
		fmt.Fprintf(&b, "%.1f,%.1f ", p[0], p[1])
	}
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="4 3"`
	}
	fmt.Fprintf(d, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"%s/>`+"\n", strings.TrimSpace(b.String()), color, dash)
}

// latencySVG draws each op's p50 (dashed) and p99 per bucket, log scale.
func latencySVG(rep *Report) string {
	const plotH = 320.0
	d := newSVG(int(plotH)+svgTop+50, "Latency per op over time: p99 solid, p50 dashed (log scale)")
	wall := math.Max(rep.WallSeconds, 1e-3)
	lo, hi := math.Inf(1), 0.0
	for _, b := range rep.Buckets {
		for _, o := range b.Ops {
			if o.P50us > 0 {
				lo = math.Min(lo, o.P50us)
			}
			hi = math.Max(hi, o.P99us)
		}
	}
	if hi <= 0 {
		return d.end()
	}
	lo = math.Pow(10, math.Floor(math.Log10(math.Max(lo, 1))))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	y := func(us float64) float64 {
		us = math.Max(us, lo)
		return svgTop + plotH - (math.Log10(us)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*plotH
	}
	for v := lo; v <= hi*1.001; v *= 10 {
		fmt.Fprintf(d, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", svgLeft, y(v), svgLeft+plotWidth, y(v))
		d.text(svgLeft-5, y(v)+4, "end", dur(v))
	}
	ops := rep.presentOps()
	for _, op := range ops {
		var p50, p99 [][2]float64
		for _, b := range rep.Buckets {
			o, ok := b.Ops[op]
			if !ok {
				continue
			}
			x := svgLeft + (b.T+rep.BucketSeconds/2)/wall*plotWidth
			x = math.Min(x, svgLeft+plotWidth)
			p50 = append(p50, [2]float64{x, y(o.P50us)})
			p99 = append(p99, [2]float64{x, y(o.P99us)})
		}
		d.line(p99, opColor[op], false)
		d.line(p50, opColor[op], true)
	}
	d.timeAxis(wall, svgTop, plotH)
	d.marks(rep, wall, svgTop, plotH)
	d.legend(ops, svgTop)
	return d.end()
}

// rateSVG draws acknowledged ops per second per op and in all, and the
// machine's CPU busy percentage (grey, right axis).
func rateSVG(rep *Report) string {
	const plotH = 320.0
	d := newSVG(int(plotH)+svgTop+50, "Acknowledged ops/s per op and in all (black); machine CPU busy % (grey, 0-100 right)")
	wall := math.Max(rep.WallSeconds, 1e-3)
	width := math.Max(rep.BucketSeconds, 1e-3)
	total := make([]float64, len(rep.Buckets))
	hi := 0.0
	for i, b := range rep.Buckets {
		w := math.Min(width, wall-b.T)
		if w <= 0 {
			continue
		}
		for _, o := range b.Ops {
			total[i] += float64(o.N) / w
		}
		hi = math.Max(hi, total[i])
	}
	if hi <= 0 {
		return d.end()
	}
	hi = niceStep(hi/5) * 5
	y := func(v float64) float64 { return svgTop + plotH - v/hi*plotH }
	for v := 0.0; v <= hi*1.001; v += hi / 5 {
		fmt.Fprintf(d, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", svgLeft, y(v), svgLeft+plotWidth, y(v))
		d.text(svgLeft-5, y(v)+4, "end", fmt.Sprintf("%.0f", v))
	}
	x := func(b Bucket) float64 { return math.Min(svgLeft+(b.T+width/2)/wall*plotWidth, svgLeft+plotWidth) }
	ops := rep.presentOps()
	for _, op := range ops {
		var pts [][2]float64
		for _, b := range rep.Buckets {
			w := math.Min(width, wall-b.T)
			if w <= 0 {
				continue
			}
			pts = append(pts, [2]float64{x(b), y(float64(b.Ops[op].N) / w)})
		}
		d.line(pts, opColor[op], false)
	}
	var tot, cpu [][2]float64
	for i, b := range rep.Buckets {
		if math.Min(width, wall-b.T) <= 0 {
			continue
		}
		tot = append(tot, [2]float64{x(b), y(total[i])})
		if b.BusyPct > 0 {
			cpu = append(cpu, [2]float64{x(b), svgTop + plotH - b.BusyPct/100*plotH})
		}
	}
	d.line(tot, "black", false)
	d.line(cpu, "#999", true)
	d.text(svgLeft+plotWidth+5, svgTop+8, "start", "100%")
	d.timeAxis(wall, svgTop, plotH)
	d.marks(rep, wall, svgTop, plotH)
	d.legend(ops, svgTop+20)
	return d.end()
}

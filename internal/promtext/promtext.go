// Package promtext keeps a server's counters, gauges and histograms and
// writes them in Prometheus's text exposition format (version 0.0.4), the
// format every Prometheus-compatible scraper reads.
//
// It exists so that a wsctl process that never serves pays nothing for
// metrics: the Prometheus client library registers a Go and a process
// collector and compiles its descriptors in its package initialiser, about
// a millisecond and a half of every command's start. The output is the
// client library's for the same series (families by name, series by label
// values, label pairs by name, a histogram's le last, floats as the
// shortest 'g' form), which promtext_test.go checks byte for byte.
//
// Counting allocates nothing once a series exists: a counter and a
// histogram's buckets are atomics.
package promtext

import (
	"bufio"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// ContentType is the media type of the text exposition format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Registry holds metric families and writes them.
type Registry struct {
	mu   sync.Mutex
	fams map[string]family
}

// out writes through a bufio.Writer, whose first write error sticks and
// is returned by its Flush (WriteTo's): the writes need not look at
// theirs.
type out struct{ w *bufio.Writer }

func (o out) byte(c byte)  { _ = o.w.WriteByte(c) }
func (o out) str(s string) { _, _ = o.w.WriteString(s) }

// family is one metric name's HELP, TYPE and series.
type family interface {
	write(w out, name string)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{fams: map[string]family{}} }

func (r *Registry) add(name string, f family) {
	if !validName(name) {
		panic("promtext: invalid metric name " + strconv.Quote(name))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.fams[name]; dup {
		panic("promtext: metric " + name + " registered twice")
	}
	r.fams[name] = f
}

// validName is Prometheus's metric and label name rule.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}

// Counter is a value that only goes up, by whole steps.
type Counter struct{ n atomic.Uint64 }

// Inc adds one.
func (c *Counter) Inc() { c.n.Add(1) }

// Value is the count so far.
func (c *Counter) Value() uint64 { return c.n.Load() }

// Gauge is a whole value that goes up and down.
type Gauge struct{ n atomic.Int64 }

// Inc adds one.
func (g *Gauge) Inc() { g.n.Add(1) }

// Dec takes one away.
func (g *Gauge) Dec() { g.n.Add(-1) }

// Value is the gauge's value now.
func (g *Gauge) Value() int64 { return g.n.Load() }

// Histogram counts observations into buckets by upper bound, and keeps
// their count and sum.
//
// Invariant: counts[i] counts the observations in (bounds[i-1], bounds[i]],
// the last element those above every bound; the written buckets are their
// running sums, so each is at least the one before and the +Inf bucket is
// the count. The sum is read apart from the counts: a scrape that races
// an observation may see it in one and not yet in the other, as with the
// client library.
type Histogram struct {
	bounds []float64
	counts []atomic.Uint64
	sum    atomic.Uint64 // float64 bits
}

// Observe counts v.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v) // the first bound >= v
	h.counts[i].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// vec is a family's series by label values.
type vec[T any] struct {
	mu     sync.RWMutex
	labels []string
	series map[string]*series[T]
	make   func() *T
}

type series[T any] struct {
	values []string
	m      *T
}

func newVec[T any](labels []string, mk func() *T) *vec[T] {
	for _, l := range labels {
		if !validName(l) || l == "le" || strings.HasPrefix(l, "__") {
			panic("promtext: invalid label name " + strconv.Quote(l))
		}
	}
	return &vec[T]{labels: labels, series: map[string]*series[T]{}, make: mk}
}

// with returns the series of values, made on first use.
func (v *vec[T]) with(values []string) *T {
	if len(values) != len(v.labels) {
		panic("promtext: " + strconv.Itoa(len(values)) + " label values for " + strconv.Itoa(len(v.labels)) + " labels")
	}
	key := strings.Join(values, "\xff")
	v.mu.RLock()
	s, ok := v.series[key]
	v.mu.RUnlock()
	if ok {
		return s.m
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.series[key]; ok {
		return s.m
	}
	s = &series[T]{values: slices.Clone(values), m: v.make()}
	v.series[key] = s
	return s.m
}

// sorted returns the series with their label pairs in name order, sorted
// as the client library sorts them: by those pairs' values in turn.
func (v *vec[T]) sorted() (order []int, rows []*series[T]) {
	order = make([]int, len(v.labels))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return v.labels[order[a]] < v.labels[order[b]] })
	v.mu.RLock()
	rows = make([]*series[T], 0, len(v.series))
	for _, s := range v.series {
		rows = append(rows, s)
	}
	v.mu.RUnlock()
	sort.Slice(rows, func(a, b int) bool {
		for _, i := range order {
			if x, y := rows[a].values[i], rows[b].values[i]; x != y {
				return x < y
			}
		}
		return false
	})
	return order, rows
}

// writeLabels writes {name="value",...} for a series, with extra (the le
// of a bucket) last; nothing when there are no labels at all.
func writeLabels(w out, labels []string, order []int, values []string, extra string) {
	if len(order) == 0 && extra == "" {
		return
	}
	w.byte('{')
	for n, i := range order {
		if n > 0 {
			w.byte(',')
		}
		w.str(labels[i])
		w.str(`="`)
		writeEscaped(w, values[i], true)
		w.byte('"')
	}
	if extra != "" {
		if len(order) > 0 {
			w.byte(',')
		}
		w.str(`le="`)
		w.str(extra)
		w.byte('"')
	}
	w.byte('}')
}

// writeEscaped escapes a backslash and a newline, and in a label value a
// double quote too.
func writeEscaped(w out, s string, quote bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			w.str(`\\`)
		case c == '\n':
			w.str(`\n`)
		case c == '"' && quote:
			w.str(`\"`)
		default:
			w.byte(c)
		}
	}
}

// formatFloat is the exposition format's number: the shortest 'g' form,
// or +Inf, -Inf, NaN.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func writeHeader(w out, name, help, typ string) {
	w.str("# HELP ")
	w.str(name)
	w.byte(' ')
	writeEscaped(w, help, false)
	w.str("\n# TYPE ")
	w.str(name)
	w.byte(' ')
	w.str(typ)
	w.byte('\n')
}

func writeSample(w out, name, suffix string, labels []string, order []int, values []string, le string, v float64) {
	w.str(name)
	w.str(suffix)
	writeLabels(w, labels, order, values, le)
	w.byte(' ')
	w.str(formatFloat(v))
	w.byte('\n')
}

// CounterVec is a counter family by label values.
type CounterVec struct {
	help string
	v    *vec[Counter]
}

// NewCounterVec registers a counter family with the named labels.
func (r *Registry) NewCounterVec(name, help string, labels ...string) *CounterVec {
	c := &CounterVec{help: help, v: newVec(labels, func() *Counter { return new(Counter) })}
	r.add(name, c)
	return c
}

// WithLabelValues returns the counter of these label values, in the
// order the labels were named.
func (c *CounterVec) WithLabelValues(values ...string) *Counter { return c.v.with(values) }

func (c *CounterVec) write(w out, name string) {
	order, rows := c.v.sorted()
	if len(rows) == 0 {
		return // as the client library: a vector with no series is not written
	}
	writeHeader(w, name, c.help, "counter")
	for _, s := range rows {
		writeSample(w, name, "", c.v.labels, order, s.values, "", float64(s.m.Value()))
	}
}

// NewCounter registers a counter without labels.
func (r *Registry) NewCounter(name, help string) *Counter {
	c := new(Counter)
	r.add(name, scalar{help: help, typ: "counter", value: func() float64 { return float64(c.Value()) }})
	return c
}

// NewGauge registers a gauge without labels.
func (r *Registry) NewGauge(name, help string) *Gauge {
	g := new(Gauge)
	r.add(name, scalar{help: help, typ: "gauge", value: func() float64 { return float64(g.Value()) }})
	return g
}

// NewCounterFunc registers a counter whose value f gives at each scrape;
// f must never go down.
func (r *Registry) NewCounterFunc(name, help string, f func() float64) {
	r.add(name, scalar{help: help, typ: "counter", value: f})
}

// scalar is a family of one series without labels.
type scalar struct {
	help, typ string
	value     func() float64
}

func (s scalar) write(w out, name string) {
	writeHeader(w, name, s.help, s.typ)
	writeSample(w, name, "", nil, nil, nil, "", s.value())
}

// HistogramVec is a histogram family by label values.
type HistogramVec struct {
	help   string
	bounds []float64
	les    []string
	v      *vec[Histogram]
}

// NewHistogramVec registers a histogram family with the given bucket
// upper bounds (increasing; +Inf is implied) and the named labels.
func (r *Registry) NewHistogramVec(name, help string, buckets []float64, labels ...string) *HistogramVec {
	bounds := slices.Clone(buckets)
	if !slices.IsSorted(bounds) || slices.Contains(bounds, math.Inf(1)) || len(slices.Compact(slices.Clone(bounds))) != len(bounds) {
		panic("promtext: histogram " + name + "'s buckets must increase and leave +Inf implied")
	}
	les := make([]string, len(bounds)+1)
	for i, b := range bounds {
		les[i] = formatFloat(b)
	}
	les[len(bounds)] = "+Inf"
	h := &HistogramVec{help: help, bounds: bounds, les: les}
	h.v = newVec(labels, func() *Histogram {
		return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
	})
	r.add(name, h)
	return h
}

// WithLabelValues returns the histogram of these label values, in the
// order the labels were named.
func (h *HistogramVec) WithLabelValues(values ...string) *Histogram { return h.v.with(values) }

func (h *HistogramVec) write(w out, name string) {
	order, rows := h.v.sorted()
	if len(rows) == 0 {
		return
	}
	writeHeader(w, name, h.help, "histogram")
	for _, s := range rows {
		var cum uint64
		for i := range s.m.counts {
			cum += s.m.counts[i].Load()
			writeSample(w, name, "_bucket", h.v.labels, order, s.values, h.les[i], float64(cum))
		}
		writeSample(w, name, "_sum", h.v.labels, order, s.values, "", math.Float64frombits(s.m.sum.Load()))
		writeSample(w, name, "_count", h.v.labels, order, s.values, "", float64(cum))
	}
}

// WriteTo writes every family, by name, in the text exposition format.
func (r *Registry) WriteTo(dst io.Writer) (int64, error) {
	r.mu.Lock()
	names := make([]string, 0, len(r.fams))
	for n := range r.fams {
		names = append(names, n)
	}
	fams := make([]family, len(names))
	sort.Strings(names)
	for i, n := range names {
		fams[i] = r.fams[n]
	}
	r.mu.Unlock()
	cw := &countWriter{w: dst}
	bw := bufio.NewWriter(cw)
	w := out{bw}
	for i, f := range fams {
		f.write(w, names[i])
	}
	err := bw.Flush()
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Handler serves the registry to a scraper.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", ContentType)
		_, _ = r.WriteTo(w) // a write error is the scraper gone
	})
}

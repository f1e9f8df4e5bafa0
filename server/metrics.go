package server

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/agentspace/agentspace/internal/promtext"
	"github.com/agentspace/agentspace/workspace"
)

// metrics are the server's Prometheus series, on a registry of its own,
// so that two servers in one process (tests, or one per workspace) never
// collide. They are written by internal/promtext rather than the
// Prometheus client library, whose initialiser every wsctl command paid
// at start (about 1.5 ms of a 10 ms call) whether it served or not.
type metrics struct {
	requests *promtext.CounterVec
	latency  *promtext.HistogramVec
	streams  *promtext.Gauge
	events   *promtext.Counter
	writes   *promtext.CounterVec
	reg      *promtext.Registry
	// series holds each route's and status's series once looked up, so
	// a request's accounting hashes no labels and allocates nothing.
	series sync.Map // routeCode -> *routeSeries
}

// routeCode keys the series of one route answered with one status;
// write is whether the answer counts as a committed write.
type routeCode struct {
	route string
	code  int
	write bool
}

// routeSeries are the series a request of one route and status moves.
// Invariant: they are the vectors' own children for those labels (the
// vectors are never reset), so counting through them is counting through
// WithLabelValues.
type routeSeries struct {
	requests *promtext.Counter
	latency  *promtext.Histogram // nil for the event stream
	writes   *promtext.Counter   // nil unless the answer is a committed write
}

// forRoute returns the series of route answered with code (a committed
// write when write).
func (m *metrics) forRoute(route string, code int, write bool) *routeSeries {
	k := routeCode{route, code, write}
	if v, ok := m.series.Load(k); ok {
		return v.(*routeSeries)
	}
	rs := &routeSeries{requests: m.requests.WithLabelValues(route, strconv.Itoa(code))}
	if write {
		rs.writes = m.writes.WithLabelValues(route)
	}
	if route != eventsRoute {
		rs.latency = m.latency.WithLabelValues(route)
	}
	v, _ := m.series.LoadOrStore(k, rs)
	return v.(*routeSeries)
}

// newMetrics registers the server's series, and the group commit's
// counters of ws's store when it is open in this process.
func newMetrics(ws *workspace.Workspace) *metrics {
	reg := promtext.NewRegistry()
	m := &metrics{
		requests: reg.NewCounterVec("agentspace_http_requests_total",
			"HTTP requests answered, by route pattern and status code.", "route", "code"),
		latency: reg.NewHistogramVec("agentspace_http_request_duration_seconds",
			"Time to answer an HTTP request, by route pattern (event streams are left out).",
			[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}, "route"),
		streams: reg.NewGauge("agentspace_http_open_streams", "Event streams (SSE) open now."),
		events:  reg.NewCounter("agentspace_http_streamed_events_total", "Events sent to SSE subscribers."),
		writes:  reg.NewCounterVec("agentspace_http_commits_total", "Writes committed through the API, by route pattern.", "route"),
		reg:     reg,
	}
	if _, ok := ws.CommitStats(); ok {
		stat := func(f func(workspace.CommitStats) float64) func() float64 {
			return func() float64 {
				s, _ := ws.CommitStats()
				return f(s)
			}
		}
		reg.NewCounterFunc("agentspace_store_groups_total",
			"Groups of writes the store's committer ran, each sharing one commit.",
			stat(func(s workspace.CommitStats) float64 { return float64(s.Groups) }))
		reg.NewCounterFunc("agentspace_store_group_writes_total",
			"Writes the groups carried (a batch is one): over groups_total, the writes per commit.",
			stat(func(s workspace.CommitStats) float64 { return float64(s.Writes) }))
		reg.NewCounterFunc("agentspace_store_group_running_seconds_total",
			"Time the groups' transactions took, commits included. With gathering, the rate near 1 means the one committer is the bound.",
			stat(func(s workspace.CommitStats) float64 { return s.Running.Seconds() }))
		reg.NewCounterFunc("agentspace_store_group_gathering_seconds_total",
			"Time spent gathering groups: from a group's first write to its transaction's start.",
			stat(func(s workspace.CommitStats) float64 { return s.Gathering.Seconds() }))
	}
	return m
}

func (m *metrics) handler() http.Handler { return m.reg.Handler() }

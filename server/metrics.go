package server

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentspace/agentspace/workspace"
)

// metrics are the server's Prometheus series, on a registry of its own
// unless Options gave one, so that two servers in one process (tests, or
// one per workspace) never collide.
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	streams  prometheus.Gauge
	events   prometheus.Counter
	writes   *prometheus.CounterVec
	gatherer prometheus.Gatherer
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
	requests prometheus.Counter
	latency  prometheus.Observer // nil for the event stream
	writes   prometheus.Counter  // nil unless the answer is a committed write
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

// newMetrics registers the server's series on reg, and the group
// commit's counters of ws's store when it is open in this process.
func newMetrics(reg prometheus.Registerer, g prometheus.Gatherer, ws *workspace.Workspace) (*metrics, error) {
	if reg == nil {
		r := prometheus.NewRegistry()
		reg = r
		if g == nil {
			g = r
		}
	}
	if g == nil {
		g = prometheus.DefaultGatherer
	}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentspace_http_requests_total",
			Help: "HTTP requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentspace_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route pattern (event streams are left out).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentspace_http_open_streams",
			Help: "Event streams (SSE) open now.",
		}),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentspace_http_streamed_events_total",
			Help: "Events sent to SSE subscribers.",
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentspace_http_commits_total",
			Help: "Writes committed through the API, by route pattern.",
		}, []string{"route"}),
		gatherer: g,
	}
	collectors := []prometheus.Collector{m.requests, m.latency, m.streams, m.events, m.writes}
	if _, ok := ws.CommitStats(); ok {
		stat := func(f func(workspace.CommitStats) float64) func() float64 {
			return func() float64 {
				s, _ := ws.CommitStats()
				return f(s)
			}
		}
		collectors = append(collectors,
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "agentspace_store_groups_total",
				Help: "Groups of writes the store's committer ran, each sharing one commit.",
			}, stat(func(s workspace.CommitStats) float64 { return float64(s.Groups) })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "agentspace_store_group_writes_total",
				Help: "Writes the groups carried (a batch is one): over groups_total, the writes per commit.",
			}, stat(func(s workspace.CommitStats) float64 { return float64(s.Writes) })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "agentspace_store_group_running_seconds_total",
				Help: "Time the groups' transactions took, commits included. With gathering, the rate near 1 means the one committer is the bound.",
			}, stat(func(s workspace.CommitStats) float64 { return s.Running.Seconds() })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "agentspace_store_group_gathering_seconds_total",
				Help: "Time spent gathering groups: from a group's first write to its transaction's start.",
			}, stat(func(s workspace.CommitStats) float64 { return s.Gathering.Seconds() })),
		)
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{})
}

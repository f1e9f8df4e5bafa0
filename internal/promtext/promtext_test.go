package promtext

import (
	"bytes"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var buckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// both holds the same families in promtext and in the Prometheus client
// library, so that one run of observations can be written by each.
type both struct {
	ours   *Registry
	theirs *prometheus.Registry

	reqs   *CounterVec
	preqs  *prometheus.CounterVec
	lat    *HistogramVec
	plat   *prometheus.HistogramVec
	gauge  *Gauge
	pgauge prometheus.Gauge
	count  *Counter
	pcount prometheus.Counter
	fn     float64
}

func newBoth(t *testing.T) *both {
	b := &both{ours: NewRegistry(), theirs: prometheus.NewRegistry()}
	const help = "Requests answered, by route and status.\nA second line, a back\\slash and a \"quote\"."
	b.reqs = b.ours.NewCounterVec("x_requests_total", help, "route", "code")
	b.preqs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_requests_total", Help: help}, []string{"route", "code"})
	b.lat = b.ours.NewHistogramVec("x_duration_seconds", "Time taken.", buckets, "route")
	b.plat = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "x_duration_seconds", Help: "Time taken.", Buckets: buckets}, []string{"route"})
	b.gauge = b.ours.NewGauge("x_open_streams", "Streams open now.")
	b.pgauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "x_open_streams", Help: "Streams open now."})
	b.count = b.ours.NewCounter("a_events_total", "Events sent.")
	b.pcount = prometheus.NewCounter(prometheus.CounterOpts{Name: "a_events_total", Help: "Events sent."})
	b.ours.NewCounterFunc("m_seconds_total", "A running total.", func() float64 { return b.fn })
	pfn := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "m_seconds_total", Help: "A running total."}, func() float64 { return b.fn })
	for _, c := range []prometheus.Collector{b.preqs, b.plat, b.pgauge, b.pcount, pfn} {
		require.NoError(t, b.theirs.Register(c))
	}
	return b
}

func (b *both) request(route, code string, took float64) {
	b.reqs.WithLabelValues(route, code).Inc()
	b.preqs.WithLabelValues(route, code).Inc()
	b.lat.WithLabelValues(route).Observe(took)
	b.plat.WithLabelValues(route).Observe(took)
}

func (b *both) texts(t *testing.T) (ours, theirs string) {
	var o bytes.Buffer
	n, err := b.ours.WriteTo(&o)
	require.NoError(t, err)
	require.EqualValues(t, o.Len(), n)
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(b.theirs, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	return o.String(), rec.Body.String()
}

// TestTheClientLibrarysText: the same series and observations are written
// byte for byte as the Prometheus client library writes them, escapes,
// label order, series order, histogram buckets and float forms included.
func TestTheClientLibrarysText(t *testing.T) {
	b := newBoth(t)
	ours, theirs := b.texts(t)
	assert.Equal(t, theirs, ours, "nothing observed yet: the scalars only")

	b.request("POST /v1/artifacts", "201", 0.0007)
	b.request("POST /v1/artifacts", "201", 0.001) // on a bound: counted in le="0.001"
	b.request("GET /v1/tasks", "200", 0.3)
	b.request("GET /v1/tasks", "404", 120) // above every bound
	b.request("POST /v1/artifacts", "409", 1e-9)
	b.request(`odd "route"\with`+"\nnewline", "500", 2.5)
	b.request("", "200", 0)
	for range 1_000_003 {
		b.count.Inc()
		b.pcount.Inc()
	}
	b.gauge.Inc()
	b.gauge.Inc()
	b.gauge.Dec()
	b.pgauge.Inc()
	b.pgauge.Inc()
	b.pgauge.Dec()
	b.fn = 12.345678901234567
	ours, theirs = b.texts(t)
	assert.Equal(t, theirs, ours)
	assert.Contains(t, ours, `x_requests_total{code="201",route="POST /v1/artifacts"} 2`)
	assert.Contains(t, ours, `x_duration_seconds_bucket{route="POST /v1/artifacts",le="0.001"} 3`, "1e-9, 0.0007 and 0.001 (on the bound)")
	assert.Contains(t, ours, "a_events_total 1.000003e+06\n")

	b.gauge.Dec()
	b.gauge.Dec()
	b.pgauge.Dec()
	b.pgauge.Dec()
	b.fn = math.Inf(1)
	ours, theirs = b.texts(t)
	assert.Equal(t, theirs, ours, "a negative gauge, an infinite value")
}

// TestAParserReadsIt: Prometheus's own text parser reads every family and
// value back.
func TestAParserReadsIt(t *testing.T) {
	b := newBoth(t)
	b.request("GET /v1/events", "200", 0.02)
	b.request("GET /v1/events", "200", 7)
	ours, _ := b.texts(t)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(ours))
	require.NoError(t, err)
	require.Len(t, fams, 5)
	h := fams["x_duration_seconds"].GetMetric()[0].GetHistogram()
	assert.EqualValues(t, 2, h.GetSampleCount())
	assert.InDelta(t, 7.02, h.GetSampleSum(), 1e-12)
	assert.EqualValues(t, 1, h.GetBucket()[5].GetCumulativeCount(), "le=0.025 holds the 0.02")
	assert.Equal(t, "Requests answered, by route and status.\nA second line, a back\\slash and a \"quote\".", fams["x_requests_total"].GetHelp())
}

// TestConcurrentCounting: counting from many goroutines while scrapes run
// loses nothing (run under -race), and a scrape's buckets never go down.
func TestConcurrentCounting(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounterVec("c_total", "c", "k")
	h := r.NewHistogramVec("h_seconds", "h", []float64{1, 2}, "k")
	g := r.NewGauge("g", "g")
	var wg sync.WaitGroup
	const workers, each = 8, 2000
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := []string{"a", "b"}[w%2]
			for i := range each {
				c.WithLabelValues(k).Inc()
				h.WithLabelValues(k).Observe(float64(i % 3))
				g.Inc()
				g.Dec()
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 50 {
			_, err := r.WriteTo(io.Discard)
			assert.NoError(t, err)
		}
	}()
	wg.Wait()
	<-done
	assert.EqualValues(t, workers/2*each, c.WithLabelValues("a").Value())
	assert.EqualValues(t, 0, g.Value())
	var out bytes.Buffer
	_, err := r.WriteTo(&out)
	require.NoError(t, err)
	assert.Contains(t, out.String(), `h_seconds_count{k="b"} 8000`)
	assert.Contains(t, out.String(), `h_seconds_bucket{k="b",le="1"} 5336`, "i%3 in {0,1}: 2 of every 3, 1334 per worker of 2000, 4 workers")
}

// TestCountingAllocatesNothing: once a series exists, counting and
// observing allocate nothing; the request path counts every request.
func TestCountingAllocatesNothing(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounterVec("c_total", "c", "route", "code").WithLabelValues("GET /x", "200")
	h := r.NewHistogramVec("h_seconds", "h", buckets, "route").WithLabelValues("GET /x")
	g := r.NewGauge("g", "g")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		c.Inc()
		h.Observe(0.003)
		g.Inc()
	}))
}

// TestRefusals: a name the format cannot carry, a label it reserves,
// buckets out of order, one name twice and the wrong number of label
// values are a programming error, caught at registration.
func TestRefusals(t *testing.T) {
	r := NewRegistry()
	assert.Panics(t, func() { r.NewCounter("9lives", "") })
	assert.Panics(t, func() { r.NewCounter("a-b", "") })
	assert.Panics(t, func() { r.NewCounterVec("le_total", "", "le") })
	assert.Panics(t, func() { r.NewCounterVec("x_total", "", "__name") })
	assert.Panics(t, func() { r.NewHistogramVec("h", "", []float64{2, 1}) })
	assert.Panics(t, func() { r.NewHistogramVec("h2", "", []float64{1, 1}) })
	assert.Panics(t, func() { r.NewHistogramVec("h3", "", []float64{1, math.Inf(1)}) })
	r.NewGauge("g", "")
	assert.Panics(t, func() { r.NewCounter("g", "") })
	cv := r.NewCounterVec("v_total", "", "a", "b")
	assert.Panics(t, func() { cv.WithLabelValues("only one") })
}

// TestHandler: the content type a scraper negotiates for the text format.
func TestHandler(t *testing.T) {
	r := NewRegistry()
	r.NewCounter("up_total", "u").Inc()
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Equal(t, ContentType, rec.Header().Get("Content-Type"))
	assert.Equal(t, "# HELP up_total u\n# TYPE up_total counter\nup_total 1\n", rec.Body.String())
}

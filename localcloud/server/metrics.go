package server

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics counts and times API calls per operation. Benchmarks and tests read
// localcloud_requests_total to count cloud calls.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	faults   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "localcloud_requests_total",
			Help: "API calls answered, per operation and HTTP status code.",
		}, []string{"operation", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "localcloud_request_duration_seconds",
			Help:    "Time to answer an API call, injected latency included, per operation.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"operation"}),
		faults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "localcloud_faults_injected_total",
			Help: "Faults injected, per operation and kind (latency, outage, not_implemented, throttle, error).",
		}, []string{"operation", "fault"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.faults} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) observe(op string, status int, d time.Duration) {
	if status == 0 {
		status = 200 // nothing written: net/http answers 200
	}
	m.requests.WithLabelValues(op, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(op).Observe(d.Seconds())
}

func (m *metrics) fault(op, kind string) { m.faults.WithLabelValues(op, kind).Inc() }

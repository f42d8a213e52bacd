package instrumented

import (
	"github.com/nephele-dev/nephele/internal/promreg"

	"github.com/prometheus/client_golang/prometheus"
)

// Label values of the reason label of nephele_cloud_throttle_wait_seconds_total.
const (
	WaitRetryAfter = "retry_after"
	WaitRateLimit  = "rate_limit"
)

// durationBuckets span fast metadata reads to load balancer changes that take minutes.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
	wait     *prometheus.CounterVec
	fenced   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nephele", Subsystem: "cloud", Name: "requests_total",
			Help: "Cloud provider calls by controller, operation and result.",
		}, []string{"controller", "operation", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "nephele", Subsystem: "cloud", Name: "request_duration_seconds",
			Help:    "Time spent in cloud provider calls, waits for rate limits excluded.",
			Buckets: durationBuckets,
		}, []string{"controller", "operation"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "nephele", Subsystem: "cloud", Name: "requests_in_flight",
			Help: "Cloud provider calls in progress.",
		}, []string{"controller", "operation"}),
		wait: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nephele", Subsystem: "cloud", Name: "throttle_wait_seconds_total",
			Help: "Time cloud calls waited before reaching the provider, by reason: retry_after (the cloud's Retry-After) or rate_limit (the client-side limit).",
		}, []string{"controller", "reason"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nephele", Subsystem: "cloud", Name: "fenced_total",
			Help: "Cloud calls refused before reaching the provider because the leader lease guarding them may have expired.",
		}, []string{"controller", "operation"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.requests, err = promreg.Register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.duration, err = promreg.Register(reg, m.duration); err != nil {
		return nil, err
	}
	if m.inFlight, err = promreg.Register(reg, m.inFlight); err != nil {
		return nil, err
	}
	if m.wait, err = promreg.Register(reg, m.wait); err != nil {
		return nil, err
	}
	if m.fenced, err = promreg.Register(reg, m.fenced); err != nil {
		return nil, err
	}
	return m, nil
}

package instrumented

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/promreg"
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

	classRequests *prometheus.CounterVec
	classWait     *prometheus.HistogramVec
	rate          prometheus.Gauge
	cuts          prometheus.Counter

	// Upstream providers' names: cloudprovider_<provider>_api_request_duration_seconds
	// and cloudprovider_<provider>_api_request_errors{request}.
	upstreamDuration *prometheus.HistogramVec
	upstreamErrors   *prometheus.CounterVec
}

// UpstreamMetricPrefix returns the prefix of the metrics the upstream providers name
// after themselves (cloudprovider_aws_api_request_duration_seconds,
// cloudprovider_gce_api_request_errors, ...): "cloudprovider_" and the provider's name
// with every character a metric name cannot hold made an underscore.
func UpstreamMetricPrefix(provider string) string {
	return "cloudprovider_" + strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			return r
		}
		return '_'
	}, provider) + "_"
}

// waitBuckets span a free token to minutes behind a long queue.
var waitBuckets = []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

func newMetrics(reg prometheus.Registerer, provider string) (*metrics, error) {
	prefix := UpstreamMetricPrefix(provider)
	m := &metrics{
		upstreamDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: prefix + "api_request_duration_seconds",
			Help: "Latency of a cloud call in seconds, by request (upstream providers' name; the request is nephele's operation), waits for rate limits excluded.",
			// The upstream providers' buckets (AWS's, GCE's): client_golang's defaults.
			Buckets: prometheus.DefBuckets,
		}, []string{"request"}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "api_request_errors",
			Help: "Cloud calls that failed, by request (upstream providers' name; the request is nephele's operation).",
		}, []string{"request"}),
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
		classRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nephele", Subsystem: "cloud", Name: "class_requests_total",
			Help: "Cloud provider calls by priority class (critical, refine) and result; result throttled counts the cloud's throttled answers.",
		}, []string{"class", "result"}),
		classWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "nephele", Subsystem: "cloud", Name: "budget_wait_seconds",
			Help:    "Time cloud calls waited for a token of the client-side budget, by priority class.",
			Buckets: waitBuckets,
		}, []string{"class"}),
		rate: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nephele", Subsystem: "cloud", Name: "budget_rate",
			Help: "The client-side cloud budget's rate now, in calls per second.",
		}),
		cuts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nephele", Subsystem: "cloud", Name: "budget_cuts_total",
			Help: "Times the adaptive budget cut its rate after a throttled answer.",
		}),
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
	if m.classRequests, err = promreg.Register(reg, m.classRequests); err != nil {
		return nil, err
	}
	if m.classWait, err = promreg.Register(reg, m.classWait); err != nil {
		return nil, err
	}
	if m.rate, err = promreg.Register(reg, m.rate); err != nil {
		return nil, err
	}
	if m.cuts, err = promreg.Register(reg, m.cuts); err != nil {
		return nil, err
	}
	if m.upstreamDuration, err = promreg.Register(reg, m.upstreamDuration); err != nil {
		return nil, err
	}
	if m.upstreamErrors, err = promreg.Register(reg, m.upstreamErrors); err != nil {
		return nil, err
	}
	// Every operation's series exists from the start, as dashboards expect a rate of
	// errors to be 0 rather than absent.
	for _, op := range cloud.Operations() {
		m.upstreamDuration.WithLabelValues(string(op))
		m.upstreamErrors.WithLabelValues(string(op))
	}
	return m, nil
}

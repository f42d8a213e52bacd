package nodelifecycle

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Safe-mode reasons, the values of the reason label of
// nephele_node_lifecycle_safe_mode_rounds_total.
const (
	// SafeModeCloudErrors: the listing failed, or more than half of the lookups of a
	// round failed.
	SafeModeCloudErrors = "cloud_errors"
	// SafeModeTooManyDeletions: more nodes would be deleted at once than the threshold
	// allows.
	SafeModeTooManyDeletions = "too_many_deletions"
)

type metrics struct {
	safeMode       prometheus.Gauge
	safeModeRounds *prometheus.CounterVec
	deletions      prometheus.Counter
	lookupErrors   prometheus.Counter
	rounds         prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		safeMode: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nephele_node_lifecycle_safe_mode",
			Help: "1 while the cloud-node-lifecycle-controller is in safe mode and deletes no Node, 0 otherwise.",
		}),
		safeModeRounds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nephele_node_lifecycle_safe_mode_rounds_total",
			Help: "Monitor rounds the cloud-node-lifecycle-controller spent in safe mode, by reason.",
		}, []string{"reason"}),
		deletions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nephele_node_lifecycle_deletions_total",
			Help: "Nodes deleted because the cloud confirmed their instance is gone.",
		}),
		lookupErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nephele_node_lifecycle_lookup_errors_total",
			Help: "Failed cloud lookups (listings and per-node calls) of the cloud-node-lifecycle-controller.",
		}),
		rounds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nephele_node_lifecycle_rounds_total",
			Help: "Monitor rounds of the cloud-node-lifecycle-controller.",
		}),
	}
	if reg == nil {
		return m
	}
	m.safeMode = register(reg, m.safeMode)
	m.safeModeRounds = register(reg, m.safeModeRounds)
	m.deletions = register(reg, m.deletions)
	m.lookupErrors = register(reg, m.lookupErrors)
	m.rounds = register(reg, m.rounds)
	return m
}

// register registers c, or returns the collector already registered under its name, so
// that several controllers built against one registry (as tests do) share the series.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

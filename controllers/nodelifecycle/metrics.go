package nodelifecycle

import (
	"github.com/nephele-dev/nephele/internal/promreg"

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

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
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
		return m, nil
	}
	var err error
	if m.safeMode, err = promreg.Register(reg, m.safeMode); err != nil {
		return nil, err
	}
	if m.safeModeRounds, err = promreg.Register(reg, m.safeModeRounds); err != nil {
		return nil, err
	}
	if m.deletions, err = promreg.Register(reg, m.deletions); err != nil {
		return nil, err
	}
	if m.lookupErrors, err = promreg.Register(reg, m.lookupErrors); err != nil {
		return nil, err
	}
	if m.rounds, err = promreg.Register(reg, m.rounds); err != nil {
		return nil, err
	}
	return m, nil
}

package route

import (
	"github.com/nephele-dev/nephele/internal/promreg"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the controller's Prometheus metrics.
type metrics struct {
	managed prometheus.Gauge
	drift   *prometheus.CounterVec
	// upstreamSyncs is upstream's route_controller_route_sync_total.
	upstreamSyncs prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		managed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nephele_routes_managed",
			Help: "Routes inside the cluster CIDRs, as of the last listing updated by the controller's own changes.",
		}),
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nephele_route_drift_checks_total",
			Help: "Periodic full route reconciliations by result (success, error).",
		}, []string{"result"}),
		upstreamSyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "route_controller_route_sync_total",
			Help: "A metric counting the amount of times routes have been synced with the cloud provider " +
				"(upstream's name: each full reconciliation of all routes, the drift check; single nodes synced between them are in nephele_controller_syncs_total).",
		}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.managed, err = promreg.Register(reg, m.managed); err != nil {
		return nil, err
	}
	if m.drift, err = promreg.Register(reg, m.drift); err != nil {
		return nil, err
	}
	if m.upstreamSyncs, err = promreg.Register(reg, m.upstreamSyncs); err != nil {
		return nil, err
	}
	return m, nil
}

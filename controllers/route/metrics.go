package route

import (
	"github.com/nephele-dev/nephele/internal/promreg"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the controller's Prometheus metrics.
type metrics struct {
	managed prometheus.Gauge
	drift   *prometheus.CounterVec
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
	return m, nil
}

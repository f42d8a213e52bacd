package loadbalancer

import (
	"github.com/nephele-dev/nephele/internal/promreg"

	"github.com/prometheus/client_golang/prometheus"
)

// Operations, the values of the sync duration's "operation" label.
const (
	opEnsure         = "ensure"
	opUpdateBackends = "update_backends"
	opDelete         = "delete"
	opNone           = "none"
)

// Error reasons beside cloud.Result values, for the errors counter's "reason" label.
const (
	reasonInvalidSpec   = "invalid_spec"
	reasonKubernetesAPI = "kubernetes_api"
)

// Outcomes, the values of the stale cache counter's "outcome" label.
const (
	// staleSkipped: an ensure that might have created a load balancer was left out.
	staleSkipped = "skipped"
	// staleDeleted: a load balancer was deleted right after its ensure.
	staleDeleted = "deleted"
)

// metrics are the controller's Prometheus collectors.
type metrics struct {
	syncDuration   *prometheus.HistogramVec
	syncErrors     *prometheus.CounterVec
	backendUpdates prometheus.Counter
	managed        prometheus.Gauge
	stale          *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nephele_service_lb_sync_duration_seconds",
			Help:    "Time to sync one Service's load balancer, by what the sync did (ensure, update_backends, delete, none).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"operation"}),
		syncErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nephele_service_lb_sync_errors_total",
			Help: "Failed Service load balancer syncs, by reason (the cloud error class, invalid_spec or kubernetes_api).",
		}, []string{"reason"}),
		backendUpdates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nephele_service_lb_backend_updates_total",
			Help: "Successful UpdateLoadBalancerBackends calls made because the eligible nodes changed.",
		}),
		managed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nephele_service_lb_load_balancers",
			Help: "Load balancers this controller has ensured and still manages.",
		}),
		stale: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nephele_service_lb_stale_cache_total",
			Help: "Times the apiserver contradicted the cache about a Service whose load balancer was to be ensured, by outcome (skipped: not ensured; deleted: deleted right after the ensure).",
		}, []string{"outcome"}),
	}
	var err error
	if m.syncDuration, err = promreg.Register(reg, m.syncDuration); err != nil {
		return nil, err
	}
	if m.syncErrors, err = promreg.Register(reg, m.syncErrors); err != nil {
		return nil, err
	}
	if m.backendUpdates, err = promreg.Register(reg, m.backendUpdates); err != nil {
		return nil, err
	}
	if m.managed, err = promreg.Register(reg, m.managed); err != nil {
		return nil, err
	}
	if m.stale, err = promreg.Register(reg, m.stale); err != nil {
		return nil, err
	}
	return m, nil
}

package loadbalancer

import (
	"github.com/nephele-dev/nephele/internal/promreg"

	"github.com/prometheus/client_golang/prometheus"
)

// Operations: what a sync did.
const (
	opEnsure         = "ensure"
	opUpdateBackends = "update_backends"
	opDelete         = "delete"
	opNone           = "none"
)

// Failure reasons beside cloud.Result values, under which the worker counts a failed
// sync (nephele_controller_sync_errors_total's reason label).
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

// metrics are the controller's Prometheus collectors. Each sync's result and duration
// are the worker's (nephele_controller_*); these are what only this controller knows,
// and upstream's service controller metrics under upstream's names and meanings.
type metrics struct {
	backendUpdates prometheus.Counter
	managed        prometheus.Gauge
	stale          *prometheus.CounterVec

	// Upstream's (k8s.io/cloud-provider/controllers/service/metrics.go).
	upstreamSyncs      prometheus.Counter
	upstreamHostUpdate prometheus.Histogram
	upstreamNodeSync   prometheus.Histogram
	upstreamNodeErrors prometheus.Counter
}

// upstreamBuckets are upstream's service controller buckets: 1s to 16384s.
var upstreamBuckets = prometheus.ExponentialBuckets(1, 2, 15)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
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
		upstreamSyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "service_controller_loadbalancer_sync_total",
			Help: "A metric counting the amount of times any load balancer has been configured, as an effect of service/node changes on the cluster " +
				"(upstream's name; as upstream, each backend update of a load balancer counts once).",
		}),
		upstreamHostUpdate: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "service_controller_update_loadbalancer_host_latency_seconds",
			Help:    "A metric measuring the latency for updating each load balancer hosts (upstream's name).",
			Buckets: upstreamBuckets,
		}),
		upstreamNodeSync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "service_controller_nodesync_latency_seconds",
			Help: "A metric measuring the latency for nodesync which updates loadbalancer hosts on cluster node updates " +
				"(upstream's name; here from a batch of node changes to the last backend update it queued).",
			Buckets: upstreamBuckets,
		}),
		upstreamNodeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "service_controller_nodesync_error_total",
			Help: "A metric counting the amount of times any load balancer has been configured and errored, as an effect of node changes on the cluster (upstream's name).",
		}),
	}
	var err error
	if m.backendUpdates, err = promreg.Register(reg, m.backendUpdates); err != nil {
		return nil, err
	}
	if m.managed, err = promreg.Register(reg, m.managed); err != nil {
		return nil, err
	}
	if m.stale, err = promreg.Register(reg, m.stale); err != nil {
		return nil, err
	}
	if m.upstreamSyncs, err = promreg.Register(reg, m.upstreamSyncs); err != nil {
		return nil, err
	}
	if m.upstreamHostUpdate, err = promreg.Register(reg, m.upstreamHostUpdate); err != nil {
		return nil, err
	}
	if m.upstreamNodeSync, err = promreg.Register(reg, m.upstreamNodeSync); err != nil {
		return nil, err
	}
	if m.upstreamNodeErrors, err = promreg.Register(reg, m.upstreamNodeErrors); err != nil {
		return nil, err
	}
	return m, nil
}

package nodeinit

import (
	"github.com/nephele-dev/nephele/internal/promreg"

	"github.com/prometheus/client_golang/prometheus"
)

// Error reasons, the values of the reason label of nephele_cloud_node_errors_total.
const (
	reasonCloudError       = "cloud_error"
	reasonInstanceNotFound = "instance_not_found"
	reasonNoProviderID     = "no_provider_id"
	reasonNoAddresses      = "no_addresses"
	reasonProvidedNodeIP   = "provided_node_ip"
	reasonLabelRefused     = "label_refused"
	reasonPartialAddresses = "partial_addresses"
	reasonAPIError         = "api_error"
	reasonInventoryError   = "inventory_error"
)

type metrics struct {
	initDuration prometheus.Histogram
	pending      prometheus.Gauge
	errors       *prometheus.CounterVec
	addrUpdates  prometheus.Counter

	// Upstream's (k8s.io/cloud-provider/controllers/node/metrics.go).
	upstreamTaintRemoval prometheus.Histogram
	upstreamInitialSync  prometheus.Histogram
}

// upstreamBuckets are upstream's node controller buckets: 1s to about 17 minutes.
var upstreamBuckets = prometheus.ExponentialBuckets(1, 4, 6)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		initDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nephele_node_initialization_duration_seconds",
			Help: "Time from a Node's creation to the removal of its uninitialized taint by the cloud-node-controller.",
			// From sub-second (a warm cloud) to ~17 minutes (a node retried for a long time).
			Buckets: prometheus.ExponentialBuckets(0.25, 2, 13),
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nephele_node_initialization_pending",
			Help: "Nodes that carry the uninitialized taint and wait for the cloud-node-controller.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nephele_cloud_node_errors_total",
			Help: "Failures of the cloud-node-controller to initialize a node or refresh its addresses, by reason.",
		}, []string{"reason"}),
		addrUpdates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nephele_node_address_updates_total",
			Help: "Node status address writes made by the cloud-node-controller's periodic refresh.",
		}),
		upstreamTaintRemoval: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "node_controller_cloud_provider_taint_removal_delay_seconds",
			Help:    "Number of seconds after node creation when NodeController removed the cloud-provider taint of a single node (upstream's name).",
			Buckets: upstreamBuckets,
		}),
		upstreamInitialSync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "node_controller_initial_node_sync_delay_seconds",
			Help:    "Number of seconds after node creation when NodeController finished the initial synchronization of a single node (upstream's name).",
			Buckets: upstreamBuckets,
		}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.initDuration, err = promreg.Register(reg, m.initDuration); err != nil {
		return nil, err
	}
	if m.pending, err = promreg.Register(reg, m.pending); err != nil {
		return nil, err
	}
	if m.errors, err = promreg.Register(reg, m.errors); err != nil {
		return nil, err
	}
	if m.addrUpdates, err = promreg.Register(reg, m.addrUpdates); err != nil {
		return nil, err
	}
	if m.upstreamTaintRemoval, err = promreg.Register(reg, m.upstreamTaintRemoval); err != nil {
		return nil, err
	}
	if m.upstreamInitialSync, err = promreg.Register(reg, m.upstreamInitialSync); err != nil {
		return nil, err
	}
	return m, nil
}

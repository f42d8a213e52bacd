package route

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nephele-dev/nephele/cloud"
)

// Cloud operations counted by nephele_route_operations_total.
const (
	opList   = "list"
	opCreate = "create"
	opDelete = "delete"
)

// metrics are the controller's Prometheus metrics.
type metrics struct {
	operations *prometheus.CounterVec
	managed    prometheus.Gauge
	drift      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nephele_route_operations_total",
			Help: "Cloud route operations by operation (list, create, delete) and result.",
		}, []string{"operation", "result"}),
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
	if m.operations, err = register(reg, m.operations); err != nil {
		return nil, err
	}
	if m.managed, err = register(reg, m.managed); err != nil {
		return nil, err
	}
	if m.drift, err = register(reg, m.drift); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector already registered under its name so
// that several controllers built against one registry (as tests do) share it.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	var zero C
	return zero, fmt.Errorf("registering route controller metrics: %w", err)
}

func (m *metrics) observe(op string, err error) {
	m.operations.WithLabelValues(op, string(cloud.Classify(err))).Inc()
}

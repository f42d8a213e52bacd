package metrictest

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestValue(t *testing.T) {
	reg := prometheus.NewRegistry()
	ops := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ops_total", Help: "h"}, []string{"operation", "result"})
	managed := prometheus.NewGauge(prometheus.GaugeOpts{Name: "managed", Help: "h"})
	took := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "took_seconds", Help: "h"}, []string{"operation"})
	reg.MustRegister(ops, managed, took)
	ops.WithLabelValues("create", "success").Add(3)
	ops.WithLabelValues("create", "error").Add(1)
	ops.WithLabelValues("delete", "success").Add(2)
	managed.Set(7)
	for range 4 {
		took.WithLabelValues("create").Observe(0.1)
	}

	tests := []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
	}{
		{"one series", "ops_total", map[string]string{"operation": "create", "result": "success"}, 3},
		{"summed over the series a label picks", "ops_total", map[string]string{"operation": "create"}, 4},
		{"every series", "ops_total", nil, 6},
		{"no matching series", "ops_total", map[string]string{"operation": "update"}, 0},
		{"a label the metric lacks, empty", "ops_total", map[string]string{"zone": ""}, 6},
		{"a label the metric lacks, set", "ops_total", map[string]string{"zone": "a"}, 0},
		{"gauge", "managed", nil, 7},
		{"histogram sample count", "took_seconds", map[string]string{"operation": "create"}, 4},
		{"no such metric", "nope", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Value(t, reg, tt.metric, tt.labels); got != tt.want {
				t.Errorf("Value(%s, %v) = %v, want %v", tt.metric, tt.labels, got, tt.want)
			}
		})
	}
}

type brokenGatherer struct{}

func (brokenGatherer) Gather() ([]*dto.MetricFamily, error) {
	return nil, errors.New("collector broke")
}

type recorder struct {
	testing.TB
	fatal bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Fatalf(string, ...any) { r.fatal = true }

func TestValueFailsTheTestWhenGatheringFails(t *testing.T) {
	r := &recorder{TB: t}
	Value(r, brokenGatherer{}, "x", nil)
	if !r.fatal {
		t.Error("a registry that cannot gather did not fail the test")
	}
}

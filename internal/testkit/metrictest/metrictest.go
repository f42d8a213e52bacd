package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Value returns the value of metric name in g, summed over its series whose labels
// include labels (nil or empty: every series): a counter's or gauge's value, a
// histogram's or summary's sample count. It returns 0 when no series matches, as for a
// counter vector never incremented. A registry that cannot gather fails the test.
func Value(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if has(m, labels) {
				sum += value(m)
			}
		}
	}
	return sum
}

// has reports whether m carries every label of want; an empty value stands for a label
// m does not carry, as in Prometheus.
func has(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		got := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == k {
				got = l.GetValue()
				break
			}
		}
		if got != v {
			return false
		}
	}
	return true
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.Summary != nil:
		return float64(m.GetSummary().GetSampleCount())
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

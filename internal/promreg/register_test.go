package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "x_total", Help: "x"}
	first, err := Register(reg, prometheus.NewCounter(opts))
	if err != nil {
		t.Fatalf("first Register: %v", err)
	}
	second, err := Register(reg, prometheus.NewCounter(opts))
	if err != nil {
		t.Fatalf("second Register: %v", err)
	}
	first.Inc()
	if second != first {
		t.Fatal("second Register did not return the collector already registered")
	}
	// Same name, different type and labels: a real conflict.
	if _, err := Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "x_total", Help: "y"}, []string{"a"})); err == nil {
		t.Fatal("Register accepted a conflicting collector")
	}
}

func TestRegisterNilRegisterer(t *testing.T) {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "y_total", Help: "y"})
	got, err := Register[prometheus.Counter](nil, c)
	if err != nil || got != c {
		t.Fatalf("Register(nil, c) = %v, %v; want c, nil", got, err)
	}
}

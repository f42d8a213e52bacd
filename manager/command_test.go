package manager

import (
	"testing"

	"k8s.io/client-go/kubernetes"
)

func TestAPIServerConfigRateLimit(t *testing.T) {
	tests := []struct {
		name      string
		qps       float32
		burst     int
		wantLimit bool
	}{
		{name: "default relies on the apiserver", qps: NewOptions().KubeAPIQPS, burst: NewOptions().KubeAPIBurst},
		{name: "negative turns the limiter off", qps: -5, burst: 30},
		{name: "positive keeps a client-side limit", qps: 20, burst: 30, wantLimit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOptions()
			o.Master = "https://127.0.0.1:6443"
			o.KubeAPIQPS, o.KubeAPIBurst = tt.qps, tt.burst
			cfg, err := apiserverConfig(o)
			if err != nil {
				t.Fatalf("apiserverConfig: %v", err)
			}
			if cfg.ContentType != o.KubeAPIContentType {
				t.Errorf("ContentType = %q, want %q", cfg.ContentType, o.KubeAPIContentType)
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatalf("NewForConfig: %v", err)
			}
			limiter := client.CoreV1().RESTClient().GetRateLimiter()
			if got := limiter != nil; got != tt.wantLimit {
				t.Fatalf("client has a rate limiter: %v, want %v", got, tt.wantLimit)
			}
			if tt.wantLimit && limiter.QPS() != tt.qps {
				t.Errorf("limiter QPS = %v, want %v", limiter.QPS(), tt.qps)
			}
		})
	}
}

func TestAPIServerConfigBadKubeconfig(t *testing.T) {
	o := NewOptions()
	o.Kubeconfig = t.TempDir() + "/missing"
	if _, err := apiserverConfig(o); err == nil {
		t.Fatal("apiserverConfig accepted a missing kubeconfig")
	}
}

func TestGCPercentDefaultsUnlessGOGCIsSet(t *testing.T) {
	tests := []struct {
		name   string
		env    map[string]string
		want   int
		wantOK bool
	}{
		{"unset: nephele's default", nil, DefaultGCPercent, true},
		{"set: the runtime follows it", map[string]string{"GOGC": "200"}, 0, false},
		{"set off: the runtime follows it", map[string]string{"GOGC": "off"}, 0, false},
		{"set empty: still set by the operator", map[string]string{"GOGC": ""}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := gcPercent(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("gcPercent = %d, %v; want %d, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

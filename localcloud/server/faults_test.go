package server_test

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/faults"
	"github.com/nephele-dev/nephele/localcloud/server"
)

func dur(d time.Duration) api.Duration { return api.Duration{Duration: d} }

func statusOf(err error) int {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.StatusCode
	}
	if err == nil {
		return http.StatusOK
	}
	return -1
}

func TestFaultLatency(t *testing.T) {
	c := startCloud(t)
	inst := must(c.client.CreateInstance(ctx(), api.InstanceSpec{Name: "n1"})).of(t)
	tests := []struct {
		name    string
		latency *api.Latency
		atLeast time.Duration
	}{
		{name: "fixed", latency: &api.Latency{Fixed: dur(300 * time.Millisecond)}, atLeast: 300 * time.Millisecond},
		{name: "uniform", latency: &api.Latency{Distribution: api.DistributionUniform, Min: dur(200 * time.Millisecond), Max: dur(250 * time.Millisecond)}, atLeast: 200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := c.client.PutFault(ctx(), api.Fault{Operation: api.OpInstancesGet, Latency: tt.latency}); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			must(c.client.GetInstance(ctx(), inst.ID)).of(t)
			if took := time.Since(start); took < tt.atLeast {
				t.Fatalf("get took %s with %s latency injected", took, tt.atLeast)
			}
		})
	}
	// Other operations are not delayed.
	for range 3 {
		must(c.client.ListAllInstances(ctx(), 0)).of(t)
	}
	_, _, body := c.raw("GET", "/metrics", "", nil)
	if want := `localcloud_faults_injected_total{fault="latency",operation="instances.get"} 2`; !contains(body, want) {
		t.Errorf("/metrics lacks %q", want)
	}
	if unwanted := `localcloud_faults_injected_total{fault="latency",operation="instances.list"}`; contains(body, unwanted) {
		t.Errorf("list calls were delayed: /metrics has %q", unwanted)
	}
	// A canceled call does not wait out the latency.
	if err := c.client.PutFault(ctx(), api.Fault{Operation: api.OpInstancesGet, Latency: &api.Latency{Fixed: dur(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	short, cancel := contextWithTimeout(200 * time.Millisecond)
	defer cancel()
	if _, err := c.client.GetInstance(short, inst.ID); cloud.Classify(err) != cloud.ResultTimeout {
		t.Fatalf("get with an hour of latency and a 200ms deadline: %v", err)
	}
}

// errorPattern makes n lb.list calls and returns which ones failed.
func errorPattern(t *testing.T, c *testCloud, n int) []bool {
	t.Helper()
	out := make([]bool, n)
	for i := range out {
		_, err := c.client.ListLoadBalancers(ctx(), "")
		switch statusOf(err) {
		case http.StatusOK:
		case http.StatusInternalServerError:
			if cloud.IsNotFound(err) || cloud.Classify(err) != cloud.ResultError {
				t.Fatalf("injected 500 classified %s", cloud.Classify(err))
			}
			out[i] = true
		default:
			t.Fatalf("call %d: %v", i, err)
		}
	}
	return out
}

func TestFaultErrorRateIsSeeded(t *testing.T) {
	rule := must(faults.ParseRule("lb.list:errors=0.3")).of(t)
	seeded := func(cfg *server.Config) { cfg.Faults = []api.Fault{rule}; cfg.FaultSeed = 1234 }
	first := errorPattern(t, startCloud(t, seeded), 300)
	second := errorPattern(t, startCloud(t, seeded), 300)
	if fmt.Sprint(first) != fmt.Sprint(second) {
		t.Fatal("two clouds with the same seed failed different calls")
	}
	fails := 0
	for _, f := range first {
		if f {
			fails++
		}
	}
	// 300 calls at 0.3: mean 90, standard deviation about 8; the seed makes it exact
	// run to run, the range only checks the rate is applied at all.
	if fails < 50 || fails > 130 {
		t.Fatalf("error rate 0.3 failed %d of 300 calls", fails)
	}
}

func TestFaultThrottling(t *testing.T) {
	c := startCloud(t)
	// One call a minute, two in a burst: the third call must wait about a minute.
	if err := c.client.PutFault(ctx(), api.Fault{Operation: "instances.*", RateLimit: &api.RateLimit{QPS: 1.0 / 60, Burst: 2}}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := c.client.ListInstances(ctx(), client.ListOptions{}); err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		}
	}
	_, err := c.client.GetInstance(ctx(), "i-000000000001")
	var te *cloud.ThrottledError
	if !errors.As(err, &te) || cloud.IsNotFound(err) {
		t.Fatalf("call past the burst: %v, want a *cloud.ThrottledError", err)
	}
	if te.RetryAfter < 50*time.Second || te.RetryAfter > 60*time.Second {
		t.Fatalf("Retry-After %s, want about a minute", te.RetryAfter)
	}
	code, hdr, _ := c.raw("GET", "/v1/instances", "", nil)
	if secs, err := strconv.Atoi(hdr.Get("Retry-After")); code != http.StatusTooManyRequests || err != nil || secs < 1 {
		t.Fatalf("raw answer %d with Retry-After %q", code, hdr.Get("Retry-After"))
	}
	// Load balancers are not throttled.
	must(c.client.ListLoadBalancers(ctx(), "")).of(t)
	cc := must(c.client.CallCounts(ctx())).of(t)
	if cc.Code(api.OpInstancesGet, 429) != 1 || cc.Code(api.OpInstancesList, 429) != 1 || cc.Code(api.OpInstancesList, 200) != 2 {
		t.Fatalf("call counts %v", cc)
	}
}

func TestFaultOutageAndNotImplemented(t *testing.T) {
	rule := must(faults.ParseRule("routes.*:outage")).of(t)
	c := startCloud(t, func(cfg *server.Config) { cfg.Faults = []api.Fault{rule} })
	must(c.client.CreateInstance(ctx(), api.InstanceSpec{Name: "n1"})).of(t)

	_, err := c.client.ListRoutes(ctx(), "k")
	if statusOf(err) != http.StatusServiceUnavailable || cloud.IsNotFound(err) || cloud.Classify(err) != cloud.ResultError {
		t.Fatalf("routes during an outage: %v", err)
	}
	if err := c.client.DeleteRoute(ctx(), "k", "r"); statusOf(err) != http.StatusServiceUnavailable || cloud.IsNotFound(err) {
		t.Fatalf("route delete during an outage: %v, want 503 and never NotFound", err)
	}
	must(c.client.ListAllInstances(ctx(), 0)).of(t) // instances are up

	if err := c.client.SetFaults(ctx(), []api.Fault{{Operation: api.OpRoutesList, NotImplemented: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.ListRoutes(ctx(), "k"); !cloud.IsNotImplemented(err) {
		t.Fatalf("routes.list marked not implemented: %v", err)
	}
	if err := c.client.ClearFaults(ctx()); err != nil {
		t.Fatal(err)
	}
	must(c.client.ListRoutes(ctx(), "k")).of(t)
	if rules := must(c.client.Faults(ctx())).of(t); len(rules) != 0 {
		t.Fatalf("rules after clearing: %v", rules)
	}
}

func TestFaultEventualConsistency(t *testing.T) {
	c := startCloud(t)
	if err := c.client.PutFault(ctx(), api.Fault{Operation: "instances.*", InvisibleFor: dur(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	inst := must(c.client.CreateInstance(ctx(), api.InstanceSpec{Name: "fresh"})).of(t)
	checks := map[string]func() error{
		"get":     func() error { _, err := c.client.GetInstance(ctx(), inst.ID); return err },
		"by name": func() error { _, err := c.client.GetInstanceByName(ctx(), "fresh"); return err },
		"stop":    func() error { _, err := c.client.StopInstance(ctx(), inst.ID); return err },
	}
	for name, check := range checks {
		if err := check(); !cloud.IsNotFound(err) {
			t.Errorf("%s of an instance still invisible: %v, want NotFound", name, err)
		}
	}
	if all := must(c.client.ListAllInstances(ctx(), 0)).of(t); len(all) != 0 {
		t.Errorf("listing shows %d instances while the new one is invisible", len(all))
	}

	// Shorten the window: the instance appears without being created again.
	if err := c.client.PutFault(ctx(), api.Fault{Operation: "instances.*", InvisibleFor: dur(100 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "the instance to become visible", func() error {
		_, err := c.client.GetInstance(ctx(), inst.ID)
		return err
	})
	for name, check := range checks {
		if err := check(); err != nil {
			t.Errorf("%s once visible: %v", name, err)
		}
	}
	if all := must(c.client.ListAllInstances(ctx(), 0)).of(t); len(all) != 1 {
		t.Errorf("listing shows %d instances, want 1", len(all))
	}
}

func TestFaultAdminEndpoint(t *testing.T) {
	c := startCloud(t)
	rules := []api.Fault{
		{Operation: "*", RateLimit: &api.RateLimit{QPS: 1000, Burst: 1000}},
		{Operation: "lb.ensure", Latency: &api.Latency{Distribution: api.DistributionNormal, Mean: dur(time.Millisecond), StdDev: dur(time.Microsecond)}},
	}
	if err := c.client.SetFaults(ctx(), rules); err != nil {
		t.Fatal(err)
	}
	got := must(c.client.Faults(ctx())).of(t)
	if !reflect.DeepEqual(got, rules) {
		t.Fatalf("rules = %v, want %v", got, rules)
	}
	if err := c.client.DeleteFault(ctx(), "*"); err != nil {
		t.Fatal(err)
	}
	if err := c.client.DeleteFault(ctx(), "*"); statusOf(err) != http.StatusNotFound {
		t.Fatalf("deleting a missing rule: %v", err)
	}
	code, _, body := c.raw("PUT", "/admin/faults/lb.get", `{"errorRate":1}`, nil)
	if code != http.StatusOK {
		t.Fatalf("PUT /admin/faults/lb.get without an operation in the body: %d %s", code, body)
	}
	if _, err := c.client.GetLoadBalancer(ctx(), "x"); statusOf(err) != http.StatusInternalServerError {
		t.Fatalf("lb.get with error rate 1: %v", err)
	}
	if n := len(must(c.client.Faults(ctx())).of(t)); n != 2 {
		t.Fatalf("%d rules, want 2", n)
	}
}

func TestShutdownCutsInjectedLatencyShort(t *testing.T) {
	c := startCloud(t)
	if err := c.client.PutFault(ctx(), api.Fault{Operation: api.OpLBList, Latency: &api.Latency{Fixed: dur(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.client.ListLoadBalancers(ctx(), "")
		done <- err
	}()
	poll.Eventually(t, "the call to wait in injected latency", func() error {
		return metricsShow(c, `localcloud_faults_injected_total{fault="latency",operation="lb.list"} 1`)
	})
	c.stop()
	select {
	case err := <-done:
		if statusOf(err) != http.StatusServiceUnavailable {
			t.Fatalf("call waiting during shutdown: %v, want 503", err)
		}
	case <-time.After(poll.Timeout):
		t.Fatal("shutdown did not cut the injected latency short")
	}
}

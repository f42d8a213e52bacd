package instrumented

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/internal/testkit/metrictest"
)

// setup returns a fake cloud, an instrumented Cloud over it registered in a fresh
// registry, and the registry.
func setup(t *testing.T, fopts fakecloud.Options, opts Options) (*fakecloud.Cloud, *Cloud, *prometheus.Registry) {
	t.Helper()
	fake, err := fakecloud.New(fopts)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	c, err := New(fake, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return fake, c, reg
}

func requests(t *testing.T, reg prometheus.Gatherer, controller string, op cloud.Operation, result cloud.Result) float64 {
	t.Helper()
	return metrictest.Value(t, reg, "nephele_cloud_requests_total", map[string]string{"controller": controller, "operation": string(op), "result": string(result)})
}

func lbSpec(name string) *cloud.LoadBalancerSpec {
	return &cloud.LoadBalancerSpec{Name: name, Ports: []cloud.LoadBalancerPort{{Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}}}
}

func node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func mustLBs(t *testing.T, p cloud.Provider) cloud.LoadBalancers {
	t.Helper()
	lbs, ok := p.LoadBalancers()
	if !ok {
		t.Fatal("provider has no load balancers")
	}
	return lbs
}

func TestNewValidatesOptions(t *testing.T) {
	fake, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		p    cloud.Provider
		opts Options
	}{
		{name: "nil provider", p: nil},
		{name: "negative timeout", p: fake, opts: Options{Timeout: -time.Second}},
		{name: "negative max retry-after", p: fake, opts: Options{MaxRetryAfter: -time.Second}},
		{name: "NaN QPS", p: fake, opts: Options{QPS: math.NaN()}},
		{name: "infinite QPS", p: fake, opts: Options{QPS: math.Inf(1)}},
		{name: "NaN maximum", p: fake, opts: Options{QPS: 1, MaxQPS: math.NaN()}},
		{name: "maximum below QPS", p: fake, opts: Options{QPS: 10, MaxQPS: 5}},
		{name: "minimum above QPS", p: fake, opts: Options{QPS: 10, MinQPS: 20, MaxQPS: 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := New(tt.p, tt.opts); err == nil {
				t.Fatalf("New = %v, want an error", c)
			}
		})
	}
	if _, err := New(fake, Options{}); err != nil {
		t.Fatalf("New with zero options: %v", err)
	}
}

func TestCountsByResult(t *testing.T) {
	ctx := context.Background()
	fake, c, reg := setup(t, fakecloud.Options{}, Options{MaxRetryAfter: time.Nanosecond})
	if err := fake.AddInstance(cloud.Instance{NodeName: "n1"}); err != nil {
		t.Fatal(err)
	}
	fake.FailNext(cloud.OpInstanceMetadata, 1, errors.New("HTTP 500"))
	fake.FailNext(cloud.OpInstanceMetadata, 1, cloud.Invalidf("bad node"))
	fake.FailNext(cloud.OpInstanceMetadata, 1, fmt.Errorf("zones: %w", cloud.ErrNotImplemented))
	fake.ThrottleNext(cloud.OpInstanceMetadata, 1, time.Nanosecond)

	inst, _ := c.For("cloud-node-controller").Instances()
	for range 4 {
		_, _ = inst.InstanceMetadata(ctx, node("n1"))
	}
	for range 2 {
		got, err := inst.InstanceMetadata(ctx, node("n1"))
		if err != nil || got.ProviderID != "fake://n1" {
			t.Fatalf("InstanceMetadata = %+v, %v", got, err)
		}
	}
	if _, err := inst.InstanceMetadata(ctx, node("gone")); !cloud.IsNotFound(err) {
		t.Fatalf("InstanceMetadata of a missing instance: %v, want NotFound", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, _ = inst.InstanceMetadata(canceled, node("n1"))

	// Another controller's calls are counted apart.
	other, _ := c.For("cloud-node-lifecycle-controller").Instances()
	_, _ = other.InstanceMetadata(ctx, node("n1"))

	const ctrl = "cloud-node-controller"
	for result, want := range map[cloud.Result]float64{
		cloud.ResultSuccess:        2,
		cloud.ResultError:          1,
		cloud.ResultInvalid:        1,
		cloud.ResultNotImplemented: 1,
		cloud.ResultThrottled:      1,
		cloud.ResultNotFound:       1,
		cloud.ResultCanceled:       1,
		cloud.ResultTimeout:        0,
	} {
		if got := requests(t, reg, ctrl, cloud.OpInstanceMetadata, result); got != want {
			t.Errorf("requests{%s, %s} = %v, want %v", cloud.OpInstanceMetadata, result, got, want)
		}
	}
	if got := requests(t, reg, "cloud-node-lifecycle-controller", cloud.OpInstanceMetadata, cloud.ResultSuccess); got != 1 {
		t.Errorf("other controller's successes = %v, want 1", got)
	}
	if got := metrictest.Value(t, reg, "nephele_cloud_request_duration_seconds", map[string]string{"controller": ctrl, "operation": string(cloud.OpInstanceMetadata)}); got != 8 {
		t.Errorf("duration observations = %v, want 8", got)
	}
	if got := metrictest.Value(t, reg, "nephele_cloud_requests_in_flight", nil); got != 0 {
		t.Errorf("in flight = %v after every call returned", got)
	}
}

// TestUpstreamProviderMetricNames checks the names upstream providers give their call
// metrics, cloudprovider_<provider>_api_request_duration_seconds and
// cloudprovider_<provider>_api_request_errors{request}: every call timed, every failed one
// counted (a "not found" too, as upstream's), and every operation's series there from the
// start.
func TestUpstreamProviderMetricNames(t *testing.T) {
	ctx := context.Background()
	fake, c, reg := setup(t, fakecloud.Options{}, Options{})
	if err := fake.AddInstance(cloud.Instance{NodeName: "n1"}); err != nil {
		t.Fatal(err)
	}
	fake.FailNext(cloud.OpInstanceMetadata, 1, errors.New("HTTP 500"))
	inst, _ := c.For("cloud-node-controller").Instances()
	for _, n := range []string{"n1", "n1", "gone"} {
		_, _ = inst.InstanceMetadata(ctx, node(n))
	}
	prefix := UpstreamMetricPrefix(fake.ProviderName())
	if prefix != "cloudprovider_fake_" {
		t.Fatalf("UpstreamMetricPrefix(%q) = %q", fake.ProviderName(), prefix)
	}
	req := map[string]string{"request": string(cloud.OpInstanceMetadata)}
	if got := metrictest.Value(t, reg, prefix+"api_request_duration_seconds", req); got != 3 {
		t.Errorf("%sapi_request_duration_seconds = %v, want 3", prefix, got)
	}
	if got := metrictest.Value(t, reg, prefix+"api_request_errors", req); got != 2 {
		t.Errorf("%sapi_request_errors = %v, want 2 (the 500 and the not found)", prefix, got)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == prefix+"api_request_errors" && len(f.GetMetric()) != len(cloud.Operations()) {
			t.Errorf("%s has %d series, want one per operation (%d)", f.GetName(), len(f.GetMetric()), len(cloud.Operations()))
		}
	}
	for in, want := range map[string]string{"aws": "cloudprovider_aws_", "my-cloud.v2": "cloudprovider_my_cloud_v2_"} {
		if got := UpstreamMetricPrefix(in); got != want {
			t.Errorf("UpstreamMetricPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestErrorsKeepTheirType(t *testing.T) {
	ctx := context.Background()
	fake, c, _ := setup(t, fakecloud.Options{}, Options{MaxRetryAfter: time.Nanosecond})
	lbs := mustLBs(t, c.For("service-lb-controller"))

	_, err := lbs.GetLoadBalancer(ctx, lbSpec("web"), nil)
	if !cloud.IsNotFound(err) || !errors.Is(err, cloud.ErrNotFound) {
		t.Errorf("GetLoadBalancer: %v, want NotFound", err)
	}
	if !strings.Contains(err.Error(), string(cloud.OpGetLoadBalancer)) || !strings.Contains(err.Error(), `"web"`) {
		t.Errorf("error %q does not name the operation and the load balancer", err)
	}

	fake.ThrottleNext(cloud.OpEnsureLoadBalancer, 1, time.Second)
	_, err = lbs.EnsureLoadBalancer(ctx, lbSpec("web"), nil)
	// The caller sees the Retry-After the call path honours: the cloud's 1s, capped.
	var te *cloud.ThrottledError
	if !errors.As(err, &te) || te.RetryAfter != time.Nanosecond {
		t.Errorf("EnsureLoadBalancer: %v, want a *ThrottledError with the capped 1ns", err)
	}
	if !errors.Is(err, fakecloud.ErrInjected) {
		t.Errorf("the cloud's own error is lost in %v", err)
	}

	st, err := lbs.EnsureLoadBalancer(ctx, lbSpec("web"), nil)
	if err != nil || len(st.Ingress) != 1 || st.Ingress[0].IP != "192.0.2.1" {
		t.Errorf("EnsureLoadBalancer = %+v, %v; want the fake's VIP", st, err)
	}
}

func TestTimeoutEndsAHungCall(t *testing.T) {
	fake, c, reg := setup(t, fakecloud.Options{}, Options{Timeout: 50 * time.Millisecond})
	fake.Hang(cloud.OpEnsureLoadBalancer, "stuck")
	lbs := mustLBs(t, c.For("service-lb-controller"))

	// The caller's context has no deadline, only a late cancel so that a broken
	// timeout fails the test (Canceled is not DeadlineExceeded) instead of hanging it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := time.AfterFunc(30*time.Second, cancel)
	defer stop.Stop()
	_, err := lbs.EnsureLoadBalancer(ctx, lbSpec("stuck"), nil)
	if !errors.Is(err, context.DeadlineExceeded) || cloud.Classify(err) != cloud.ResultTimeout {
		t.Fatalf("hung EnsureLoadBalancer: %v, want a timeout", err)
	}
	if _, err := lbs.EnsureLoadBalancer(context.Background(), lbSpec("fine"), nil); err != nil {
		t.Fatalf("another load balancer after the timeout: %v", err)
	}
	if got := requests(t, reg, "service-lb-controller", cloud.OpEnsureLoadBalancer, cloud.ResultTimeout); got != 1 {
		t.Errorf("timeouts counted = %v, want 1", got)
	}
	if got := requests(t, reg, "service-lb-controller", cloud.OpEnsureLoadBalancer, cloud.ResultSuccess); got != 1 {
		t.Errorf("successes counted = %v, want 1", got)
	}
}

func TestTimeoutWithAnOpaqueProviderError(t *testing.T) {
	// A provider that answers the end of its context with an error of its own must
	// still be counted, and reported, as a timeout.
	fake, c, reg := setup(t, fakecloud.Options{}, Options{Timeout: 20 * time.Millisecond})
	fake.SetHook(func(ctx context.Context, op cloud.Operation, _ string) error {
		<-ctx.Done()
		return errors.New("connection reset by peer")
	})
	routes, _ := c.For("node-route-controller").Routes()
	_, err := routes.ListRoutes(context.Background(), "c1")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("ListRoutes: %v, want the provider's error and DeadlineExceeded", err)
	}
	if got := requests(t, reg, "node-route-controller", cloud.OpListRoutes, cloud.ResultTimeout); got != 1 {
		t.Errorf("timeouts counted = %v, want 1", got)
	}
}

func TestRetryAfterHoldsEveryController(t *testing.T) {
	const retryAfter = 100 * time.Millisecond
	fake, c, reg := setup(t, fakecloud.Options{}, Options{})
	fake.ThrottleNext(cloud.OpListInstances, 1, retryAfter)

	lister, _ := c.For("inventory").InstanceLister()
	if _, err := lister.ListInstances(context.Background()); !cloud.IsThrottled(err) {
		t.Fatalf("ListInstances: %v, want throttled", err)
	}
	until := c.ThrottledUntil()
	if until.IsZero() {
		t.Fatal("no Retry-After deadline recorded after a throttled answer")
	}

	// Another controller, another operation: the quota is one, so it waits too.
	routes, _ := c.For("node-route-controller").Routes()
	if _, err := routes.ListRoutes(context.Background(), "c1"); err != nil {
		t.Fatalf("ListRoutes after the Retry-After: %v", err)
	}
	log := fake.CallLog()
	if len(log) != 2 || log[1].Op != cloud.OpListRoutes {
		t.Fatalf("call log = %+v, want the throttled list then list_routes", log)
	}
	if log[1].Start.Before(until) {
		t.Errorf("list_routes reached the cloud %v before the Retry-After deadline", until.Sub(log[1].Start))
	}
	if got := metrictest.Value(t, reg, "nephele_cloud_throttle_wait_seconds_total", map[string]string{"controller": "node-route-controller", "reason": WaitRetryAfter}); got <= 0 {
		t.Errorf("retry_after wait of node-route-controller = %v, want > 0", got)
	}
	if got := metrictest.Value(t, reg, "nephele_cloud_throttle_wait_seconds_total", map[string]string{"controller": "inventory"}); got != 0 {
		t.Errorf("inventory waited %v before its first call, want 0", got)
	}
}

func TestRetryAfterWaitEndsWithTheContext(t *testing.T) {
	fake, c, reg := setup(t, fakecloud.Options{}, Options{MaxRetryAfter: time.Hour})
	fake.ThrottleNext(cloud.OpGetLoadBalancer, 1, time.Hour)
	lbs := mustLBs(t, c.For("service-lb-controller"))
	if _, err := lbs.GetLoadBalancer(context.Background(), lbSpec("a"), nil); !cloud.IsThrottled(err) {
		t.Fatalf("GetLoadBalancer: %v, want throttled", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := lbs.GetLoadBalancer(ctx, lbSpec("a"), nil)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "Retry-After") {
		t.Fatalf("GetLoadBalancer during an hour's Retry-After: %v, want DeadlineExceeded while waiting", err)
	}
	if got := fake.Calls(cloud.OpGetLoadBalancer); got != 1 {
		t.Errorf("the cloud saw %d calls, want only the throttled one", got)
	}
	if got := requests(t, reg, "service-lb-controller", cloud.OpGetLoadBalancer, cloud.ResultTimeout); got != 0 {
		t.Errorf("a call that never reached the cloud was counted as a request: %v", got)
	}
}

func TestRetryAfterCapAndMaximum(t *testing.T) {
	fake, c, _ := setup(t, fakecloud.Options{}, Options{MaxRetryAfter: 30 * time.Millisecond})
	fake.ThrottleNext(cloud.OpListRoutes, 1, time.Hour)
	routes, _ := c.For("node-route-controller").Routes()
	_, err := routes.ListRoutes(context.Background(), "c1")
	if until := c.ThrottledUntil(); until.After(time.Now().Add(30 * time.Millisecond)) {
		t.Errorf("an hour's Retry-After was not capped at 30ms: deadline in %v", time.Until(until))
	}
	// The caller sees the capped wait too, so a controller's requeue cannot outwait the cap.
	if d, ok := cloud.RetryAfter(err); !ok || d != 30*time.Millisecond || !cloud.IsThrottled(err) {
		t.Errorf("ListRoutes error %v carries Retry-After %v (%v), want the capped 30ms", err, d, ok)
	}
	if !strings.Contains(fmt.Sprint(err), "1h0m0s is capped at 30ms") {
		t.Errorf("ListRoutes error %q does not say the Retry-After was capped", err)
	}

	// A shorter Retry-After never brings a recorded deadline forward.
	errThrottled := cloud.Throttled(time.Hour, nil)
	_ = c.noteRetryAfter(time.Hour, errThrottled)
	long := c.ThrottledUntil()
	_ = c.noteRetryAfter(time.Millisecond, errThrottled)
	if got := c.ThrottledUntil(); !got.Equal(long) {
		t.Errorf("deadline moved from %v to %v on a shorter Retry-After", long, got)
	}
}

func TestRateLimitIsShared(t *testing.T) {
	const qps = 40
	interval := time.Second / qps
	fake, c, reg := setup(t, fakecloud.Options{}, Options{QPS: qps, Burst: 1})
	controllers := []string{"a", "b"}

	start := time.Now()
	for i := range 5 {
		routes, _ := c.For(controllers[i%2]).Routes()
		if _, err := routes.ListRoutes(context.Background(), "c1"); err != nil {
			t.Fatal(err)
		}
	}
	log := fake.CallLog()
	// With a burst of 1, the fifth call cannot start before four intervals have passed
	// since the first token was taken, whichever controller asked.
	if got := log[len(log)-1].Start.Sub(start); got < 4*interval {
		t.Errorf("five calls at %d QPS took %v to start, want at least %v", qps, got, 4*interval)
	}
	var waited float64
	for _, ctrl := range controllers {
		waited += metrictest.Value(t, reg, "nephele_cloud_throttle_wait_seconds_total", map[string]string{"controller": ctrl, "reason": WaitRateLimit})
	}
	if waited <= 0 {
		t.Errorf("rate_limit wait = %v, want > 0", waited)
	}
}

func TestRateLimitWaitEndsWithTheContext(t *testing.T) {
	fake, c, _ := setup(t, fakecloud.Options{}, Options{QPS: 0.001, Burst: 1})
	routes, _ := c.For("node-route-controller").Routes()
	if _, err := routes.ListRoutes(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := routes.ListRoutes(ctx, "c1")
	if !errors.Is(err, context.DeadlineExceeded) || cloud.Classify(err) != cloud.ResultTimeout {
		t.Fatalf("ListRoutes with no token left: %v, want DeadlineExceeded", err)
	}
	if got := fake.Calls(cloud.OpListRoutes); got != 1 {
		t.Errorf("the cloud saw %d calls, want 1", got)
	}
}

func TestDefaultBurst(t *testing.T) {
	fake, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		qps   float64
		max   float64
		burst int
		want  int
	}{{qps: 0.5, want: 1}, {qps: 2.5, want: 3}, {qps: 10, burst: 4, want: 4}, {qps: 10, max: 25, want: 25}} {
		c, err := New(fake, Options{QPS: tt.qps, MaxQPS: tt.max, Burst: tt.burst})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.budget.burst; got != tt.want {
			t.Errorf("QPS %v, max %v, Burst %d: burst = %d, want %d", tt.qps, tt.max, tt.burst, got, tt.want)
		}
	}
	c, _ := New(fake, Options{})
	if c.budget != nil {
		t.Error("QPS 0 made a budget, want none")
	}
}

func TestCapabilitiesPreserved(t *testing.T) {
	fake, c, _ := setup(t, fakecloud.Options{Name: "acme", Disabled: []fakecloud.Capability{fakecloud.CapInstanceLister, fakecloud.CapRoutes}}, Options{})
	p := c.For("x")
	if p.ProviderName() != "acme" {
		t.Errorf("ProviderName = %q, want acme", p.ProviderName())
	}
	check := func(want map[string]bool) {
		t.Helper()
		i, iok := p.Instances()
		l, lok := p.InstanceLister()
		b, bok := p.LoadBalancers()
		r, rok := p.Routes()
		got := map[string]bool{"instances": iok, "lister": lok, "lbs": bok, "routes": rok}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("capability %s = %v, want %v", k, got[k], v)
			}
		}
		if (!iok && i != nil) || (!lok && l != nil) || (!bok && b != nil) || (!rok && r != nil) {
			t.Error("an absent capability is not a nil interface")
		}
	}
	check(map[string]bool{"instances": true, "lister": false, "lbs": true, "routes": false})
	fake.SetCapability(fakecloud.CapRoutes, true)
	fake.SetCapability(fakecloud.CapInstances, false)
	check(map[string]bool{"instances": false, "lister": false, "lbs": true, "routes": true})
}

func TestSharedRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	fake, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var clouds []*Cloud
	for range 2 {
		c, err := New(fake, Options{Registerer: reg})
		if err != nil {
			t.Fatalf("New with an already used registry: %v", err)
		}
		clouds = append(clouds, c)
	}
	for _, c := range clouds {
		routes, _ := c.For("r").Routes()
		if _, err := routes.ListRoutes(context.Background(), "c1"); err != nil {
			t.Fatal(err)
		}
	}
	if got := requests(t, reg, "r", cloud.OpListRoutes, cloud.ResultSuccess); got != 2 {
		t.Errorf("requests counted in the shared registry = %v, want 2", got)
	}

	// A different collector under one of the names is a real conflict.
	clash := prometheus.NewRegistry()
	clash.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "nephele_cloud_requests_total", Help: "x"}))
	if _, err := New(fake, Options{Registerer: clash}); err == nil {
		t.Error("New succeeded on a registry with a conflicting metric")
	}
}

func TestEveryOperation(t *testing.T) {
	ctx := context.Background()
	fake, c, reg := setup(t, fakecloud.Options{MaxRouteChanges: 10}, Options{})
	if err := fake.AddInstance(cloud.Instance{NodeName: "n1"}); err != nil {
		t.Fatal(err)
	}
	p := c.For("all")
	inst, _ := p.Instances()
	lister, _ := p.InstanceLister()
	lbs, _ := p.LoadBalancers()
	routes, _ := p.Routes()
	r := cloud.Route{TargetNode: "n1", DestinationCIDR: netip.MustParsePrefix("10.244.1.0/24")}

	steps := []struct {
		op cloud.Operation
		do func() error
	}{
		{cloud.OpInstanceMetadata, func() error { _, err := inst.InstanceMetadata(ctx, node("n1")); return err }},
		{cloud.OpListInstances, func() error {
			got, err := lister.ListInstances(ctx)
			if err == nil && len(got) != 1 {
				err = fmt.Errorf("listed %d instances, want 1", len(got))
			}
			return err
		}},
		{cloud.OpEnsureLoadBalancer, func() error { _, err := lbs.EnsureLoadBalancer(ctx, lbSpec("a"), nil); return err }},
		{cloud.OpGetLoadBalancer, func() error { _, err := lbs.GetLoadBalancer(ctx, lbSpec("a"), nil); return err }},
		{cloud.OpUpdateLoadBalancerBackends, func() error { return lbs.UpdateLoadBalancerBackends(ctx, lbSpec("a"), nil) }},
		{cloud.OpEnsureLoadBalancerDeleted, func() error { return lbs.EnsureLoadBalancerDeleted(ctx, lbSpec("a"), nil) }},
		{cloud.OpCreateRoute, func() error { return routes.CreateRoute(ctx, "c1", "n1", r) }},
		{cloud.OpListRoutes, func() error {
			got, err := routes.ListRoutes(ctx, "c1")
			if err == nil && len(got) != 1 {
				err = fmt.Errorf("listed %d routes, want 1", len(got))
			}
			return err
		}},
		{cloud.OpDeleteRoute, func() error { return routes.DeleteRoute(ctx, "c1", r) }},
		// The wrapper batches because the provider's Routes do.
		{cloud.OpApplyRoutes, func() error {
			b, ok := routes.(cloud.RouteBatcher)
			if !ok {
				return errors.New("the wrapped Routes do not implement cloud.RouteBatcher, though the provider's do")
			}
			if n := b.MaxRouteChanges(); n != 10 {
				return fmt.Errorf("MaxRouteChanges = %d, want the provider's 10", n)
			}
			return b.ApplyRoutes(ctx, "c1", []cloud.RouteChange{{Route: r}, {Delete: true, Route: r}})
		}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Errorf("%s: %v", s.op, err)
		}
		// The instrumented operation label and the fake's operation are one name.
		if got := requests(t, reg, "all", s.op, cloud.ResultSuccess); got != 1 {
			t.Errorf("requests{%s, success} = %v, want 1", s.op, got)
		}
		if got := fake.CallsWithResult(s.op, cloud.ResultSuccess); got != 1 {
			t.Errorf("fake saw %d successful %s calls, want 1", got, s.op)
		}
	}

	// Every operation's failure names the operation and what it was about.
	fake.SetError(fakecloud.AnyOp, errors.New("HTTP 500"))
	for _, s := range steps {
		err := s.do()
		if err == nil || !strings.Contains(err.Error(), "cloud "+string(s.op)) {
			t.Errorf("%s failure %v does not name the operation", s.op, err)
		}
	}
}

// TestConcurrentControllers runs many controllers' calls at once, with throttling,
// timeouts and a rate limit in play; -race checks the locking, and the counts check
// that every call reaching the cloud was recorded exactly once.
func TestConcurrentControllers(t *testing.T) {
	fake, c, reg := setup(t, fakecloud.Options{}, Options{QPS: 5000, Burst: 50, Timeout: time.Second, MaxRetryAfter: time.Millisecond})
	fake.ThrottleNext(fakecloud.AnyOp, 20, time.Millisecond)
	fake.FailNext(cloud.OpEnsureLoadBalancer, 10, errors.New("HTTP 500"))

	const workers, rounds = 8, 40
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctrl := fmt.Sprintf("ctrl-%d", w%3)
			p := c.For(ctrl)
			lbs, _ := p.LoadBalancers()
			routes, _ := p.Routes()
			lister, _ := p.InstanceLister()
			for i := range rounds {
				name := fmt.Sprintf("lb-%d-%d", w, i)
				_, _ = lbs.EnsureLoadBalancer(context.Background(), lbSpec(name), nil)
				_ = lbs.EnsureLoadBalancerDeleted(context.Background(), lbSpec(name), nil)
				_, _ = routes.ListRoutes(context.Background(), "c1")
				_, _ = lister.ListInstances(context.Background())
			}
		})
	}
	wg.Wait()

	const total = workers * rounds * 4
	if got := fake.TotalCalls(); got != total {
		t.Fatalf("the cloud saw %d calls, want %d", got, total)
	}
	if got := metrictest.Value(t, reg, "nephele_cloud_requests_total", nil); got != total {
		t.Errorf("requests_total sums to %v, want %d", got, total)
	}
	if got := metrictest.Value(t, reg, "nephele_cloud_requests_total", map[string]string{"result": string(cloud.ResultThrottled)}); got != 20 {
		t.Errorf("throttled requests = %v, want 20", got)
	}
	if got := metrictest.Value(t, reg, "nephele_cloud_requests_total", map[string]string{"result": string(cloud.ResultError)}); got != 10 {
		t.Errorf("failed requests = %v, want 10", got)
	}
	if got := metrictest.Value(t, reg, "nephele_cloud_requests_in_flight", nil); got != 0 {
		t.Errorf("in flight = %v after every call returned", got)
	}
}

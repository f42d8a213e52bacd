package fakecloud

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

// inFlight is a condition for poll: n calls are in flight.
func inFlight(c *Cloud, n int) func() error {
	return func() error {
		if got := c.InFlight(); got != n {
			return fmt.Errorf("%d calls in flight, want %d", got, n)
		}
		return nil
	}
}

// ensure calls EnsureLoadBalancer for a spec called name and returns the error.
func ensure(ctx context.Context, c *Cloud, name string) error {
	_, err := c.EnsureLoadBalancer(ctx, lbSpec(name), nil)
	return err
}

var errBoom = errors.New("HTTP 500 from the cloud")

func TestInjectedErrors(t *testing.T) {
	ctx := context.Background()
	errOther := errors.New("HTTP 503")
	tests := []struct {
		name    string
		program func(c *Cloud)
		op      cloud.Operation
		// want lists, for successive calls of EnsureLoadBalancer, the error each must
		// match (nil for success).
		want []error
	}{
		{name: "no faults", program: func(*Cloud) {}, want: []error{nil, nil}},
		{name: "always", program: func(c *Cloud) { c.SetError(cloud.OpEnsureLoadBalancer, errBoom) }, want: []error{errBoom, errBoom, errBoom}},
		{name: "cleared", program: func(c *Cloud) {
			c.SetError(cloud.OpEnsureLoadBalancer, errBoom)
			c.SetError(cloud.OpEnsureLoadBalancer, nil)
		}, want: []error{nil}},
		{name: "next n", program: func(c *Cloud) { c.FailNext(cloud.OpEnsureLoadBalancer, 2, errBoom) }, want: []error{errBoom, errBoom, nil, nil}},
		{name: "next n queues", program: func(c *Cloud) {
			c.FailNext(cloud.OpEnsureLoadBalancer, 1, errBoom)
			c.FailNext(cloud.OpEnsureLoadBalancer, 2, errOther)
		}, want: []error{errBoom, errOther, errOther, nil}},
		{name: "next n before standing error", program: func(c *Cloud) {
			c.SetError(cloud.OpEnsureLoadBalancer, errOther)
			c.FailNext(cloud.OpEnsureLoadBalancer, 1, errBoom)
		}, want: []error{errBoom, errOther, errOther}},
		{name: "zero n does nothing", program: func(c *Cloud) { c.FailNext(cloud.OpEnsureLoadBalancer, 0, errBoom) }, want: []error{nil}},
		{name: "other operation untouched", program: func(c *Cloud) { c.SetError(cloud.OpGetLoadBalancer, errBoom) }, want: []error{nil}},
		{name: "any operation", program: func(c *Cloud) { c.SetError(AnyOp, errBoom) }, want: []error{errBoom, errBoom}},
		{name: "specific beats any", program: func(c *Cloud) {
			c.SetError(AnyOp, errBoom)
			c.SetError(cloud.OpEnsureLoadBalancer, errOther)
		}, want: []error{errOther}},
		{name: "any next n", program: func(c *Cloud) { c.FailNext(AnyOp, 1, errBoom) }, want: []error{errBoom, nil}},
		{name: "throttle", program: func(c *Cloud) { c.Throttle(cloud.OpEnsureLoadBalancer, time.Second) }, want: []error{cloud.ErrThrottled, cloud.ErrThrottled}},
		{name: "throttle next", program: func(c *Cloud) { c.ThrottleNext(cloud.OpEnsureLoadBalancer, 1, time.Second) }, want: []error{cloud.ErrThrottled, nil}},
		{name: "not found injected", program: func(c *Cloud) { c.FailNext(cloud.OpEnsureLoadBalancer, 1, cloud.NotFoundf("zone")) }, want: []error{cloud.ErrNotFound, nil}},
		{name: "cleared by ClearFaults", program: func(c *Cloud) {
			c.SetError(AnyOp, errBoom)
			c.FailNext(cloud.OpEnsureLoadBalancer, 5, errBoom)
			c.ClearFaults()
		}, want: []error{nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCloud(t, Options{})
			tt.program(c)
			for i, want := range tt.want {
				err := ensure(ctx, c, "lb")
				switch {
				case want == nil && err != nil:
					t.Fatalf("call %d: %v, want success", i, err)
				case want != nil && !errors.Is(err, want):
					t.Fatalf("call %d: %v, want %v", i, err, want)
				}
				_, exists := c.LoadBalancer("lb")
				if err != nil && exists {
					t.Fatalf("call %d failed with %v but the load balancer was created", i, err)
				}
				if err == nil && !exists {
					t.Fatalf("call %d succeeded but there is no load balancer", i)
				}
				_ = c.RemoveLoadBalancer("lb")
			}
		})
	}
}

func TestThrottleCarriesRetryAfter(t *testing.T) {
	c := newCloud(t, Options{})
	c.Throttle(cloud.OpListInstances, 3*time.Second)
	_, err := c.ListInstances(context.Background())
	var te *cloud.ThrottledError
	if !errors.As(err, &te) {
		t.Fatalf("ListInstances error %v is not a *cloud.ThrottledError", err)
	}
	if d, ok := cloud.RetryAfter(err); !ok || d != 3*time.Second {
		t.Errorf("RetryAfter = %v, %v; want 3s", d, ok)
	}
	if !errors.Is(err, ErrInjected) {
		t.Errorf("injected throttle %v does not match ErrInjected", err)
	}
}

func TestHookTargetsOneSubject(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, Options{})
	type seen struct {
		op      cloud.Operation
		subject string
	}
	var (
		mu   sync.Mutex
		hits []seen
	)
	c.SetHook(func(_ context.Context, op cloud.Operation, subject string) error {
		mu.Lock()
		hits = append(hits, seen{op, subject})
		mu.Unlock()
		if op == cloud.OpEnsureLoadBalancer && subject == "bad" {
			return errBoom
		}
		return nil
	})
	if err := ensure(ctx, c, "bad"); !errors.Is(err, errBoom) {
		t.Errorf("ensure bad: %v, want the hook's error", err)
	}
	if err := ensure(ctx, c, "good"); err != nil {
		t.Errorf("ensure good: %v", err)
	}
	if _, ok := c.LoadBalancer("bad"); ok {
		t.Error("the hook failed the call but the load balancer was created")
	}
	if err := c.AddInstance(instance("n1")); err != nil {
		t.Fatal(err)
	}
	_, _ = c.InstanceMetadata(ctx, node("n1", "fake://n1"))
	_, _ = c.InstanceMetadata(ctx, node("n2", ""))
	_ = c.CreateRoute(ctx, "c1", "", route("n1", "10.0.1.0/24"))
	_, _ = c.ListRoutes(ctx, "c1")

	want := []seen{
		{cloud.OpEnsureLoadBalancer, "bad"}, {cloud.OpEnsureLoadBalancer, "good"},
		{cloud.OpInstanceMetadata, "fake://n1"}, {cloud.OpInstanceMetadata, "n2"},
		{cloud.OpCreateRoute, "n1"}, {cloud.OpListRoutes, "c1"},
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(hits) != fmt.Sprint(want) {
		t.Errorf("hook saw %v, want %v", hits, want)
	}

	c.SetHook(nil)
	if err := ensure(ctx, c, "bad"); err != nil {
		t.Errorf("ensure bad after removing the hook: %v", err)
	}
}

func TestLatency(t *testing.T) {
	c := newCloud(t, Options{})
	c.SetLatency(AnyOp, time.Hour)
	c.SetLatency(cloud.OpGetLoadBalancer, 20*time.Millisecond)

	// The specific latency wins over AnyOp's hour.
	if _, err := c.GetLoadBalancer(context.Background(), lbSpec("a"), nil); !cloud.IsNotFound(err) {
		t.Fatalf("GetLoadBalancer: %v, want NotFound after the latency", err)
	}
	if d := c.CallLog()[0].Duration; d < 20*time.Millisecond {
		t.Errorf("call took %v, want at least the 20ms latency", d)
	}

	// AnyOp's hour applies to the others; the context ends it promptly.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := c.ListRoutes(ctx, "c1")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ListRoutes under an hour of latency: %v, want DeadlineExceeded", err)
	}
	if got := c.CallsWithResult(cloud.OpListRoutes, cloud.ResultTimeout); got != 1 {
		t.Errorf("CallsWithResult(list_routes, timeout) = %d, want 1", got)
	}

	// Removing the latency lets calls through again. The generous deadline only turns
	// a regression into a failure instead of an hour's hang.
	c.SetLatency(AnyOp, 0)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	if _, err := c.ListRoutes(ctx2, "c1"); err != nil {
		t.Fatalf("ListRoutes after removing the latency: %v", err)
	}

	// A canceled context fails the call before it does anything.
	canceled, cancel3 := context.WithCancel(context.Background())
	cancel3()
	if err := ensure(canceled, c, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("ensure with a canceled context: %v, want Canceled", err)
	}
	if _, ok := c.LoadBalancer("x"); ok {
		t.Error("a call with a canceled context created a load balancer")
	}
}

func TestHangOneLoadBalancer(t *testing.T) {
	c := newCloud(t, Options{})
	c.Hang(cloud.OpEnsureLoadBalancer, "slow")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ensure(ctx, c, "slow") }()
	poll.Eventually(t, "the slow call to start", inFlight(c, 1))

	// Other load balancers are not held up by the hung one.
	if err := ensure(context.Background(), c, "fast"); err != nil {
		t.Fatalf("ensure fast while slow hangs: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the hung call returned %v before its context ended", err)
	default:
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("hung call returned %v, want Canceled", err)
	}
	if _, ok := c.LoadBalancer("slow"); ok {
		t.Error("the hung call created its load balancer")
	}
	if c.InFlight() != 0 {
		t.Errorf("InFlight = %d after every call returned", c.InFlight())
	}

	// Unhang releases a waiting call, which then goes on and succeeds.
	go func() { done <- ensure(context.Background(), c, "slow") }()
	poll.Eventually(t, "the second slow call to start", inFlight(c, 1))
	c.Unhang(cloud.OpEnsureLoadBalancer, "slow")
	if err := <-done; err != nil {
		t.Fatalf("released call: %v", err)
	}
	if _, ok := c.LoadBalancer("slow"); !ok {
		t.Error("the released call did not create its load balancer")
	}
}

func TestHangEverySubjectAndClear(t *testing.T) {
	c := newCloud(t, Options{})
	c.Hang(AnyOp, "")
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, name := range []string{"a", "b", "c"} {
		wg.Go(func() { errs <- ensure(context.Background(), c, name) })
	}
	poll.Eventually(t, "three hung calls", inFlight(c, 3))
	c.ClearFaults()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("call released by ClearFaults: %v", err)
		}
	}
	if n := len(c.AllLoadBalancers()); n != 3 {
		t.Errorf("%d load balancers after release, want 3", n)
	}
}

func TestCallLog(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, Options{})
	c.FailNext(cloud.OpGetLoadBalancer, 1, errBoom)

	_, _ = c.GetLoadBalancer(ctx, lbSpec("a"), nil) // injected error
	_, _ = c.GetLoadBalancer(ctx, lbSpec("a"), nil) // not found
	_ = ensure(ctx, c, "a")
	_, _ = c.GetLoadBalancer(ctx, lbSpec("a"), nil) // success
	_ = c.EnsureLoadBalancerDeleted(ctx, lbSpec("a"), nil)

	counts := []struct {
		op     cloud.Operation
		result cloud.Result
		want   int
	}{
		{cloud.OpGetLoadBalancer, cloud.ResultError, 1},
		{cloud.OpGetLoadBalancer, cloud.ResultNotFound, 1},
		{cloud.OpGetLoadBalancer, cloud.ResultSuccess, 1},
		{cloud.OpEnsureLoadBalancer, cloud.ResultSuccess, 1},
		{cloud.OpEnsureLoadBalancerDeleted, cloud.ResultSuccess, 1},
		{AnyOp, cloud.ResultSuccess, 3},
		{cloud.OpListRoutes, cloud.ResultSuccess, 0},
	}
	for _, cc := range counts {
		if got := c.CallsWithResult(cc.op, cc.result); got != cc.want {
			t.Errorf("CallsWithResult(%s, %s) = %d, want %d", cc.op, cc.result, got, cc.want)
		}
	}
	if got := c.Calls(cloud.OpGetLoadBalancer); got != 3 {
		t.Errorf("Calls(get) = %d, want 3", got)
	}
	if got := c.TotalCalls(); got != 5 {
		t.Errorf("TotalCalls = %d, want 5", got)
	}

	log := c.CallLog()
	wantOps := []cloud.Operation{cloud.OpGetLoadBalancer, cloud.OpGetLoadBalancer, cloud.OpEnsureLoadBalancer, cloud.OpGetLoadBalancer, cloud.OpEnsureLoadBalancerDeleted}
	if len(log) != len(wantOps) {
		t.Fatalf("call log has %d calls, want %d", len(log), len(wantOps))
	}
	for i, call := range log {
		if call.Op != wantOps[i] || call.Subject != "a" {
			t.Errorf("call %d = %s %q, want %s \"a\"", i, call.Op, call.Subject, wantOps[i])
		}
		if i > 0 && call.Start.Before(log[i-1].Start) {
			t.Errorf("call %d started before call %d", i, i-1)
		}
	}
	if !errors.Is(log[0].Err, errBoom) || log[0].Result() != cloud.ResultError {
		t.Errorf("first call logged %v (%s), want the injected error", log[0].Err, log[0].Result())
	}

	c.ResetCalls()
	if c.TotalCalls() != 0 || len(c.CallLog()) != 0 || c.CallsWithResult(cloud.OpGetLoadBalancer, cloud.ResultSuccess) != 0 {
		t.Error("ResetCalls left counts or log behind")
	}
}

func TestCallLogLimit(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, Options{CallLogLimit: 3})
	for i := range 10 {
		_ = c.CreateRoute(ctx, "c1", "", route(fmt.Sprintf("n%d", i), fmt.Sprintf("10.0.%d.0/24", i)))
	}
	if got := c.Calls(cloud.OpCreateRoute); got != 10 {
		t.Errorf("Calls = %d, want 10 whatever the log limit", got)
	}
	log := c.CallLog()
	if len(log) < 3 || len(log) >= 6 {
		t.Fatalf("call log holds %d calls with limit 3, want 3 to 5", len(log))
	}
	if last := log[len(log)-1].Subject; last != "n9" {
		t.Errorf("last logged call is about %q, want n9", last)
	}

	unlimited := newCloud(t, Options{CallLogLimit: -1})
	for range 10 {
		_, _ = unlimited.ListRoutes(ctx, "c1")
	}
	if got := len(unlimited.CallLog()); got != 10 {
		t.Errorf("unlimited call log holds %d calls, want 10", got)
	}
}

// TestConcurrentUse drives every operation and every fault knob from many goroutines
// at once; run with -race it checks the locking, and the counts check nothing is lost.
func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, Options{VIPPool: netip.MustParsePrefix("10.128.0.0/16")})
	const workers, rounds = 16, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				name := fmt.Sprintf("w%d-%d", w, i)
				_ = c.AddInstance(cloud.Instance{NodeName: name})
				_, _ = c.InstanceMetadata(ctx, node(name, ""))
				_, _ = c.ListInstances(ctx)
				_ = ensure(ctx, c, name)
				_ = c.UpdateLoadBalancerBackends(ctx, lbSpec(name, name), nil)
				_, _ = c.GetLoadBalancer(ctx, lbSpec(name), nil)
				_ = c.CreateRoute(ctx, "c1", name, route(name, fmt.Sprintf("10.%d.%d.0/24", w, i)))
				_, _ = c.ListRoutes(ctx, "c1")
				_ = c.DeleteRoute(ctx, "c1", route(name, fmt.Sprintf("10.%d.%d.0/24", w, i)))
				_ = c.EnsureLoadBalancerDeleted(ctx, lbSpec(name), nil)
				_ = c.SetInstanceState("fake://"+name, cloud.InstanceStopped)
				_ = c.RemoveInstance("fake://" + name)
			}
		})
	}
	// Meanwhile, reprogram faults and read the state and the log.
	wg.Go(func() {
		for i := range rounds {
			c.FailNext(AnyOp, 1, errBoom)
			c.SetLatency(cloud.OpListRoutes, time.Microsecond)
			c.SetHook(func(context.Context, cloud.Operation, string) error { return nil })
			c.SetCapability(CapRoutes, i%2 == 0)
			_ = c.AllLoadBalancers()
			_ = c.AllInstances()
			_ = c.CallLog()
			_ = c.CallsWithResult(AnyOp, cloud.ResultError)
			c.Throttle(cloud.OpGetLoadBalancer, time.Millisecond)
			c.SetError(cloud.OpGetLoadBalancer, nil)
		}
	})
	wg.Wait()

	const perRound = 9 // logged calls per round above
	if got, want := c.TotalCalls(), workers*rounds*perRound; got != want {
		t.Errorf("TotalCalls = %d, want %d", got, want)
	}
	var finished int
	for _, r := range []cloud.Result{cloud.ResultSuccess, cloud.ResultError, cloud.ResultNotFound, cloud.ResultThrottled, cloud.ResultInvalid} {
		finished += c.CallsWithResult(AnyOp, r)
	}
	if finished != workers*rounds*perRound {
		t.Errorf("%d calls finished with a known result, want %d", finished, workers*rounds*perRound)
	}
	if n := len(c.AllInstances()); n != 0 {
		t.Errorf("%d instances left, want 0", n)
	}
	if c.InFlight() != 0 {
		t.Errorf("InFlight = %d after all calls returned", c.InFlight())
	}
}

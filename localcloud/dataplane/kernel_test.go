package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/localcloud/hosts"
)

// fakeMachine records what a Kernel programs. Addresses in 127.0.0.0/24 but unroutable
// are routable; failing fails programming.
type fakeMachine struct {
	unroutable netip.Addr

	mu      sync.Mutex
	failing error
	calls   int
	last    map[string]hosts.LoadBalancer
}

func (f *fakeMachine) SetLoadBalancers(_ context.Context, lbs []hosts.LoadBalancer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.failing != nil {
		return f.failing
	}
	f.last = map[string]hosts.LoadBalancer{}
	for _, lb := range lbs {
		f.last[lb.Name] = lb
	}
	return nil
}

func (f *fakeMachine) CheckLoadBalancer(lb hosts.LoadBalancer) error {
	if !lb.VIP.Is4() {
		return fmt.Errorf("load balancer %s: bad VIP %s", lb.Name, lb.VIP)
	}
	return nil
}

func (f *fakeMachine) Routable(a netip.Addr) bool {
	return netip.MustParsePrefix("127.0.0.0/24").Contains(a) && a != f.unroutable
}

func (f *fakeMachine) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing = err
}

// programmed returns what the machine has for load balancer name.
func (f *fakeMachine) programmed(name string) (hosts.LoadBalancer, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lb, ok := f.last[name]
	return lb, ok
}

// targets is a condition for poll: the machine sends load balancer name's new
// connections to want.
func (f *fakeMachine) targets(name string, want ...netip.Addr) func() error {
	return func() error {
		lb, ok := f.programmed(name)
		if !ok || !slices.Equal(lb.Targets, want) {
			return fmt.Errorf("programmed %+v (%v), want targets %v", lb, ok, want)
		}
		return nil
	}
}

func newTestKernel(t *testing.T, f *fakeMachine) *Kernel {
	t.Helper()
	k, err := NewKernel(Config{HealthInterval: 50 * time.Millisecond, HealthTimeout: time.Second, Logger: testlog.New(t, 2)}, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

var (
	nodeC      = netip.MustParseAddr("127.0.0.4")
	kernelVIP  = netip.MustParseAddr("10.89.0.1")
	unroutable = netip.MustParseAddr("127.0.0.99")
)

// TestKernelProgramsHealthyTargets: backends not known to be unhealthy are the targets,
// every routable one stays a backend, a health change programs the machine again, and
// with no healthy backend left every backend is a target.
func TestKernelProgramsHealthyTargets(t *testing.T) {
	f := &fakeMachine{unroutable: unroutable}
	k := newTestKernel(t, f)
	hc := freePort(t, TCP, nodeA, nodeB, nodeC)
	healthz(t, netip.AddrPortFrom(nodeA, hc), http.StatusOK)
	healthz(t, netip.AddrPortFrom(nodeC, hc), http.StatusServiceUnavailable)
	lb := LoadBalancer{
		Name: "web", VIP: kernelVIP, HealthCheckNodePort: hc, AffinityTimeout: time.Hour,
		// No node ports: the machine needs none.
		Ports: []Port{{Protocol: TCP, Port: 80}, {Protocol: UDP, Port: 53}},
		Backends: []Backend{{NodeName: "a", Addr: nodeA}, {NodeName: "b", Addr: nodeB}, {NodeName: "c", Addr: nodeC},
			{NodeName: "x", Addr: unroutable}},
	}
	if err := k.Apply(context.Background(), lb, nil); err != nil {
		t.Fatal(err)
	}
	// Apply asks for a health round at once, which may finish before Apply programs the
	// machine (on a loaded machine it did): the targets then are already a subset. What
	// unknown health programs is TestMachineLBTargets' case; here the backends are exact.
	got, _ := f.programmed("web")
	want := hosts.LoadBalancer{Name: "web", VIP: kernelVIP, AffinityTimeout: time.Hour,
		Ports:    []hosts.LoadBalancerPort{{Protocol: hosts.ProtocolTCP, Port: 80}, {Protocol: hosts.ProtocolUDP, Port: 53}},
		Backends: []netip.Addr{nodeA, nodeB, nodeC}, Targets: got.Targets}
	if fmt.Sprint(got) != fmt.Sprint(want) || !slices.Contains(got.Targets, nodeA) {
		t.Errorf("right after Apply the machine has\n%+v\nwant\n%+v with a among the targets", got, want)
	}
	// b answers no health check, c says 503.
	poll.Eventually(t, "only a is a target", f.targets("web", nodeA))
	if h, _ := k.Health("web"); h[3].Health != HealthUnhealthy {
		t.Errorf("the unroutable backend's health is %d, want unhealthy", h[3].Health)
	}
	healthz(t, netip.AddrPortFrom(nodeB, hc), http.StatusOK)
	poll.Eventually(t, "b healthy again is a target", f.targets("web", nodeA, nodeB))

	lb.Backends = []Backend{{NodeName: "c", Addr: nodeC}}
	if err := k.Apply(context.Background(), lb, nil); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "the unhealthy c alone is a target (fail open)", f.targets("web", nodeC))
}

// TestMachineLBTargets: a backend is a target unless known unhealthy, an unroutable one
// is neither backend nor target, a backend listed twice is programmed once, and with
// every routable backend unhealthy all of them are targets (fail open).
func TestMachineLBTargets(t *testing.T) {
	k := &Kernel{prog: &fakeMachine{unroutable: unroutable}}
	bh := func(addr netip.Addr, h Health) BackendHealth {
		return BackendHealth{Backend: Backend{NodeName: addr.String(), Addr: addr}, Health: h}
	}
	for _, tc := range []struct {
		name              string
		health            []BackendHealth
		backends, targets []netip.Addr
	}{
		{"nothing known yet", []BackendHealth{bh(nodeA, HealthUnknown), bh(nodeB, HealthUnknown), bh(nodeC, HealthUnknown)},
			[]netip.Addr{nodeA, nodeB, nodeC}, []netip.Addr{nodeA, nodeB, nodeC}},
		{"unknown and healthy are targets", []BackendHealth{bh(nodeA, HealthHealthy), bh(nodeB, HealthUnknown), bh(nodeC, HealthUnhealthy)},
			[]netip.Addr{nodeA, nodeB, nodeC}, []netip.Addr{nodeA, nodeB}},
		{"unroutable left out", []BackendHealth{bh(nodeA, HealthHealthy), bh(unroutable, HealthHealthy)},
			[]netip.Addr{nodeA}, []netip.Addr{nodeA}},
		{"listed twice", []BackendHealth{bh(nodeA, HealthHealthy), bh(nodeA, HealthHealthy)},
			[]netip.Addr{nodeA}, []netip.Addr{nodeA}},
		{"all unhealthy fail open", []BackendHealth{bh(nodeA, HealthUnhealthy), bh(nodeC, HealthUnhealthy), bh(unroutable, HealthUnhealthy)},
			[]netip.Addr{nodeA, nodeC}, []netip.Addr{nodeA, nodeC}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &kernelLB{lb: LoadBalancer{Name: "web", VIP: kernelVIP, Ports: []Port{{Protocol: TCP, Port: 80}}}}
			got := k.machineLB(st, tc.health)
			if !slices.Equal(got.Backends, tc.backends) || !slices.Equal(got.Targets, tc.targets) {
				t.Errorf("backends %v targets %v, want %v and %v", got.Backends, got.Targets, tc.backends, tc.targets)
			}
		})
	}
}

// TestKernelReportsTheHealthItProgrammed: the health Health reports (the cloud's load
// balancer status) is the one the machine was last programmed with, so a client that
// reads a backend as out never finds the kernel still sending to it: while programming
// fails, a backend whose checks fail still reads as it was programmed; once the machine
// takes the change, it reads unhealthy and is no longer a target.
func TestKernelReportsTheHealthItProgrammed(t *testing.T) {
	f := &fakeMachine{unroutable: unroutable}
	k := newTestKernel(t, f)
	hc := freePort(t, TCP, nodeA, nodeB)
	healthz(t, netip.AddrPortFrom(nodeA, hc), http.StatusOK)
	// b's checks pass until the test makes them fail, while the machine refuses: a
	// check that failed from the start could be programmed before the refusal.
	bStatus := healthz(t, netip.AddrPortFrom(nodeB, hc), http.StatusOK)
	lb := LoadBalancer{Name: "web", VIP: kernelVIP, HealthCheckNodePort: hc, Ports: []Port{{Protocol: TCP, Port: 80}},
		Backends: []Backend{{NodeName: "a", Addr: nodeA}, {NodeName: "b", Addr: nodeB}}}
	f.fail(errors.New("the machine refuses for now"))
	if err := k.Apply(context.Background(), lb, nil); err == nil {
		t.Fatal("Apply succeeded on a machine that refuses")
	}
	f.fail(nil)
	if err := k.Apply(context.Background(), lb, nil); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "a and b targets", f.targets("web", nodeA, nodeB))
	poll.Eventually(t, "b programmed healthy", func() error {
		if h, _ := k.Health("web"); h[1].Health != HealthHealthy {
			return fmt.Errorf("health %+v", h)
		}
		return nil
	})
	f.fail(errors.New("the machine refuses for now"))
	f.mu.Lock()
	before := f.calls
	f.mu.Unlock()
	bStatus.Store(http.StatusServiceUnavailable)
	poll.Eventually(t, "a failed programming after b's checks failed", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.calls < before+1 {
			return fmt.Errorf("%d programmings since", f.calls-before)
		}
		return nil
	})
	if h, _ := k.Health("web"); h[1].Health == HealthUnhealthy {
		t.Errorf("b reads unhealthy while the machine still sends to it: %+v", h)
	}
	f.fail(nil)
	poll.Eventually(t, "b out of the targets", f.targets("web", nodeA))
	poll.Eventually(t, "b reads unhealthy once programmed", func() error {
		if h, _ := k.Health("web"); h[1].Health != HealthUnhealthy {
			return fmt.Errorf("health %+v", h)
		}
		return nil
	})
}

// TestKernelApplyIsAllOrNothing: when programming or the commit fails, the commit does
// not run or is undone, and the machine is programmed with the previous configuration.
func TestKernelApplyIsAllOrNothing(t *testing.T) {
	f := &fakeMachine{}
	k := newTestKernel(t, f)
	ctx := context.Background()
	old := LoadBalancer{Name: "web", VIP: kernelVIP, Ports: []Port{{Protocol: TCP, Port: 80}}, Backends: []Backend{{NodeName: "a", Addr: nodeA}}}
	if err := k.Apply(ctx, old, nil); err != nil {
		t.Fatal(err)
	}
	next := old
	next.Backends = []Backend{{NodeName: "b", Addr: nodeB}}
	tests := []struct {
		name      string
		machine   error
		commit    error
		wantCalls int
	}{
		{"the machine fails", errors.New("iptables-restore: boom"), nil, 0},
		{"the commit fails", nil, errors.New("disk full"), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.fail(tt.machine)
			calls := 0
			err := k.Apply(ctx, next, func() error { calls++; return tt.commit })
			if err == nil || calls != tt.wantCalls {
				t.Fatalf("Apply = %v after %d commits, want an error after %d", err, calls, tt.wantCalls)
			}
			f.fail(nil)
			poll.Eventually(t, "the old configuration on the machine", f.targets("web", nodeA))
			if h, _ := k.Health("web"); len(h) != 1 || h[0].Backend.Addr != nodeA {
				t.Errorf("Health after a failed Apply: %+v, want the old backend", h)
			}
		})
	}
	if err := k.Apply(ctx, LoadBalancer{Name: "bad", VIP: netip.MustParseAddr("fd00::1")}, nil); err == nil {
		t.Error("a load balancer the machine refuses was applied")
	}
}

// TestKernelRemove: a removed load balancer leaves the machine; when the machine fails,
// Remove says so and the background loop programs it once the machine works again.
func TestKernelRemove(t *testing.T) {
	f := &fakeMachine{}
	k := newTestKernel(t, f)
	ctx := context.Background()
	for _, name := range []string{"web", "dns"} {
		lb := LoadBalancer{Name: name, VIP: kernelVIP, Ports: []Port{{Protocol: TCP, Port: 80}}, Backends: []Backend{{NodeName: "a", Addr: nodeA}}}
		if err := k.Apply(ctx, lb, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.Remove(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.programmed("web"); ok {
		t.Error("web is still on the machine")
	}
	f.fail(errors.New("iptables-restore: boom"))
	if err := k.Remove(ctx, "dns"); err == nil {
		t.Error("Remove did not report the machine's failure")
	}
	if _, ok := k.Health("dns"); ok {
		t.Error("a removed load balancer reports health")
	}
	f.fail(nil)
	poll.Eventually(t, "dns gone from the machine", func() error {
		if _, ok := f.programmed("dns"); ok {
			return errors.New("still there")
		}
		return nil
	})
	if err := k.Remove(ctx, "never"); err != nil {
		t.Errorf("removing an unknown load balancer: %v", err)
	}
}

// TestKernelCloseKeepsTheMachine: closing the plane programs nothing (the machine keeps
// its rules for a cloud that restarts).
func TestKernelCloseKeepsTheMachine(t *testing.T) {
	f := &fakeMachine{}
	k := newTestKernel(t, f)
	lb := LoadBalancer{Name: "web", VIP: kernelVIP, Ports: []Port{{Protocol: TCP, Port: 80}}, Backends: []Backend{{NodeName: "a", Addr: nodeA}}}
	if err := k.Apply(context.Background(), lb, nil); err != nil {
		t.Fatal(err)
	}
	k.Close()
	if _, ok := f.programmed("web"); !ok {
		t.Error("closing the plane removed the load balancer from the machine")
	}
	if err := k.Apply(context.Background(), lb, nil); err == nil {
		t.Error("Apply on a closed plane succeeded")
	}
}

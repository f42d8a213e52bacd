package fakecloud

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"
)

func ingressIP(t *testing.T, s *corev1.LoadBalancerStatus) string {
	t.Helper()
	if s == nil || len(s.Ingress) != 1 {
		t.Fatalf("status = %+v, want one ingress", s)
	}
	return s.Ingress[0].IP
}

func TestLoadBalancerLifecycle(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, Options{})

	if _, err := c.GetLoadBalancer(ctx, lbSpec("a"), nil); !cloud.IsNotFound(err) {
		t.Fatalf("GetLoadBalancer before creation: %v, want NotFound", err)
	}
	if err := c.UpdateLoadBalancerBackends(ctx, lbSpec("a", "n1"), nil); !cloud.IsNotFound(err) {
		t.Fatalf("UpdateLoadBalancerBackends before creation: %v, want NotFound", err)
	}

	st, err := c.EnsureLoadBalancer(ctx, lbSpec("a", "n1", "n2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ip := ingressIP(t, st); ip != "192.0.2.1" {
		t.Errorf("first VIP = %s, want 192.0.2.1", ip)
	}
	st, err = c.EnsureLoadBalancer(ctx, lbSpec("b"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ip := ingressIP(t, st); ip != "192.0.2.2" {
		t.Errorf("second VIP = %s, want 192.0.2.2", ip)
	}

	// Ensuring again with another spec keeps the VIP and records the new spec.
	spec := lbSpec("a", "n3")
	spec.Ports = append(spec.Ports, cloud.LoadBalancerPort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053})
	st, err = c.EnsureLoadBalancer(ctx, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ip := ingressIP(t, st); ip != "192.0.2.1" {
		t.Errorf("VIP after re-ensure = %s, want 192.0.2.1", ip)
	}
	lb, ok := c.LoadBalancer("a")
	if !ok {
		t.Fatal(`LoadBalancer("a") not found`)
	}
	if len(lb.Spec.Ports) != 2 || lb.Ensures != 2 || !slices.Equal(lb.BackendProviderIDs, []string{"fake://n3"}) {
		t.Errorf("after re-ensure: ports %v, ensures %d, backends %v", lb.Spec.Ports, lb.Ensures, lb.BackendProviderIDs)
	}

	if err := c.UpdateLoadBalancerBackends(ctx, lbSpec("a", "n1", "n4"), nil); err != nil {
		t.Fatal(err)
	}
	lb, _ = c.LoadBalancer("a")
	if !slices.Equal(lb.BackendProviderIDs, []string{"fake://n1", "fake://n4"}) || lb.BackendUpdates != 1 || len(lb.Spec.Ports) != 2 {
		t.Errorf("after backend update: backends %v, updates %d, ports %v", lb.BackendProviderIDs, lb.BackendUpdates, lb.Spec.Ports)
	}
	st, err = c.GetLoadBalancer(ctx, lbSpec("a"), nil)
	if err != nil || ingressIP(t, st) != "192.0.2.1" {
		t.Errorf("GetLoadBalancer = %v, %v", st, err)
	}

	// Delete is idempotent, and a freed VIP is not handed out again at once.
	for range 2 {
		if err := c.EnsureLoadBalancerDeleted(ctx, lbSpec("a"), nil); err != nil {
			t.Fatalf("EnsureLoadBalancerDeleted: %v", err)
		}
	}
	if _, err := c.GetLoadBalancer(ctx, lbSpec("a"), nil); !cloud.IsNotFound(err) {
		t.Errorf("GetLoadBalancer after delete: %v, want NotFound", err)
	}
	st, err = c.EnsureLoadBalancer(ctx, lbSpec("c"), nil)
	if err != nil || ingressIP(t, st) != "192.0.2.3" {
		t.Errorf("VIP after a delete = %v, %v; want 192.0.2.3", st, err)
	}

	var names []string
	for _, lb := range c.AllLoadBalancers() {
		names = append(names, lb.Name)
	}
	if !slices.Equal(names, []string{"b", "c"}) {
		t.Errorf("AllLoadBalancers = %v, want [b c]", names)
	}
}

func TestLoadBalancerInvalidSpecs(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, Options{})
	for name, spec := range map[string]*cloud.LoadBalancerSpec{"nil": nil, "no name": {}} {
		t.Run(name, func(t *testing.T) {
			if _, err := c.EnsureLoadBalancer(ctx, spec, nil); !cloud.IsInvalid(err) {
				t.Errorf("EnsureLoadBalancer: %v, want Invalid", err)
			}
			if _, err := c.GetLoadBalancer(ctx, spec, nil); !cloud.IsInvalid(err) {
				t.Errorf("GetLoadBalancer: %v, want Invalid", err)
			}
			if err := c.UpdateLoadBalancerBackends(ctx, spec, nil); !cloud.IsInvalid(err) {
				t.Errorf("UpdateLoadBalancerBackends: %v, want Invalid", err)
			}
			if err := c.EnsureLoadBalancerDeleted(ctx, spec, nil); !cloud.IsInvalid(err) {
				t.Errorf("EnsureLoadBalancerDeleted: %v, want Invalid", err)
			}
		})
	}
}

func TestLoadBalancerRequestedIP(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, Options{})
	tests := []struct {
		name, lb, ip string
		wantIP       string
		wantResult   cloud.Result
	}{
		{name: "free address", lb: "a", ip: "203.0.113.9", wantIP: "203.0.113.9"},
		{name: "not an address", lb: "b", ip: "nope", wantResult: cloud.ResultInvalid},
		{name: "taken by another", lb: "b", ip: "203.0.113.9", wantResult: cloud.ResultError},
		{name: "same again", lb: "a", ip: "203.0.113.9", wantIP: "203.0.113.9"},
		{name: "move to another", lb: "a", ip: "203.0.113.10", wantIP: "203.0.113.10"},
		{name: "the freed one", lb: "b", ip: "203.0.113.9", wantIP: "203.0.113.9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := lbSpec(tt.lb)
			spec.RequestedIP = tt.ip
			st, err := c.EnsureLoadBalancer(ctx, spec, nil)
			if tt.wantResult != "" {
				if r := cloud.Classify(err); r != tt.wantResult {
					t.Fatalf("EnsureLoadBalancer error %v (%s), want %s", err, r, tt.wantResult)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ingressIP(t, st); got != tt.wantIP {
				t.Errorf("VIP = %s, want %s", got, tt.wantIP)
			}
		})
	}
}

func TestVIPPool(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		pool string
		want []string // VIPs of successive new load balancers; "" = pool exhausted
	}{
		{name: "ipv4 /30 skips network and broadcast", pool: "198.51.100.0/30", want: []string{"198.51.100.1", "198.51.100.2", ""}},
		{name: "ipv4 /31 uses both", pool: "198.51.100.4/31", want: []string{"198.51.100.4", "198.51.100.5", ""}},
		{name: "ipv6", pool: "2001:db8::/120", want: []string{"2001:db8::1", "2001:db8::2"}},
		{name: "unmasked prefix", pool: "10.9.9.77/24", want: []string{"10.9.9.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCloud(t, Options{VIPPool: netip.MustParsePrefix(tt.pool)})
			for i, want := range tt.want {
				st, err := c.EnsureLoadBalancer(ctx, lbSpec(string(rune('a'+i))), nil)
				if want == "" {
					if err == nil {
						t.Fatalf("load balancer %d got %v from an exhausted pool", i, st)
					}
					continue
				}
				if err != nil {
					t.Fatalf("load balancer %d: %v", i, err)
				}
				if got := ingressIP(t, st); got != want {
					t.Errorf("load balancer %d VIP = %s, want %s", i, got, want)
				}
			}
		})
	}

	t.Run("wraps around to freed addresses", func(t *testing.T) {
		c := newCloud(t, Options{VIPPool: netip.MustParsePrefix("198.51.100.0/29")}) // .1 to .6
		for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
			if _, err := c.EnsureLoadBalancer(ctx, lbSpec(n), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.EnsureLoadBalancerDeleted(ctx, lbSpec("c"), nil); err != nil {
			t.Fatal(err)
		}
		st, err := c.EnsureLoadBalancer(ctx, lbSpec("g"), nil)
		if err != nil {
			t.Fatalf("ensure after freeing one address of a full pool: %v", err)
		}
		if got := ingressIP(t, st); got != "198.51.100.3" {
			t.Errorf("VIP = %s, want the freed 198.51.100.3", got)
		}
	})
}

func TestLoadBalancerCopies(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, Options{})
	spec := lbSpec("a", "n1")
	spec.SourceRanges = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	if _, err := c.EnsureLoadBalancer(ctx, spec, nil); err != nil {
		t.Fatal(err)
	}
	// Changing the caller's spec afterwards must not reach into the cloud.
	spec.Ports[0].Port = 1
	spec.Backends[0].ProviderID = "changed"
	spec.SourceRanges[0] = netip.MustParsePrefix("0.0.0.0/0")

	lb, _ := c.LoadBalancer("a")
	if lb.Spec.Ports[0].Port != 80 || lb.Spec.Backends[0].ProviderID != "fake://n1" || lb.Spec.SourceRanges[0].String() != "10.0.0.0/8" {
		t.Errorf("stored spec changed with the caller's: %+v", lb.Spec)
	}
	// And changing a returned copy must not either.
	lb.BackendProviderIDs[0] = "changed"
	lb.Spec.Ports[0].Port = 2
	again, _ := c.LoadBalancer("a")
	if again.BackendProviderIDs[0] != "fake://n1" || again.Spec.Ports[0].Port != 80 {
		t.Errorf("stored load balancer changed with a returned copy: %+v", again)
	}
}

func TestSeedingLoadBalancers(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, Options{})
	lb, err := c.AddLoadBalancer(*lbSpec("orphan", "n1"))
	if err != nil {
		t.Fatal(err)
	}
	if lb.VIP.String() != "192.0.2.1" || lb.Ensures != 0 {
		t.Errorf("AddLoadBalancer = %+v", lb)
	}
	if _, err := c.AddLoadBalancer(cloud.LoadBalancerSpec{}); !cloud.IsInvalid(err) {
		t.Errorf("AddLoadBalancer without a name: %v, want Invalid", err)
	}
	if c.TotalCalls() != 0 {
		t.Errorf("seeding made %d logged calls, want 0", c.TotalCalls())
	}
	if _, err := c.GetLoadBalancer(ctx, lbSpec("orphan"), nil); err != nil {
		t.Errorf("GetLoadBalancer of a seeded load balancer: %v", err)
	}
	if !c.RemoveLoadBalancer("orphan") || c.RemoveLoadBalancer("orphan") {
		t.Error("RemoveLoadBalancer should return true once, then false")
	}
	if _, err := c.GetLoadBalancer(ctx, lbSpec("orphan"), nil); !cloud.IsNotFound(err) {
		t.Errorf("GetLoadBalancer after RemoveLoadBalancer: %v, want NotFound", err)
	}
}

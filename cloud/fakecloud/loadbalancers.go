package fakecloud

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"
)

// LoadBalancer is what the fake cloud keeps of one load balancer.
type LoadBalancer struct {
	// Name is the spec's Name, the load balancer's identity.
	Name string
	// Spec is a copy of the last spec given to EnsureLoadBalancer, with the backends of
	// the last UpdateLoadBalancerBackends.
	Spec cloud.LoadBalancerSpec
	// VIP is the address the cloud assigned.
	VIP netip.Addr
	// BackendProviderIDs are the provider IDs of Spec.Backends, in the same order.
	BackendProviderIDs []string
	// Ensures counts the successful EnsureLoadBalancer calls for it.
	Ensures int
	// BackendUpdates counts the successful UpdateLoadBalancerBackends calls for it.
	BackendUpdates int
}

// Status returns the status the cloud reports for the load balancer.
func (lb LoadBalancer) Status() *corev1.LoadBalancerStatus {
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: lb.VIP.String()}}}
}

// LoadBalancer returns a copy of the load balancer called name, without a logged call
// or any fault.
func (c *Cloud) LoadBalancer(name string) (LoadBalancer, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lb, ok := c.lbs[name]
	if !ok {
		return LoadBalancer{}, false
	}
	return copyLoadBalancer(lb), true
}

// AllLoadBalancers returns copies of every load balancer sorted by name, without a
// logged call or any fault.
func (c *Cloud) AllLoadBalancers() []LoadBalancer {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]LoadBalancer, 0, len(c.lbs))
	for _, lb := range c.lbs {
		out = append(out, copyLoadBalancer(lb))
	}
	slices.SortFunc(out, func(a, b LoadBalancer) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// AddLoadBalancer creates or updates a load balancer as EnsureLoadBalancer would, but
// without a logged call or any fault: a test uses it for load balancers that exist
// before the code under test runs.
func (c *Cloud) AddLoadBalancer(spec cloud.LoadBalancerSpec) (LoadBalancer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lb, err := c.ensureLocked(&spec)
	if err != nil {
		return LoadBalancer{}, err
	}
	return copyLoadBalancer(lb), nil
}

// RemoveLoadBalancer deletes the load balancer called name behind the controllers'
// back and returns whether there was one.
func (c *Cloud) RemoveLoadBalancer(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deleteLocked(name)
}

func specName(spec *cloud.LoadBalancerSpec) string {
	if spec == nil {
		return ""
	}
	return spec.Name
}

func checkSpec(spec *cloud.LoadBalancerSpec) error {
	if spec == nil {
		return cloud.Invalidf("load balancer spec is nil")
	}
	if spec.Name == "" {
		return cloud.Invalidf("load balancer for service %s: name is empty", spec.Service)
	}
	return nil
}

// GetLoadBalancer implements cloud.LoadBalancers.
func (c *Cloud) GetLoadBalancer(ctx context.Context, spec *cloud.LoadBalancerSpec, _ *corev1.Service) (*corev1.LoadBalancerStatus, error) {
	var status *corev1.LoadBalancerStatus
	err := c.do(ctx, cloud.OpGetLoadBalancer, specName(spec), func() error {
		if err := checkSpec(spec); err != nil {
			return err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		lb, ok := c.lbs[spec.Name]
		if !ok {
			return cloud.NotFoundf("load balancer %q", spec.Name)
		}
		status = lb.Status()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return status, nil
}

// EnsureLoadBalancer implements cloud.LoadBalancers. A new load balancer gets
// spec.RequestedIP when set and free, otherwise the next free address of the VIP pool;
// an existing one keeps its VIP unless RequestedIP asks for another.
func (c *Cloud) EnsureLoadBalancer(ctx context.Context, spec *cloud.LoadBalancerSpec, _ *corev1.Service) (*corev1.LoadBalancerStatus, error) {
	var status *corev1.LoadBalancerStatus
	err := c.do(ctx, cloud.OpEnsureLoadBalancer, specName(spec), func() error {
		if err := checkSpec(spec); err != nil {
			return err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		lb, err := c.ensureLocked(spec)
		if err != nil {
			return err
		}
		lb.Ensures++
		status = lb.Status()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return status, nil
}

// ensureLocked creates or updates the load balancer for spec. Callers hold c.mu.
func (c *Cloud) ensureLocked(spec *cloud.LoadBalancerSpec) (*LoadBalancer, error) {
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	lb, exists := c.lbs[spec.Name]
	var want netip.Addr
	if spec.RequestedIP != "" {
		ip, err := netip.ParseAddr(spec.RequestedIP)
		if err != nil {
			return nil, cloud.Invalidf("load balancer %q: requested IP %q is not an IP address", spec.Name, spec.RequestedIP)
		}
		want = ip
	}
	vip := netip.Addr{}
	switch {
	case exists && (!want.IsValid() || want == lb.VIP):
		vip = lb.VIP
	case want.IsValid():
		if owner, taken := c.vips.used[want]; taken && owner != spec.Name {
			return nil, fmt.Errorf("load balancer %q: requested IP %s is in use by load balancer %q", spec.Name, want, owner)
		}
		vip = want
	default:
		ip, err := c.vips.allocate()
		if err != nil {
			return nil, fmt.Errorf("load balancer %q: %w", spec.Name, err)
		}
		vip = ip
	}
	if !exists {
		lb = &LoadBalancer{Name: spec.Name}
		c.lbs[spec.Name] = lb
	}
	if lb.VIP.IsValid() && lb.VIP != vip {
		delete(c.vips.used, lb.VIP)
	}
	lb.VIP = vip
	c.vips.used[vip] = spec.Name
	lb.Spec = copySpec(*spec)
	lb.BackendProviderIDs = backendIDs(spec.Backends)
	return lb, nil
}

// UpdateLoadBalancerBackends implements cloud.LoadBalancers.
func (c *Cloud) UpdateLoadBalancerBackends(ctx context.Context, spec *cloud.LoadBalancerSpec, _ *corev1.Service) error {
	return c.do(ctx, cloud.OpUpdateLoadBalancerBackends, specName(spec), func() error {
		if err := checkSpec(spec); err != nil {
			return err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		lb, ok := c.lbs[spec.Name]
		if !ok {
			return cloud.NotFoundf("updating the backends of load balancer %q", spec.Name)
		}
		lb.Spec.Backends = copyBackends(spec.Backends)
		lb.BackendProviderIDs = backendIDs(spec.Backends)
		lb.BackendUpdates++
		return nil
	})
}

// EnsureLoadBalancerDeleted implements cloud.LoadBalancers. Deleting a load balancer
// that does not exist succeeds.
func (c *Cloud) EnsureLoadBalancerDeleted(ctx context.Context, spec *cloud.LoadBalancerSpec, _ *corev1.Service) error {
	return c.do(ctx, cloud.OpEnsureLoadBalancerDeleted, specName(spec), func() error {
		if err := checkSpec(spec); err != nil {
			return err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.deleteLocked(spec.Name)
		return nil
	})
}

// deleteLocked removes the load balancer called name and frees its VIP. Callers hold
// c.mu.
func (c *Cloud) deleteLocked(name string) bool {
	lb, ok := c.lbs[name]
	if !ok {
		return false
	}
	delete(c.vips.used, lb.VIP)
	delete(c.lbs, name)
	return true
}

func backendIDs(backends []cloud.Backend) []string {
	ids := make([]string, len(backends))
	for i, b := range backends {
		ids[i] = b.ProviderID
	}
	return ids
}

// copyBackends copies the backends; the Node pointers stay shared, as the contract
// says they are never modified.
func copyBackends(in []cloud.Backend) []cloud.Backend {
	if in == nil {
		return nil
	}
	out := make([]cloud.Backend, len(in))
	for i, b := range in {
		b.Addresses = slices.Clone(b.Addresses)
		out[i] = b
	}
	return out
}

func copySpec(in cloud.LoadBalancerSpec) cloud.LoadBalancerSpec {
	in.Ports = slices.Clone(in.Ports)
	in.Backends = copyBackends(in.Backends)
	in.SourceRanges = slices.Clone(in.SourceRanges)
	in.IPFamilies = slices.Clone(in.IPFamilies)
	return in
}

func copyLoadBalancer(lb *LoadBalancer) LoadBalancer {
	out := *lb
	out.Spec = copySpec(lb.Spec)
	out.BackendProviderIDs = slices.Clone(lb.BackendProviderIDs)
	return out
}

// vipPool hands out addresses of a prefix, scanning forward from the last one handed
// out so that a freed VIP is not reused at once. It is guarded by Cloud.mu.
type vipPool struct {
	prefix netip.Prefix
	next   netip.Addr
	// used maps each VIP in use to the load balancer holding it.
	used map[netip.Addr]string
}

func newVIPPool(prefix netip.Prefix) (vipPool, error) {
	p := vipPool{prefix: prefix.Masked(), used: map[netip.Addr]string{}}
	p.next = p.first()
	if !p.usable(p.next) {
		return vipPool{}, fmt.Errorf("fake cloud VIP pool %s has no usable address", prefix)
	}
	return p, nil
}

// big reports whether the prefix is large enough to set aside its network (and, for
// IPv4, broadcast) address.
func (p vipPool) big() bool { return p.prefix.Bits() < p.prefix.Addr().BitLen()-1 }

func (p vipPool) first() netip.Addr {
	if p.big() {
		return p.prefix.Addr().Next()
	}
	return p.prefix.Addr()
}

func (p vipPool) usable(a netip.Addr) bool {
	if !a.IsValid() || !p.prefix.Contains(a) {
		return false
	}
	if p.big() && a.Is4() && !p.prefix.Contains(a.Next()) {
		return false // the broadcast address
	}
	return true
}

// allocate returns a free address. Among len(used)+1 distinct addresses at least one
// is free, so the scan is bounded even for huge IPv6 pools.
func (p *vipPool) allocate() (netip.Addr, error) {
	a := p.next
	for range len(p.used) + 1 {
		if !p.usable(a) {
			a = p.first()
		}
		if _, taken := p.used[a]; !taken {
			p.next = a.Next()
			return a, nil
		}
		a = a.Next()
	}
	return netip.Addr{}, fmt.Errorf("the VIP pool %s is exhausted", p.prefix)
}

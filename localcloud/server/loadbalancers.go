package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/dataplane"
)

// toDataPlane converts a stored load balancer, whose spec passed validation.
func toDataPlane(lb *api.LoadBalancer) (dataplane.LoadBalancer, error) {
	vip, err := netip.ParseAddr(lb.Status.VIP)
	if err != nil {
		return dataplane.LoadBalancer{}, fmt.Errorf("load balancer %s: VIP %q: %w", lb.Name, lb.Status.VIP, err)
	}
	out := dataplane.LoadBalancer{
		Name:                lb.Name,
		VIP:                 vip,
		HealthCheckNodePort: uint16(lb.Spec.HealthCheckNodePort),
		AffinityTimeout:     lb.Spec.AffinityTimeout(),
	}
	for _, p := range lb.Spec.Ports {
		out.Ports = append(out.Ports, dataplane.Port{
			Protocol: dataplane.Protocol(p.Protocol), Port: uint16(p.Port), NodePort: uint16(p.NodePort),
		})
	}
	for _, b := range lb.Spec.Backends {
		a, err := netip.ParseAddr(b.Address)
		if err != nil {
			return dataplane.LoadBalancer{}, fmt.Errorf("load balancer %s: backend %s: %w", lb.Name, b.NodeName, err)
		}
		out.Backends = append(out.Backends, dataplane.Backend{NodeName: b.NodeName, Addr: a.Unmap()})
	}
	for _, r := range lb.Spec.SourceRanges {
		p, err := netip.ParsePrefix(r)
		if err != nil {
			return dataplane.LoadBalancer{}, fmt.Errorf("load balancer %s: source range %q: %w", lb.Name, r, err)
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out.SourceRanges = append(out.SourceRanges, p.Masked())
	}
	return out, nil
}

// withStatus fills in what only the running cloud knows: backend health and data
// plane errors.
func (s *Server) withStatus(lb api.LoadBalancer) api.LoadBalancer {
	lb.Status.Error = s.dpError(lb.Name)
	lb.Status.IPMode = s.ipMode
	health, running := s.plane.Health(lb.Name)
	lb.Status.Backends = make([]api.BackendStatus, 0, len(lb.Spec.Backends))
	for i, b := range lb.Spec.Backends {
		h := api.HealthUnknown
		if running && i < len(health) {
			switch health[i].Health {
			case dataplane.HealthHealthy:
				h = api.HealthHealthy
			case dataplane.HealthUnhealthy:
				h = api.HealthUnhealthy
			}
		}
		lb.Status.Backends = append(lb.Status.Backends, api.BackendStatus{NodeName: b.NodeName, Address: b.Address, Health: h})
	}
	return lb
}

// written is the answer to a write of lb: lb with its status, or, when the request
// asks for a minimal answer (Prefer: return=minimal, RFC 7240), lb without its backends
// and their health. A caller that sent thousands of backends rarely needs them back,
// and a cloud's own API answers such writes with little.
func (s *Server) written(c *call, lb api.LoadBalancer) api.LoadBalancer {
	if !prefersMinimal(c.r) {
		return s.withStatus(lb)
	}
	c.w.Header().Set("Preference-Applied", "return=minimal")
	lb.Status.Error = s.dpError(lb.Name)
	lb.Status.IPMode = s.ipMode
	lb.Spec.Backends = nil
	lb.Status.Backends = nil
	return lb
}

// prefersMinimal reports whether r's Prefer headers ask for return=minimal.
func prefersMinimal(r *http.Request) bool {
	for _, v := range r.Header.Values("Prefer") {
		for pref := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(pref), "return=minimal") {
				return true
			}
		}
	}
	return false
}

func (s *Server) lbName(c *call) (string, error) {
	name := c.r.PathValue("name")
	return name, api.ValidateObjectName("name", name)
}

func (s *Server) getLoadBalancer(c *call) (int, any, error) {
	name, err := s.lbName(c)
	if err != nil {
		return 0, nil, err
	}
	lb, err := s.store.GetLoadBalancer(c.r.Context(), name)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, s.withStatus(lb), nil
}

func (s *Server) listLoadBalancers(c *call) (int, any, error) {
	q, err := query(c, "cluster")
	if err != nil {
		return 0, nil, err
	}
	lbs, err := s.store.ListLoadBalancers(c.r.Context())
	if err != nil {
		return 0, nil, err
	}
	list := api.LoadBalancerList{Items: []api.LoadBalancer{}}
	for _, lb := range lbs {
		if cluster, ok := q["cluster"]; ok && lb.Spec.ClusterName != cluster {
			continue
		}
		list.Items = append(list.Items, s.withStatus(lb))
	}
	return http.StatusOK, list, nil
}

func sameSpec(a, b *api.LoadBalancerSpec) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

func (s *Server) ensureLoadBalancer(c *call) (int, any, error) {
	name, err := s.lbName(c)
	if err != nil {
		return 0, nil, err
	}
	var spec api.LoadBalancerSpec
	if err := decode(c, "spec", &spec); err != nil {
		return 0, nil, err
	}
	if err := spec.Validate(); err != nil {
		return 0, nil, err
	}
	if err := s.checkPlane(&spec); err != nil {
		return 0, nil, err
	}
	if err := s.checkBackends("spec.backends", spec.Backends); err != nil {
		return 0, nil, err
	}
	if spec.Backends == nil {
		spec.Backends = []api.Backend{}
	}
	var requested netip.Addr
	if spec.RequestedIP != "" {
		requested, err = netip.ParseAddr(spec.RequestedIP)
		if err != nil {
			return 0, nil, invalid("spec.requestedIP", "%q is not an IP address", spec.RequestedIP)
		}
		requested = requested.Unmap()
		if !s.cfg.VIPPool.Contains(requested) {
			return 0, nil, invalid("spec.requestedIP", "%s is outside the VIP pool %s", requested, s.cfg.VIPPool)
		}
		if s.reservedVIP(requested) {
			return 0, nil, invalid("spec.requestedIP", "%s is the machine's own source address for VIP traffic, never a VIP", requested)
		}
	}

	ctx := c.r.Context()
	defer s.lbs.Lock(name)()
	old, err := s.store.GetLoadBalancer(ctx, name)
	exists := err == nil
	if err != nil && !isNotFound(err) {
		return 0, nil, err
	}

	var vip netip.Addr
	switch {
	case requested.IsValid():
		release, err := s.claimVIP(ctx, name, requested)
		if err != nil {
			return 0, nil, err
		}
		defer release()
		vip = requested
	case exists && s.inPool(old.Status.VIP):
		vip, err = netip.ParseAddr(old.Status.VIP)
		if err != nil {
			return 0, nil, fmt.Errorf("stored load balancer %s has a bad VIP: %w", name, err)
		}
	default:
		// A new load balancer, or one whose VIP the pool (changed since) no longer has.
		var prev *api.LoadBalancer
		if exists {
			prev = &old
		}
		return s.createWithFreeVIP(c, name, spec, prev)
	}

	if exists && old.Status.VIP == vip.String() && sameSpec(&old.Spec, &spec) && s.dpError(name) == "" {
		return http.StatusOK, s.written(c, old), nil
	}
	now := time.Now().UTC()
	lb := api.LoadBalancer{Name: name, Spec: spec, Status: api.LoadBalancerStatus{VIP: vip.String()}, CreatedAt: now, UpdatedAt: now}
	if exists {
		lb.CreatedAt = old.CreatedAt
	}
	if err := s.apply(c, lb); err != nil {
		return 0, nil, err
	}
	status := http.StatusOK
	if !exists {
		status = http.StatusCreated
	}
	return status, s.written(c, lb), nil
}

// claimVIP claims vip for load balancer name until the returned release is called:
// it fails with a conflict when another load balancer holds vip or is about to. The
// store's write checks the owner again; the claim keeps a second request from opening
// listeners on an address the first is about to store.
func (s *Server) claimVIP(ctx context.Context, name string, vip netip.Addr) (release func(), err error) {
	s.vipMu.Lock()
	defer s.vipMu.Unlock()
	owner, err := s.store.VIPOwner(ctx, vip)
	if err != nil {
		return nil, err
	}
	if other, ok := s.claimed[vip]; ok && owner == "" {
		owner = other
	}
	if owner != "" && owner != name {
		return nil, errorf(http.StatusConflict, api.ReasonConflict, "requested VIP %s belongs to load balancer %s", vip, owner)
	}
	return s.claim(name, vip), nil
}

// claimFreeVIP claims the lowest free address of the pool that no load balancer holds
// or is about to, and skip does not reject, until the returned release is called.
func (s *Server) claimFreeVIP(ctx context.Context, name string, skip func(netip.Addr) bool) (vip netip.Addr, release func(), err error) {
	s.vipMu.Lock()
	defer s.vipMu.Unlock()
	vip, err = s.store.FreeVIP(ctx, s.cfg.VIPPool, func(a netip.Addr) bool {
		_, taken := s.claimed[a]
		return taken || skip(a) || s.reservedVIP(a)
	})
	if err != nil {
		return netip.Addr{}, nil, err
	}
	return vip, s.claim(name, vip), nil
}

// claim records vip as name's; called with vipMu held.
func (s *Server) claim(name string, vip netip.Addr) (release func()) {
	s.claimed[vip] = name
	return func() {
		s.vipMu.Lock()
		defer s.vipMu.Unlock()
		if s.claimed[vip] == name {
			delete(s.claimed, vip)
		}
	}
}

// maxVIPAttempts bounds how many pool addresses a new load balancer tries when other
// processes on the machine hold its ports there.
const maxVIPAttempts = 16

// createWithFreeVIP creates load balancer name on a free VIP. The pool is on the
// machine's loopback range, which other programs (another local cloud, a test) may use
// too: an address whose ports something else holds is skipped, as a cloud would never
// hand out an address it cannot serve. prev, when set, is the load balancer as stored,
// on a VIP its pool no longer has. Called with name's lock held.
func (s *Server) createWithFreeVIP(c *call, name string, spec api.LoadBalancerSpec, prev *api.LoadBalancer) (int, any, error) {
	busy := map[netip.Addr]bool{}
	var lastConflict error
	for {
		vip, release, err := s.claimFreeVIP(c.r.Context(), name, func(a netip.Addr) bool { return busy[a] })
		if err != nil && lastConflict != nil {
			// The pool is not full of load balancers: say what took the rest.
			return 0, nil, fmt.Errorf("%w (%d addresses skipped because other programs hold their ports, the last: %v)", err, len(busy), lastConflict)
		}
		if err != nil {
			return 0, nil, err
		}
		now := time.Now().UTC()
		lb := api.LoadBalancer{Name: name, Spec: spec, Status: api.LoadBalancerStatus{VIP: vip.String()}, CreatedAt: now, UpdatedAt: now}
		status := http.StatusCreated
		if prev != nil {
			lb.CreatedAt, status = prev.CreatedAt, http.StatusOK
		}
		err = s.apply(c, lb)
		release()
		var conflict *dataplane.ConflictError
		if errors.As(err, &conflict) && len(busy) < maxVIPAttempts-1 {
			s.log.Info("VIP in use by another program, trying the next", "vip", vip, "loadBalancer", name, "conflict", conflict.Error())
			busy[vip] = true
			lastConflict = conflict
			continue
		}
		if err != nil {
			return 0, nil, err
		}
		return status, s.written(c, lb), nil
	}
}

// apply opens lb's listeners and stores lb, both or neither. Called with lb's lock held.
func (s *Server) apply(c *call, lb api.LoadBalancer) error {
	dp, err := toDataPlane(&lb)
	if err != nil {
		return err
	}
	ctx := c.r.Context()
	if err := s.plane.Apply(ctx, dp, func() error { return s.store.PutLoadBalancer(ctx, lb) }); err != nil {
		return err
	}
	s.setDPError(lb.Name, nil)
	return nil
}

// checkBackends refuses a backend that is no instance's address: the data planes send a
// VIP's traffic to its backends (the kernel routes it, the proxy connects), and a
// backend anywhere else would have the cloud forward to the machine's own services or to
// networks that are none of the cloud's. The addresses are valid IPs
// (api.ValidateBackends ran first); one that is not is refused all the same.
func (s *Server) checkBackends(field string, backends []api.Backend) error {
	for i, b := range backends {
		a, _ := netip.ParseAddr(b.Address)
		if !s.instanceAddr(a.Unmap()) {
			return invalid(fmt.Sprintf("%s[%d].address", field, i), "%s is no instance's address: want one of the instance range %s but its network, broadcast and bridge addresses", b.Address, s.cfg.InstanceCIDR)
		}
	}
	return nil
}

// instanceAddr reports whether a can be an instance's address. With hosts it is one the
// machine routes to a host (hosts.Machine.Routable); without, one nthAddr can hand out.
func (s *Server) instanceAddr(a netip.Addr) bool {
	if s.machine != nil {
		return s.machine.Routable(a)
	}
	return s.cfg.InstanceCIDR.Contains(a) && !reservedInRange(s.cfg.InstanceCIDR, a)
}

func (s *Server) updateBackends(c *call) (int, any, error) {
	name, err := s.lbName(c)
	if err != nil {
		return 0, nil, err
	}
	var upd api.BackendsUpdate
	if err := decode(c, "", &upd); err != nil {
		return 0, nil, err
	}
	if err := api.ValidateBackends("backends", upd.Backends); err != nil {
		return 0, nil, err
	}
	if err := s.checkBackends("backends", upd.Backends); err != nil {
		return 0, nil, err
	}
	if upd.Backends == nil {
		upd.Backends = []api.Backend{}
	}
	defer s.lbs.Lock(name)()
	lb, err := s.store.GetLoadBalancer(c.r.Context(), name)
	if err != nil {
		return 0, nil, err
	}
	lb.Spec.Backends = upd.Backends
	lb.UpdatedAt = time.Now().UTC()
	if err := s.apply(c, lb); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, s.written(c, lb), nil
}

func (s *Server) deleteLoadBalancer(c *call) (int, any, error) {
	name, err := s.lbName(c)
	if err != nil {
		return 0, nil, err
	}
	defer s.lbs.Lock(name)()
	if _, err := s.store.DeleteLoadBalancer(c.r.Context(), name); err != nil {
		return 0, nil, err
	}
	if err := s.plane.Remove(c.r.Context(), name); err != nil {
		// The load balancer is gone from the state; the data plane retries.
		s.log.Error(err, "removing a load balancer from the data plane", "loadbalancer", name)
	}
	s.setDPError(name, nil)
	return http.StatusNoContent, nil, nil
}

// checkPlane refuses what the data plane cannot serve: the proxy forwards to node ports,
// so every port needs one.
func (s *Server) checkPlane(spec *api.LoadBalancerSpec) error {
	if s.ipMode != api.IPModeProxy {
		return nil
	}
	for i, p := range spec.Ports {
		if p.NodePort == 0 {
			return invalid(fmt.Sprintf("spec.ports[%d].nodePort", i), "0: this local cloud's load balancers are user-space proxies to node ports (VIPs on %s); "+
				"a Service without node ports (allocateLoadBalancerNodePorts: false) needs a cloud with host instances and a VIP pool outside 127.0.0.0/8, whose load balancers route to the nodes", s.cfg.VIPPool)
		}
	}
	return nil
}

// reservedVIP reports whether a of the pool is not for load balancers: the kernel data
// plane's source address.
func (s *Server) reservedVIP(a netip.Addr) bool {
	return s.machine != nil && s.machine.VIPSource() == a
}

// inPool reports whether a stored VIP is an address of the current pool.
func (s *Server) inPool(vip string) bool {
	a, err := netip.ParseAddr(vip)
	return err == nil && s.cfg.VIPPool.Contains(a.Unmap()) && !s.reservedVIP(a.Unmap())
}

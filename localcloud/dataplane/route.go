package dataplane

import (
	"hash/fnv"
	"net/netip"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// route is where one listener sends traffic, swapped atomically on every Apply.
type route struct {
	lb      string
	allow   []netip.Prefix
	targets []*target
	// affinity keeps a client address on one backend.
	affinity bool
}

// target is one backend of one listener.
type target struct {
	node   string
	addr   netip.AddrPort
	health *healthState // nil: nothing checks it, count it healthy
}

func routeFor(lb LoadBalancer, port Port, states map[probe]*healthState) *route {
	r := &route{lb: lb.Name, allow: lb.SourceRanges, targets: make([]*target, 0, len(lb.Backends)), affinity: lb.AffinityTimeout > 0}
	for _, b := range lb.Backends {
		t := &target{node: b.NodeName, addr: netip.AddrPortFrom(b.Addr, port.NodePort)}
		if pr, ok := listenerProbe(lb, port, b); ok && states != nil {
			t.health = states[pr]
		}
		r.targets = append(r.targets, t)
	}
	return r
}

// candidates returns the targets to try, in order: the healthy ones (or all of them
// when none is healthy) rotated to start at the round-robin position start.
func (r *route) candidates(start uint64) []*target {
	healthy := make([]*target, 0, len(r.targets))
	for _, t := range r.targets {
		if t.health == nil || t.health.get() != HealthUnhealthy {
			healthy = append(healthy, t)
		}
	}
	if len(healthy) == 0 {
		healthy = r.targets
	}
	n := uint64(len(healthy))
	out := make([]*target, 0, n)
	for i := range n {
		out = append(out, healthy[(start+i)%n])
	}
	return out
}

// start returns where a client's round through the candidates starts: the next
// round-robin position, or with affinity a hash of the client's address, so its
// connections go to one backend while the healthy set stays the same.
func (r *route) start(client netip.Addr, rr *atomic.Uint64) uint64 {
	if !r.affinity {
		return rr.Add(1) - 1
	}
	h := fnv.New64a()
	a := client.Unmap().As16()
	_, _ = h.Write(a[:])
	return h.Sum64()
}

// has reports whether addr is still one of the route's targets.
func (r *route) has(addr netip.AddrPort) bool {
	for _, t := range r.targets {
		if t.addr == addr {
			return true
		}
	}
	return false
}

// Reasons a client is refused, for the rejected counter.
const (
	reasonSourceRange = "source_range"
	reasonNoBackend   = "no_backend"
)

type metrics struct {
	connections *prometheus.CounterVec
	rejected    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		connections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "localcloud_lb_connections_total",
			Help: "TCP connections and UDP sessions forwarded to a backend, per load balancer and protocol.",
		}, []string{"loadbalancer", "protocol"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "localcloud_lb_rejected_total",
			Help: "TCP connections and UDP datagrams refused, per load balancer, protocol and reason (source_range, no_backend).",
		}, []string{"loadbalancer", "protocol", "reason"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.connections, m.rejected} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) forget(lb string) {
	m.connections.DeletePartialMatch(prometheus.Labels{"loadbalancer": lb})
	m.rejected.DeletePartialMatch(prometheus.Labels{"loadbalancer": lb})
}

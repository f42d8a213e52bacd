package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/nephele-dev/nephele/localcloud/keylock"
)

// Proxy is the user-space data plane: it listens on VIP:port for every load balancer
// port and forwards TCP connections and UDP datagrams to a backend's address:nodePort,
// so the backends see the proxy's address as the client (ipMode Proxy). It needs no
// privilege: VIPs on the loopback range are bound as an ordinary user. It is safe for
// concurrent use.
type Proxy struct {
	cfg     Config
	log     logr.Logger
	metrics *metrics
	ctx     context.Context
	cancel  context.CancelFunc

	// names serializes Apply and Remove of one load balancer; different load
	// balancers change in parallel.
	names keylock.Locks
	// mu guards lbs and closed, and is never held across I/O.
	mu     sync.Mutex
	lbs    map[string]*lbState
	closed bool
}

// lbState is one running load balancer.
type lbState struct {
	lb        LoadBalancer
	listeners map[listenerKey]listener
	checker   *checker // nil when health checks are disabled
}

type listenerKey struct {
	proto Protocol
	port  uint16
}

// listener is a TCP or UDP proxy on one VIP:port.
type listener interface {
	// serve starts forwarding; it returns at once.
	serve()
	// setRoute replaces where traffic goes and who may send it.
	setRoute(r *route)
	// close stops the listener and every connection or session it carries.
	close()
}

// NewProxy returns a Proxy. Call Close to stop it.
func NewProxy(cfg Config) (*Proxy, error) {
	cfg.defaults()
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Proxy{cfg: cfg, log: cfg.Logger, metrics: m, ctx: ctx, cancel: cancel, lbs: map[string]*lbState{}}, nil
}

// Apply makes lb live, replacing its previous configuration: it opens the listeners
// lb needs that are not open yet, calls commit, and only when commit returns nil
// switches traffic to the new configuration and closes listeners lb no longer has.
// When a listener cannot be opened (*ConflictError if its address is in use) or commit
// fails, every listener opened by this call is closed and the previous configuration
// keeps serving. commit may be nil.
func (p *Proxy) Apply(ctx context.Context, lb LoadBalancer, commit func() error) error {
	defer p.names.Lock(lb.Name)()
	p.mu.Lock()
	closed, old := p.closed, p.lbs[lb.Name]
	p.mu.Unlock()
	if closed {
		return errors.New("data plane is closed")
	}
	next := &lbState{lb: lb, listeners: make(map[listenerKey]listener, len(lb.Ports))}
	var opened []listener
	abort := func() {
		for _, l := range opened {
			l.close()
		}
	}
	for _, port := range lb.Ports {
		k := listenerKey{port.Protocol, port.Port}
		if old != nil && old.lb.VIP == lb.VIP {
			if l, ok := old.listeners[k]; ok {
				next.listeners[k] = l
				continue
			}
		}
		l, err := p.open(ctx, lb.Name, netip.AddrPortFrom(lb.VIP, port.Port), port.Protocol)
		if err != nil {
			abort()
			return err
		}
		opened = append(opened, l)
		next.listeners[k] = l
	}
	if commit != nil {
		if err := commit(); err != nil {
			abort()
			return err
		}
	}

	// Committed: from here on nothing fails.
	if old != nil {
		next.checker = old.checker
	}
	if !p.cfg.DisableHealthChecks && next.checker == nil {
		next.checker = newChecker(p.ctx, p.cfg.HealthInterval, p.cfg.HealthTimeout, nil)
	}
	var states map[probe]*healthState
	if next.checker != nil {
		states = next.checker.setProbes(probesFor(lb))
	}
	for _, port := range lb.Ports {
		next.listeners[listenerKey{port.Protocol, port.Port}].setRoute(routeFor(lb, port, states))
	}
	p.mu.Lock()
	if p.closed {
		// Close ran meanwhile and stopped what the map held, old included; what this
		// call opened is not in it yet.
		p.mu.Unlock()
		next.stop()
		return nil
	}
	p.lbs[lb.Name] = next
	p.mu.Unlock()
	for _, l := range opened {
		l.serve()
	}
	if old != nil {
		for k, l := range old.listeners {
			if next.listeners[k] != l {
				l.close()
			}
		}
	}
	p.log.V(2).Info("load balancer applied", "name", lb.Name, "vip", lb.VIP, "ports", len(lb.Ports), "backends", len(lb.Backends))
	return nil
}

// open binds a listener without serving it yet.
func (p *Proxy) open(ctx context.Context, lbName string, addr netip.AddrPort, proto Protocol) (listener, error) {
	var lc net.ListenConfig
	var err error
	switch proto {
	case TCP:
		var ln net.Listener
		if ln, err = lc.Listen(ctx, "tcp", addr.String()); err == nil {
			return newTCPListener(p, lbName, ln.(*net.TCPListener)), nil
		}
	case UDP:
		var pc net.PacketConn
		if pc, err = lc.ListenPacket(ctx, "udp", addr.String()); err == nil {
			return newUDPListener(p, lbName, pc.(*net.UDPConn)), nil
		}
	default:
		return nil, fmt.Errorf("load balancer %s: protocol %q is not supported", lbName, proto)
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, &ConflictError{Protocol: proto, Addr: addr, Err: err}
	}
	return nil, fmt.Errorf("load balancer %s: listening on %s %s: %w", lbName, proto, addr, err)
}

// Remove stops the named load balancer: its listeners close and the connections and
// sessions through them end. Removing an unknown name does nothing. It never fails.
func (p *Proxy) Remove(_ context.Context, name string) error {
	defer p.names.Lock(name)()
	p.mu.Lock()
	st := p.lbs[name]
	delete(p.lbs, name)
	p.mu.Unlock()
	if st == nil {
		return nil
	}
	st.stop()
	p.metrics.forget(name)
	p.log.V(2).Info("load balancer removed", "name", name)
	return nil
}

func (st *lbState) stop() {
	for _, l := range st.listeners {
		l.close()
	}
	if st.checker != nil {
		st.checker.stop()
	}
}

// Health returns the health of each backend of the named load balancer, in backend
// order, and false when the load balancer is not running. A backend is unhealthy when
// any of its checks fails, healthy when all pass, and unknown before the first check,
// when checks are disabled, or when it has nothing to check (UDP only).
func (p *Proxy) Health(name string) ([]BackendHealth, bool) {
	p.mu.Lock()
	st := p.lbs[name]
	p.mu.Unlock()
	if st == nil {
		return nil, false
	}
	return backendsHealth(st.lb, st.checker, nil), true
}

// Close stops every load balancer and health check.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	lbs := p.lbs
	p.lbs = map[string]*lbState{}
	p.mu.Unlock()
	p.cancel()
	for _, st := range lbs {
		st.stop()
	}
}

// allowed reports whether a client address passes the source ranges.
func allowed(ranges []netip.Prefix, a netip.Addr) bool {
	if len(ranges) == 0 {
		return true
	}
	a = a.Unmap()
	for _, r := range ranges {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

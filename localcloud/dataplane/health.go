package dataplane

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// maxConcurrentProbes bounds the probes one load balancer runs at once, so a load
// balancer with thousands of unreachable backends does not open thousands of sockets.
const maxConcurrentProbes = 32

type probeKind int

const (
	probeTCP  probeKind = iota // connect to the address
	probeHTTP                  // GET /healthz, 2xx is healthy
)

// probe is one health check target. Probes are shared by the listeners of a load
// balancer: with a health check node port every port of a backend uses the same one.
type probe struct {
	kind probeKind
	addr netip.AddrPort
}

// listenerProbe returns the probe deciding whether backend b takes traffic on port.
func listenerProbe(lb LoadBalancer, port Port, b Backend) (probe, bool) {
	if lb.HealthCheckNodePort != 0 {
		return probe{probeHTTP, netip.AddrPortFrom(b.Addr, lb.HealthCheckNodePort)}, true
	}
	if port.Protocol == TCP && port.NodePort != 0 {
		return probe{probeTCP, netip.AddrPortFrom(b.Addr, port.NodePort)}, true
	}
	return probe{}, false // a UDP port cannot be probed, nor a port without a node port
}

// backendProbes returns the distinct probes of one backend.
func backendProbes(lb LoadBalancer, b Backend) []probe {
	var out []probe
	seen := map[probe]bool{}
	for _, port := range lb.Ports {
		if pr, ok := listenerProbe(lb, port, b); ok && !seen[pr] {
			seen[pr] = true
			out = append(out, pr)
		}
	}
	return out
}

func probesFor(lb LoadBalancer) []probe {
	var out []probe
	seen := map[probe]bool{}
	for _, b := range lb.Backends {
		for _, pr := range backendProbes(lb, b) {
			if !seen[pr] {
				seen[pr] = true
				out = append(out, pr)
			}
		}
	}
	return out
}

// backendHealth is the health of backend b of lb across its probes' states (nil when
// nothing checks them): unhealthy when any probe fails, healthy when all pass, unknown
// before the first round or without a probe.
func backendHealth(lb LoadBalancer, b Backend, states map[probe]*healthState) Health {
	probes := backendProbes(lb, b)
	if states == nil || len(probes) == 0 {
		return HealthUnknown
	}
	h := HealthHealthy
	for _, pr := range probes {
		s, ok := states[pr]
		switch {
		case !ok || s.get() == HealthUnknown:
			if h == HealthHealthy {
				h = HealthUnknown
			}
		case s.get() == HealthUnhealthy:
			h = HealthUnhealthy
		}
	}
	return h
}

// backendsHealth returns the health of each of lb's backends, in order, as checker (nil
// when checks are disabled) last saw them; a backend reachable (when set) says cannot be
// reached is unhealthy.
func backendsHealth(lb LoadBalancer, c *checker, reachable func(netip.Addr) bool) []BackendHealth {
	var states map[probe]*healthState
	if c != nil {
		states = c.current()
	}
	out := make([]BackendHealth, 0, len(lb.Backends))
	for _, b := range lb.Backends {
		h := HealthUnhealthy
		if reachable == nil || reachable(b.Addr) {
			h = backendHealth(lb, b, states)
		}
		out = append(out, BackendHealth{Backend: b, Health: h})
	}
	return out
}

// healthState is the last result of one probe.
type healthState struct{ v atomic.Int32 }

func (h *healthState) get() Health { return Health(h.v.Load()) }

// set records a result and reports whether the health changed.
func (h *healthState) set(ok bool) bool {
	v := int32(HealthUnhealthy)
	if ok {
		v = int32(HealthHealthy)
	}
	return h.v.Swap(v) != v
}

// checker probes one load balancer's backends every interval until stopped.
type checker struct {
	interval, timeout time.Duration
	client            *http.Client
	cancel            context.CancelFunc
	done              chan struct{}
	kick              chan struct{}
	// onChange, when set, is called after a round in which a probe's health changed.
	onChange func()

	mu     sync.Mutex
	states map[probe]*healthState // replaced, never modified, once published
}

func newChecker(parent context.Context, interval, timeout time.Duration, onChange func()) *checker {
	ctx, cancel := context.WithCancel(parent)
	c := &checker{
		interval: interval,
		timeout:  timeout,
		client: &http.Client{
			Timeout: timeout,
			// Probes go to many nodes, rarely to the same one twice in a short while.
			Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
		cancel:   cancel,
		done:     make(chan struct{}),
		kick:     make(chan struct{}, 1),
		onChange: onChange,
		states:   map[probe]*healthState{},
	}
	go c.run(ctx)
	return c
}

// setProbes sets what to check, keeping the results of probes that stay, and asks for
// a round now. It returns the new state map.
func (c *checker) setProbes(probes []probe) map[probe]*healthState {
	c.mu.Lock()
	next := make(map[probe]*healthState, len(probes))
	for _, pr := range probes {
		if s, ok := c.states[pr]; ok {
			next[pr] = s
		} else {
			next[pr] = &healthState{}
		}
	}
	c.states = next
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	return next
}

func (c *checker) current() map[probe]*healthState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.states
}

func (c *checker) stop() {
	c.cancel()
	<-c.done
	c.client.CloseIdleConnections()
}

func (c *checker) run(ctx context.Context) {
	defer close(c.done)
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.kick:
		}
		c.round(ctx)
	}
}

// round probes everything once.
func (c *checker) round(ctx context.Context) {
	states := c.current()
	sem := make(chan struct{}, maxConcurrentProbes)
	var wg sync.WaitGroup
	var changed atomic.Bool
	defer func() {
		if changed.Load() && c.onChange != nil && ctx.Err() == nil {
			c.onChange()
		}
	}()
	for pr, st := range states {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ok := c.check(ctx, pr)
			if ctx.Err() == nil && st.set(ok) {
				changed.Store(true)
			}
		}()
	}
	wg.Wait()
}

func (c *checker) check(ctx context.Context, pr probe) bool {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	switch pr.kind {
	case probeHTTP:
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pr.addr.String()+"/healthz", nil)
		if err != nil {
			return false
		}
		resp, err := c.client.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode >= 200 && resp.StatusCode < 300
	default:
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", pr.addr.String())
		if err != nil {
			return false
		}
		_ = conn.Close()
		return true
	}
}

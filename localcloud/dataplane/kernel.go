package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/nephele-dev/nephele/localcloud/hosts"
	"github.com/nephele-dev/nephele/localcloud/keylock"
)

// Programmer writes the machine's load balancer rules: *hosts.Machine of a cloud with a
// VIP pool.
type Programmer interface {
	// SetLoadBalancers makes the machine's load balancers exactly lbs.
	SetLoadBalancers(ctx context.Context, lbs []hosts.LoadBalancer) error
	// CheckLoadBalancer says why lb cannot be programmed, nil when it can.
	CheckLoadBalancer(lb hosts.LoadBalancer) error
	// Routable reports whether connections can be sent to a backend's address.
	Routable(addr netip.Addr) bool
}

// Kernel is the data plane of a cloud whose instances are hosts on its machine: the
// kernel sends each new connection to a VIP, unchanged (its destination still the VIP,
// its source the client), to one backend host chosen among the healthy ones, where
// kube-proxy serves the VIP as an ingress IP of ipMode VIP (package hosts, vip.go, says
// how). Health checks run here, as in the Proxy; every change of a backend's health
// programs the machine again. A failed programming is retried in the background. It is
// safe for concurrent use.
type Kernel struct {
	cfg    Config
	log    logr.Logger
	prog   Programmer
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// kick asks the background loop to program the machine.
	kick chan struct{}

	// names serializes Apply and Remove of one load balancer.
	names keylock.Locks
	// syncMu serializes programming; each programming reads the load balancers after
	// taking it, so a later one never writes an older set.
	syncMu sync.Mutex
	// mu guards lbs and closed, and is never held across I/O.
	mu     sync.Mutex
	lbs    map[string]*kernelLB
	closed bool
}

// kernelLB is one load balancer of the Kernel plane.
type kernelLB struct {
	lb      LoadBalancer
	checker *checker // nil when health checks are disabled
	// programmed is the backends' health the machine was last programmed with, nil
	// before the first programming of lb. Health reports it, so that the cloud never
	// says a backend is out before the kernel has stopped sending to it.
	programmed []BackendHealth
}

// NewKernel returns a Kernel programming prog. Call Sync once the load balancers the
// cloud already has are applied, so that rules of load balancers gone since the last run
// are removed, and Close to stop it.
func NewKernel(cfg Config, prog Programmer) (*Kernel, error) {
	if prog == nil {
		return nil, errors.New("the kernel data plane needs a machine to program")
	}
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	k := &Kernel{cfg: cfg, log: cfg.Logger, prog: prog, ctx: ctx, cancel: cancel,
		done: make(chan struct{}), kick: make(chan struct{}, 1), lbs: map[string]*kernelLB{}}
	go k.run()
	return k, nil
}

// maxSyncBackoff bounds the wait before a failed programming is tried again.
const maxSyncBackoff = 30 * time.Second

// run programs the machine whenever asked (a health change, a failed Apply or Remove),
// retrying failures with a backoff.
func (k *Kernel) run() {
	defer close(k.done)
	var backoff time.Duration
	for {
		var retry <-chan time.Time
		if backoff > 0 {
			retry = time.After(backoff)
		}
		select {
		case <-k.ctx.Done():
			return
		case <-k.kick:
		case <-retry:
		}
		if err := k.Sync(k.ctx); err != nil {
			if k.ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, time.Second), maxSyncBackoff)
			k.log.Error(err, "programming the load balancers; trying again", "retryIn", backoff)
			continue
		}
		backoff = 0
	}
}

// poke asks the background loop to program the machine.
func (k *Kernel) poke() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// Sync programs the machine with every load balancer as it is now.
func (k *Kernel) Sync(ctx context.Context) error {
	k.syncMu.Lock()
	defer k.syncMu.Unlock()
	k.mu.Lock()
	lbs := make([]hosts.LoadBalancer, 0, len(k.lbs))
	health := make(map[*kernelLB][]BackendHealth, len(k.lbs))
	for _, st := range k.lbs {
		h := backendsHealth(st.lb, st.checker, k.prog.Routable)
		health[st] = h
		lbs = append(lbs, k.machineLB(st, h))
	}
	k.mu.Unlock()
	if err := k.prog.SetLoadBalancers(ctx, lbs); err != nil {
		return err
	}
	k.mu.Lock()
	for st, h := range health {
		if k.lbs[st.lb.Name] == st {
			st.programmed = h
		}
	}
	k.mu.Unlock()
	return nil
}

// machineLB is what the machine programs for a load balancer: its routable backends, and
// as targets those not known to be unhealthy (or all of them when none is left, as cloud
// load balancers fail open).
func (k *Kernel) machineLB(st *kernelLB, health []BackendHealth) hosts.LoadBalancer {
	out := toMachine(st.lb)
	for _, b := range health {
		if !k.prog.Routable(b.Backend.Addr) || slices.Contains(out.Backends, b.Backend.Addr) {
			continue
		}
		out.Backends = append(out.Backends, b.Backend.Addr)
		if b.Health != HealthUnhealthy {
			out.Targets = append(out.Targets, b.Backend.Addr)
		}
	}
	if len(out.Targets) == 0 {
		out.Targets = out.Backends
	}
	return out
}

// toMachine maps a load balancer but its backends.
func toMachine(lb LoadBalancer) hosts.LoadBalancer {
	out := hosts.LoadBalancer{Name: lb.Name, VIP: lb.VIP, SourceRanges: lb.SourceRanges, AffinityTimeout: lb.AffinityTimeout}
	for _, p := range lb.Ports {
		proto := hosts.ProtocolTCP
		if p.Protocol == UDP {
			proto = hosts.ProtocolUDP
		}
		out.Ports = append(out.Ports, hosts.LoadBalancerPort{Protocol: proto, Port: p.Port})
	}
	return out
}

// routable returns lb with only the backends the machine can send to: those are
// health-checked.
func (k *Kernel) routable(lb LoadBalancer) LoadBalancer {
	lb.Backends = slices.DeleteFunc(slices.Clone(lb.Backends), func(b Backend) bool { return !k.prog.Routable(b.Addr) })
	return lb
}

// Apply makes lb live, replacing its previous configuration: it programs the machine
// with it, then calls commit; when either fails, the previous configuration is
// programmed again. Backends the machine cannot send to are left out (Health reports them
// unhealthy); a port needs no node port.
func (k *Kernel) Apply(ctx context.Context, lb LoadBalancer, commit func() error) error {
	defer k.names.Lock(lb.Name)()
	for _, p := range lb.Ports {
		if p.Protocol != TCP && p.Protocol != UDP {
			return fmt.Errorf("load balancer %s: protocol %q is not supported", lb.Name, p.Protocol)
		}
	}
	if err := k.prog.CheckLoadBalancer(toMachine(lb)); err != nil {
		return err
	}
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return errors.New("data plane is closed")
	}
	old := k.lbs[lb.Name]
	next := &kernelLB{lb: lb}
	created := false
	if old != nil {
		next.checker = old.checker
	} else if !k.cfg.DisableHealthChecks {
		next.checker = newChecker(k.ctx, k.cfg.HealthInterval, k.cfg.HealthTimeout, k.poke)
		created = true
	}
	k.lbs[lb.Name] = next
	k.mu.Unlock()
	if next.checker != nil {
		next.checker.setProbes(probesFor(k.routable(lb)))
	}
	err := k.Sync(ctx)
	if err == nil && commit != nil {
		err = commit()
	}
	if err == nil {
		k.log.V(2).Info("load balancer applied", "name", lb.Name, "vip", lb.VIP, "ports", len(lb.Ports), "backends", len(lb.Backends))
		return nil
	}
	k.mu.Lock()
	if old != nil {
		k.lbs[lb.Name] = old
	} else {
		delete(k.lbs, lb.Name)
	}
	k.mu.Unlock()
	switch {
	case created:
		next.checker.stop()
	case old != nil && old.checker != nil:
		old.checker.setProbes(probesFor(k.routable(old.lb)))
	}
	if serr := k.Sync(ctx); serr != nil {
		k.poke()
	}
	return err
}

// Remove stops the named load balancer: new connections to it are refused, and those
// in flight are reset. When the machine cannot be programmed, the load balancer is gone
// here all the same and the programming is retried in the background; the error says so.
func (k *Kernel) Remove(ctx context.Context, name string) error {
	defer k.names.Lock(name)()
	k.mu.Lock()
	st := k.lbs[name]
	delete(k.lbs, name)
	k.mu.Unlock()
	if st == nil {
		return nil
	}
	if st.checker != nil {
		st.checker.stop()
	}
	if err := k.Sync(ctx); err != nil {
		k.poke()
		return fmt.Errorf("load balancer %s: removing its rules from the machine (retried in the background): %w", name, err)
	}
	k.log.V(2).Info("load balancer removed", "name", name)
	return nil
}

// Health returns the health of each backend of the named load balancer, in backend
// order, and false when the load balancer is not running. A backend the machine cannot
// send to is unhealthy.
func (k *Kernel) Health(name string) ([]BackendHealth, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.lbs[name]
	if st == nil {
		return nil, false
	}
	if st.programmed != nil {
		return slices.Clone(st.programmed), true
	}
	// Not programmed yet (Apply is under way): nothing is known that the machine acts on.
	out := make([]BackendHealth, 0, len(st.lb.Backends))
	for _, b := range st.lb.Backends {
		out = append(out, BackendHealth{Backend: b, Health: HealthUnknown})
	}
	return out, true
}

// Close stops the health checks and the background programming. The rules stay on the
// machine, which removes them when it is closed (or keeps them for the next start when
// it is released).
func (k *Kernel) Close() {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	// The loop first: it must not program the machine with the empty set below.
	k.cancel()
	<-k.done
	k.mu.Lock()
	lbs := k.lbs
	k.lbs = map[string]*kernelLB{}
	k.mu.Unlock()
	for _, st := range lbs {
		if st.checker != nil {
			st.checker.stop()
		}
	}
}

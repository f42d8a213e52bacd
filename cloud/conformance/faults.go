package conformance

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"
)

// op is one call of the contract, made against a given provider: the suite makes
// every call of every claimed capability while the cloud misbehaves.
type op struct {
	name  string
	needs Capability
	do    func(ctx context.Context, p cloud.Provider) error
}

// ops returns one call per operation of the claimed capabilities. Their arguments are
// fixed before any fault is induced: test instances are never created under a fault.
func (s *suite) ops(ctx context.Context) []op {
	nodeName, providerID := s.nameFor("missing"), cloud.ProviderID{Provider: s.name, ID: s.nameFor("missing")}.String()
	if f := s.fixtures["a"]; f != nil && f.err == nil && f.meta != nil && !f.deleted {
		nodeName, providerID = f.nodeName, f.meta.ProviderID
	}
	var out []op
	if s.instances != nil {
		out = append(out,
			op{"InstanceMetadata by provider ID", Instances, func(ctx context.Context, p cloud.Provider) error {
				in, _ := p.Instances()
				_, err := in.InstanceMetadata(ctx, nodeByProviderID(nodeName, providerID))
				return err
			}},
			op{"InstanceMetadata by node name", Instances, func(ctx context.Context, p cloud.Provider) error {
				in, _ := p.Instances()
				_, err := in.InstanceMetadata(ctx, nodeByName(nodeName))
				return err
			}})
	}
	if s.lister != nil {
		out = append(out, op{"ListInstances", InstanceLister, func(ctx context.Context, p cloud.Provider) error {
			l, _ := p.InstanceLister()
			_, err := l.ListInstances(ctx)
			return err
		}})
	}
	if s.lbs != nil {
		spec, svc := s.lbSpec("lb-fault", s.backends(ctx))
		s.noteLB(spec.Name)
		lbOp := func(name string, f func(ctx context.Context, l cloud.LoadBalancers, spec *cloud.LoadBalancerSpec, svc *corev1.Service) error) op {
			return op{name, LoadBalancers, func(ctx context.Context, p cloud.Provider) error {
				l, _ := p.LoadBalancers()
				return f(ctx, l, spec, svc)
			}}
		}
		out = append(out,
			lbOp("GetLoadBalancer", func(ctx context.Context, l cloud.LoadBalancers, spec *cloud.LoadBalancerSpec, svc *corev1.Service) error {
				_, err := l.GetLoadBalancer(ctx, spec, svc)
				return err
			}),
			lbOp("EnsureLoadBalancer", func(ctx context.Context, l cloud.LoadBalancers, spec *cloud.LoadBalancerSpec, svc *corev1.Service) error {
				_, err := l.EnsureLoadBalancer(ctx, spec, svc)
				return err
			}),
			lbOp("UpdateLoadBalancerBackends", func(ctx context.Context, l cloud.LoadBalancers, spec *cloud.LoadBalancerSpec, svc *corev1.Service) error {
				return l.UpdateLoadBalancerBackends(ctx, spec, svc)
			}),
			lbOp("EnsureLoadBalancerDeleted", func(ctx context.Context, l cloud.LoadBalancers, spec *cloud.LoadBalancerSpec, svc *corev1.Service) error {
				return l.EnsureLoadBalancerDeleted(ctx, spec, svc)
			}))
	}
	if s.routes != nil {
		r, hint := s.testRoute(ctx, 9)
		cluster := s.cfg.ClusterName
		out = append(out,
			op{"ListRoutes", Routes, func(ctx context.Context, p cloud.Provider) error {
				rs, _ := p.Routes()
				_, err := rs.ListRoutes(ctx, cluster)
				return err
			}},
			op{"CreateRoute", Routes, func(ctx context.Context, p cloud.Provider) error {
				rs, _ := p.Routes()
				return rs.CreateRoute(ctx, cluster, hint, r)
			}},
			op{"DeleteRoute", Routes, func(ctx context.Context, p cloud.Provider) error {
				rs, _ := p.Routes()
				return rs.DeleteRoute(ctx, cluster, r)
			}})
	}
	return out
}

// hasCapability reports whether p reports capability c with an implementation.
func hasCapability(p cloud.Provider, c Capability) bool {
	switch c {
	case Instances:
		v, ok := p.Instances()
		return ok && v != nil
	case InstanceLister:
		v, ok := p.InstanceLister()
		return ok && v != nil
	case LoadBalancers:
		v, ok := p.LoadBalancers()
		return ok && v != nil
	case Routes:
		v, ok := p.Routes()
		return ok && v != nil
	}
	return false
}

// withFault induces fault, runs fn against the faulty provider and ends the fault.
func (c *checker) withFault(name string, fault Fault, ops []op, fn func(p cloud.Provider)) {
	if fault == nil {
		c.skipf("the setup cannot make the cloud %s (Setup.%s is nil)", map[string]string{"Failing": "fail", "Throttling": "throttle", "Slow": "slow"}[name], name)
		return
	}
	if len(ops) == 0 {
		c.skipf("the provider claims no capability")
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.CallTimeout)
	defer cancel()
	type induced struct {
		p   cloud.Provider
		end func(context.Context) error
	}
	got, err := within(ctx, c.s.cfg.CancelBound, func(ctx context.Context) (induced, error) {
		p, end, err := fault(ctx, c.s.provider)
		return induced{p, end}, err
	})
	// End the fault whatever happened next: a setup that failed half-way returns the
	// end that undoes what it did so far.
	defer func() {
		if got.end == nil {
			return
		}
		if err := do(c, got.end); err != nil {
			c.errorf("ending the fault (Setup.%s): %v; the checks that follow see a faulty cloud", name, err)
		}
	}()
	switch {
	case err != nil:
		c.errorf("the setup could not induce the fault (Setup.%s): %v", name, err)
		return
	case got.p == nil:
		c.errorf("Setup.%s returned no provider", name)
		return
	}
	for _, o := range ops {
		if !hasCapability(got.p, o.needs) {
			c.errorf("the provider from Setup.%s does not report the %s capability", name, o.needs)
			return
		}
	}
	fn(got.p)
}

// timedCall runs one op with ctx, at most bound past ctx's end, and says how long it
// took.
func timedCall(ctx context.Context, bound time.Duration, p cloud.Provider, o op) (time.Duration, error) {
	start := time.Now()
	_, err := within(ctx, bound, func(ctx context.Context) (struct{}, error) { return struct{}{}, o.do(ctx, p) })
	return time.Since(start), err
}

func checkCanceled(c *checker) {
	ops := c.s.ops(c.ctx)
	if len(ops) == 0 {
		c.skipf("the provider claims no capability")
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	cancel()
	bound := c.s.cfg.CancelBound
	for _, o := range ops {
		took, err := timedCall(ctx, bound, c.s.provider, o)
		switch {
		case isHung(err):
			c.errorf("%s with a canceled context: no answer within %s", o.name, bound)
		case err == nil:
			c.errorf("%s with a canceled context returned no error", o.name)
		case cloud.IsNotFound(err):
			c.errorf("%s with a canceled context: %s; a canceled call must never say NotFound", o.name, describe(err))
		case took > bound:
			c.errorf("%s with a canceled context took %s, more than %s", o.name, took.Round(time.Millisecond), bound)
		}
	}
}

func checkFailing(c *checker) {
	ops := c.s.ops(c.ctx)
	c.withFault("Failing", c.s.cfg.Failing, ops, func(p cloud.Provider) {
		for _, o := range ops {
			ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.CallTimeout)
			_, err := timedCall(ctx, c.s.cfg.CancelBound, p, o)
			cancel()
			switch {
			case err == nil:
				c.errorf("%s succeeded against a failing cloud", o.name)
			case cloud.IsNotFound(err):
				c.errorf("%s against a failing cloud: %s; only the cloud's positive answer may say NotFound", o.name, describe(err))
			case isHung(err):
				c.errorf("%s against a failing cloud: %s", o.name, describe(err))
			}
		}
	})
}

func checkThrottled(c *checker) {
	ops := c.s.ops(c.ctx)
	c.withFault("Throttling", c.s.cfg.Throttling, ops, func(p cloud.Provider) {
		for _, o := range ops {
			ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.CallTimeout)
			_, err := timedCall(ctx, c.s.cfg.CancelBound, p, o)
			cancel()
			after, ok := cloud.RetryAfter(err)
			switch {
			case !cloud.IsThrottled(err):
				c.errorf("%s against a throttling cloud: %s; want Throttled", o.name, describe(err))
			case !ok:
				c.errorf("%s against a throttling cloud: %s carries no Retry-After (use cloud.Throttled with the cloud's wait)", o.name, describe(err))
			case after <= 0:
				c.errorf("%s: Retry-After %s is not positive", o.name, after)
			}
		}
	})
}

func checkDeadline(c *checker) {
	ops := c.s.ops(c.ctx)
	deadline, bound := c.s.cfg.Deadline, c.s.cfg.CancelBound
	c.withFault("Slow", c.s.cfg.Slow, ops, func(p cloud.Provider) {
		for _, o := range ops {
			ctx, cancel := context.WithTimeout(c.ctx, deadline)
			took, err := timedCall(ctx, bound, p, o)
			cancel()
			switch {
			case isHung(err):
				c.errorf("%s with a %s deadline against a slow cloud: no answer within %s of the deadline", o.name, deadline, bound)
			case err == nil:
				c.errorf("%s with a %s deadline against a slow cloud returned no error after %s (is Setup.Slow slow enough?)", o.name, deadline, took.Round(time.Millisecond))
			case cloud.IsNotFound(err):
				c.errorf("%s with a %s deadline against a slow cloud: %s; a timeout must never say NotFound", o.name, deadline, describe(err))
			case took > deadline+bound:
				c.errorf("%s with a %s deadline took %s", o.name, deadline, took.Round(time.Millisecond))
			}
		}
	})
}

package manager

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"
)

// capabilities are the capabilities a provider offers, which a reload may not change:
// the controllers that run, and the inventory, were chosen from them at start.
type capabilities struct {
	instances, lister, loadBalancers, routes bool
	// routeBatch is set when the provider's Routes also implement cloud.RouteBatcher.
	routeBatch bool
}

func capabilitiesOf(p cloud.Provider) capabilities {
	in, inOK := p.Instances()
	li, liOK := p.InstanceLister()
	lb, lbOK := p.LoadBalancers()
	rt, rtOK := p.Routes()
	_, batch := rt.(cloud.RouteBatcher)
	return capabilities{instances: inOK && in != nil, lister: liOK && li != nil, loadBalancers: lbOK && lb != nil,
		routes: rtOK && rt != nil, routeBatch: rtOK && batch}
}

func (c capabilities) String() string {
	return fmt.Sprintf("Instances %t, InstanceLister %t, LoadBalancers %t, Routes %t (batched %t)", c.instances, c.lister, c.loadBalancers, c.routes, c.routeBatch)
}

// swapProvider is the provider behind the manager's cloud call path when the cloud
// config may be reloaded: every call goes to the provider current when it starts, so a
// call in flight finishes on the provider it started on and the next one uses the
// reloaded provider. Its capabilities are fixed at start.
type swapProvider struct {
	name string
	caps capabilities
	// platforms are the provider's provider-ID schemes, which node ownership was
	// decided with at start.
	platforms []string
	cur       atomic.Pointer[providerBox]
}

// providerBox holds a provider for atomic.Pointer, which cannot hold an interface.
type providerBox struct{ p cloud.Provider }

func newSwapProvider(p cloud.Provider) *swapProvider {
	s := &swapProvider{name: p.ProviderName(), caps: capabilitiesOf(p), platforms: cloud.Platforms(p)}
	s.cur.Store(&providerBox{p})
	return s
}

// current returns the provider calls go to now.
func (s *swapProvider) current() cloud.Provider { return s.cur.Load().p }

// fits refuses a provider of another name or with other capabilities than the running
// one's: those need a restart.
func (s *swapProvider) fits(p cloud.Provider) error {
	if n := p.ProviderName(); n != s.name {
		return fmt.Errorf("the reloaded provider is named %q, not %q", n, s.name)
	}
	if c := capabilitiesOf(p); c != s.caps {
		return fmt.Errorf("the reloaded configuration changes the provider's capabilities (%s; running with %s): restart the manager to apply it", c, s.caps)
	}
	// Which nodes are whose was decided with the platforms at start; another scheme
	// would write provider IDs no controller here owns.
	if pl := cloud.Platforms(p); !slices.Equal(pl, s.platforms) {
		return fmt.Errorf("the reloaded configuration changes the provider's platforms (provider-ID schemes %q; running with %q): restart the manager to apply it", pl, s.platforms)
	}
	return nil
}

// swap makes p, which fits, the provider of the calls that start from now on.
func (s *swapProvider) swap(p cloud.Provider) { s.cur.Store(&providerBox{p}) }

// ProviderName implements cloud.Provider.
func (s *swapProvider) ProviderName() string { return s.name }

// Instances implements cloud.Provider.
func (s *swapProvider) Instances() (cloud.Instances, bool) {
	if !s.caps.instances {
		return nil, false
	}
	return swapInstances{s}, true
}

// InstanceLister implements cloud.Provider.
func (s *swapProvider) InstanceLister() (cloud.InstanceLister, bool) {
	if !s.caps.lister {
		return nil, false
	}
	return swapLister{s}, true
}

// LoadBalancers implements cloud.Provider.
func (s *swapProvider) LoadBalancers() (cloud.LoadBalancers, bool) {
	if !s.caps.loadBalancers {
		return nil, false
	}
	return swapLoadBalancers{s}, true
}

// Routes implements cloud.Provider.
func (s *swapProvider) Routes() (cloud.Routes, bool) {
	if !s.caps.routes {
		return nil, false
	}
	if s.caps.routeBatch {
		return swapBatchRoutes{swapRoutes{s}}, true
	}
	return swapRoutes{s}, true
}

// errLost is returned when the current provider lacks a capability swap checked it has:
// a provider whose capabilities change by themselves.
func (s *swapProvider) errLost(what string) error {
	return fmt.Errorf("provider %s no longer offers %s: %w", s.name, what, cloud.ErrNotImplemented)
}

type swapInstances struct{ s *swapProvider }

func (w swapInstances) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloud.Instance, error) {
	in, ok := w.s.current().Instances()
	if !ok || in == nil {
		return nil, w.s.errLost("Instances")
	}
	return in.InstanceMetadata(ctx, node)
}

type swapLister struct{ s *swapProvider }

func (w swapLister) ListInstances(ctx context.Context) ([]cloud.Instance, error) {
	li, ok := w.s.current().InstanceLister()
	if !ok || li == nil {
		return nil, w.s.errLost("InstanceLister")
	}
	return li.ListInstances(ctx)
}

type swapLoadBalancers struct{ s *swapProvider }

func (w swapLoadBalancers) lbs() (cloud.LoadBalancers, error) {
	lb, ok := w.s.current().LoadBalancers()
	if !ok || lb == nil {
		return nil, w.s.errLost("LoadBalancers")
	}
	return lb, nil
}

func (w swapLoadBalancers) GetLoadBalancer(ctx context.Context, spec *cloud.LoadBalancerSpec, svc *corev1.Service) (*corev1.LoadBalancerStatus, error) {
	lb, err := w.lbs()
	if err != nil {
		return nil, err
	}
	return lb.GetLoadBalancer(ctx, spec, svc)
}

func (w swapLoadBalancers) EnsureLoadBalancer(ctx context.Context, spec *cloud.LoadBalancerSpec, svc *corev1.Service) (*corev1.LoadBalancerStatus, error) {
	lb, err := w.lbs()
	if err != nil {
		return nil, err
	}
	return lb.EnsureLoadBalancer(ctx, spec, svc)
}

func (w swapLoadBalancers) UpdateLoadBalancerBackends(ctx context.Context, spec *cloud.LoadBalancerSpec, svc *corev1.Service) error {
	lb, err := w.lbs()
	if err != nil {
		return err
	}
	return lb.UpdateLoadBalancerBackends(ctx, spec, svc)
}

func (w swapLoadBalancers) EnsureLoadBalancerDeleted(ctx context.Context, spec *cloud.LoadBalancerSpec, svc *corev1.Service) error {
	lb, err := w.lbs()
	if err != nil {
		return err
	}
	return lb.EnsureLoadBalancerDeleted(ctx, spec, svc)
}

type swapRoutes struct{ s *swapProvider }

func (w swapRoutes) routes() (cloud.Routes, error) {
	rt, ok := w.s.current().Routes()
	if !ok || rt == nil {
		return nil, w.s.errLost("Routes")
	}
	return rt, nil
}

func (w swapRoutes) ListRoutes(ctx context.Context, clusterName string) ([]cloud.Route, error) {
	rt, err := w.routes()
	if err != nil {
		return nil, err
	}
	return rt.ListRoutes(ctx, clusterName)
}

func (w swapRoutes) CreateRoute(ctx context.Context, clusterName, nameHint string, route cloud.Route) error {
	rt, err := w.routes()
	if err != nil {
		return err
	}
	return rt.CreateRoute(ctx, clusterName, nameHint, route)
}

func (w swapRoutes) DeleteRoute(ctx context.Context, clusterName string, route cloud.Route) error {
	rt, err := w.routes()
	if err != nil {
		return err
	}
	return rt.DeleteRoute(ctx, clusterName, route)
}

// swapBatchRoutes is swapRoutes for a provider whose Routes batch.
type swapBatchRoutes struct{ swapRoutes }

func (w swapBatchRoutes) batcher() (cloud.RouteBatcher, error) {
	rt, err := w.routes()
	if err != nil {
		return nil, err
	}
	b, ok := rt.(cloud.RouteBatcher)
	if !ok {
		return nil, w.s.errLost("RouteBatcher")
	}
	return b, nil
}

// MaxRouteChanges implements cloud.RouteBatcher: the current provider's bound, or 1
// when it lost the capability (its ApplyRoutes then fails with ErrNotImplemented).
func (w swapBatchRoutes) MaxRouteChanges() int {
	b, err := w.batcher()
	if err != nil {
		return 1
	}
	return b.MaxRouteChanges()
}

// ApplyRoutes implements cloud.RouteBatcher.
func (w swapBatchRoutes) ApplyRoutes(ctx context.Context, clusterName string, changes []cloud.RouteChange) error {
	b, err := w.batcher()
	if err != nil {
		return err
	}
	return b.ApplyRoutes(ctx, clusterName, changes)
}

package instrumented

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"
)

// provider is the cloud.Provider one controller sees.
type provider struct {
	c          *Cloud
	controller string
	// fence gates every call; nil gates nothing.
	fence Fence
}

func (p *provider) ProviderName() string { return p.c.inner.ProviderName() }

// The capability methods ask the wrapped provider every time, so a provider whose
// capabilities change (or a fake that switches them) is reflected, and an absent
// capability is a nil interface, never a wrapper around nil.

func (p *provider) Instances() (cloud.Instances, bool) {
	in, ok := p.c.inner.Instances()
	if !ok || in == nil {
		return nil, false
	}
	return &instances{p: p, inner: in}, true
}

func (p *provider) InstanceLister() (cloud.InstanceLister, bool) {
	in, ok := p.c.inner.InstanceLister()
	if !ok || in == nil {
		return nil, false
	}
	return &instanceLister{p: p, inner: in}, true
}

func (p *provider) LoadBalancers() (cloud.LoadBalancers, bool) {
	in, ok := p.c.inner.LoadBalancers()
	if !ok || in == nil {
		return nil, false
	}
	return &loadBalancers{p: p, inner: in}, true
}

func (p *provider) Routes() (cloud.Routes, bool) {
	in, ok := p.c.inner.Routes()
	if !ok || in == nil {
		return nil, false
	}
	w := &routes{p: p, inner: in}
	if b, ok := in.(cloud.RouteBatcher); ok {
		// Only a provider that batches gets a wrapper that does: the route controller
		// asserts the capability on what it is given.
		return &batchRoutes{routes: w, batcher: b}, true
	}
	return w, true
}

type instances struct {
	p     *provider
	inner cloud.Instances
}

func (w *instances) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloud.Instance, error) {
	subject := ""
	if node != nil {
		subject = node.Name
	}
	return call(ctx, w.p, cloud.OpInstanceMetadata, subject, func(ctx context.Context) (*cloud.Instance, error) {
		return w.inner.InstanceMetadata(ctx, node)
	})
}

type instanceLister struct {
	p     *provider
	inner cloud.InstanceLister
}

func (w *instanceLister) ListInstances(ctx context.Context) ([]cloud.Instance, error) {
	return call(ctx, w.p, cloud.OpListInstances, "", w.inner.ListInstances)
}

type loadBalancers struct {
	p     *provider
	inner cloud.LoadBalancers
}

func lbName(spec *cloud.LoadBalancerSpec) string {
	if spec == nil {
		return ""
	}
	return spec.Name
}

func (w *loadBalancers) GetLoadBalancer(ctx context.Context, spec *cloud.LoadBalancerSpec, svc *corev1.Service) (*corev1.LoadBalancerStatus, error) {
	return call(ctx, w.p, cloud.OpGetLoadBalancer, lbName(spec), func(ctx context.Context) (*corev1.LoadBalancerStatus, error) {
		return w.inner.GetLoadBalancer(ctx, spec, svc)
	})
}

func (w *loadBalancers) EnsureLoadBalancer(ctx context.Context, spec *cloud.LoadBalancerSpec, svc *corev1.Service) (*corev1.LoadBalancerStatus, error) {
	return call(ctx, w.p, cloud.OpEnsureLoadBalancer, lbName(spec), func(ctx context.Context) (*corev1.LoadBalancerStatus, error) {
		return w.inner.EnsureLoadBalancer(ctx, spec, svc)
	})
}

func (w *loadBalancers) UpdateLoadBalancerBackends(ctx context.Context, spec *cloud.LoadBalancerSpec, svc *corev1.Service) error {
	_, err := call(ctx, w.p, cloud.OpUpdateLoadBalancerBackends, lbName(spec), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, w.inner.UpdateLoadBalancerBackends(ctx, spec, svc)
	})
	return err
}

func (w *loadBalancers) EnsureLoadBalancerDeleted(ctx context.Context, spec *cloud.LoadBalancerSpec, svc *corev1.Service) error {
	_, err := call(ctx, w.p, cloud.OpEnsureLoadBalancerDeleted, lbName(spec), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, w.inner.EnsureLoadBalancerDeleted(ctx, spec, svc)
	})
	return err
}

type routes struct {
	p     *provider
	inner cloud.Routes
}

// routeSubject names a route in errors by its cluster and destination.
func routeSubject(clusterName string, r cloud.Route) string {
	if r.DestinationCIDR.IsValid() {
		return clusterName + "/" + r.DestinationCIDR.String()
	}
	return clusterName + "/" + r.Name
}

func (w *routes) ListRoutes(ctx context.Context, clusterName string) ([]cloud.Route, error) {
	return call(ctx, w.p, cloud.OpListRoutes, clusterName, func(ctx context.Context) ([]cloud.Route, error) {
		return w.inner.ListRoutes(ctx, clusterName)
	})
}

func (w *routes) CreateRoute(ctx context.Context, clusterName, nameHint string, route cloud.Route) error {
	_, err := call(ctx, w.p, cloud.OpCreateRoute, routeSubject(clusterName, route), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, w.inner.CreateRoute(ctx, clusterName, nameHint, route)
	})
	return err
}

func (w *routes) DeleteRoute(ctx context.Context, clusterName string, route cloud.Route) error {
	_, err := call(ctx, w.p, cloud.OpDeleteRoute, routeSubject(clusterName, route), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, w.inner.DeleteRoute(ctx, clusterName, route)
	})
	return err
}

// batchRoutes is routes for a provider that implements cloud.RouteBatcher.
type batchRoutes struct {
	*routes
	batcher cloud.RouteBatcher
}

func (w *batchRoutes) MaxRouteChanges() int { return w.batcher.MaxRouteChanges() }

func (w *batchRoutes) ApplyRoutes(ctx context.Context, clusterName string, changes []cloud.RouteChange) error {
	_, err := call(ctx, w.p, cloud.OpApplyRoutes, fmt.Sprintf("%s/%d changes", clusterName, len(changes)), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, w.batcher.ApplyRoutes(ctx, clusterName, changes)
	})
	return err
}

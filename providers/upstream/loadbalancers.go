package upstream

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/nephele-dev/nephele/cloud"
)

// loadBalancers serves cloud.LoadBalancers from upstream's LoadBalancer. The upstream
// provider names its load balancers itself (GetLoadBalancerName of the Service), so
// spec.Name only names them in errors.
type loadBalancers struct {
	p  *Provider
	up cloudprovider.LoadBalancer
}

func lbSubject(spec *cloud.LoadBalancerSpec) string {
	return fmt.Sprintf("load balancer %s of Service %s", spec.Name, spec.Service)
}

func checkSpec(spec *cloud.LoadBalancerSpec) error {
	if spec == nil {
		return cloud.Invalidf("load balancer spec is nil")
	}
	return nil
}

// GetLoadBalancer implements cloud.LoadBalancers. An answer of exists=false is NotFound.
func (l loadBalancers) GetLoadBalancer(ctx context.Context, spec *cloud.LoadBalancerSpec, svc *corev1.Service) (*corev1.LoadBalancerStatus, error) {
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	svc = serviceFor(spec, svc)
	type answer struct {
		status *corev1.LoadBalancerStatus
		exists bool
	}
	a, err := call(ctx, "GetLoadBalancer", func(ctx context.Context) (answer, error) {
		st, exists, err := l.up.GetLoadBalancer(ctx, spec.ClusterName, svc)
		return answer{st, exists}, err
	})
	if err != nil {
		return nil, mapError(areaLoadBalancers, "GetLoadBalancer", lbSubject(spec), err)
	}
	if !a.exists {
		return nil, cloud.NotFoundf("%s: the upstream provider says it does not exist", lbSubject(spec))
	}
	if a.status == nil {
		return &corev1.LoadBalancerStatus{}, nil
	}
	return a.status.DeepCopy(), nil
}

// EnsureLoadBalancer implements cloud.LoadBalancers.
func (l loadBalancers) EnsureLoadBalancer(ctx context.Context, spec *cloud.LoadBalancerSpec, svc *corev1.Service) (*corev1.LoadBalancerStatus, error) {
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	svc, nodes := serviceFor(spec, svc), nodesFor(spec.Backends)
	st, err := call(ctx, "EnsureLoadBalancer", func(ctx context.Context) (*corev1.LoadBalancerStatus, error) {
		return l.up.EnsureLoadBalancer(ctx, spec.ClusterName, svc, nodes)
	})
	if err != nil {
		return nil, mapError(areaLoadBalancers, "EnsureLoadBalancer", lbSubject(spec), err)
	}
	if st == nil {
		return nil, fmt.Errorf("upstream cloud provider: EnsureLoadBalancer %s returned neither a status nor an error", lbSubject(spec))
	}
	return st.DeepCopy(), nil
}

// UpdateLoadBalancerBackends implements cloud.LoadBalancers with upstream's
// UpdateLoadBalancer, which takes the whole set of nodes too.
func (l loadBalancers) UpdateLoadBalancerBackends(ctx context.Context, spec *cloud.LoadBalancerSpec, svc *corev1.Service) error {
	if err := checkSpec(spec); err != nil {
		return err
	}
	svc, nodes := serviceFor(spec, svc), nodesFor(spec.Backends)
	_, err := call(ctx, "UpdateLoadBalancer", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, l.up.UpdateLoadBalancer(ctx, spec.ClusterName, svc, nodes)
	})
	return mapError(areaLoadBalancers, "UpdateLoadBalancer", lbSubject(spec), err)
}

// EnsureLoadBalancerDeleted implements cloud.LoadBalancers.
func (l loadBalancers) EnsureLoadBalancerDeleted(ctx context.Context, spec *cloud.LoadBalancerSpec, svc *corev1.Service) error {
	if err := checkSpec(spec); err != nil {
		return err
	}
	svc = serviceFor(spec, svc)
	_, err := call(ctx, "EnsureLoadBalancerDeleted", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, l.up.EnsureLoadBalancerDeleted(ctx, spec.ClusterName, svc)
	})
	return mapError(areaLoadBalancers, "EnsureLoadBalancerDeleted", lbSubject(spec), err)
}

// nodesFor returns the upstream node list for backends: each backend's Node when the
// controller passed it (shared and read-only, as upstream providers promise to treat
// it), otherwise a Node made of the backend's name, provider ID and addresses.
func nodesFor(backends []cloud.Backend) []*corev1.Node {
	nodes := make([]*corev1.Node, 0, len(backends))
	for _, b := range backends {
		if b.Node != nil {
			nodes = append(nodes, b.Node)
			continue
		}
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: b.NodeName},
			Spec:       corev1.NodeSpec{ProviderID: b.ProviderID},
			Status:     corev1.NodeStatus{Addresses: append([]corev1.NodeAddress(nil), b.Addresses...)},
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// serviceFor returns svc, or, when the caller passed none, a Service of type
// LoadBalancer made from spec: upstream providers read everything from the Service.
func serviceFor(spec *cloud.LoadBalancerSpec, svc *corev1.Service) *corev1.Service {
	if svc != nil {
		return svc
	}
	out := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: spec.Service.Namespace, Name: spec.Service.Name, UID: types.UID(spec.Name)},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: spec.ExternalTrafficPolicy,
			HealthCheckNodePort:   spec.HealthCheckNodePort,
			IPFamilies:            append([]corev1.IPFamily(nil), spec.IPFamilies...),
			LoadBalancerIP:        spec.RequestedIP,
		},
	}
	for _, p := range spec.Ports {
		sp := corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, NodePort: p.NodePort, TargetPort: p.TargetPort}
		if p.AppProtocol != "" {
			sp.AppProtocol = &p.AppProtocol
		}
		out.Spec.Ports = append(out.Spec.Ports, sp)
	}
	for _, r := range spec.SourceRanges {
		out.Spec.LoadBalancerSourceRanges = append(out.Spec.LoadBalancerSourceRanges, r.String())
	}
	return out
}

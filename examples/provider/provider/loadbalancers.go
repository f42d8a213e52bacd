package provider

import (
	"context"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"

	"example.com/cloud-provider-example/examplecloud"
)

// loadBalancers implements cloud.LoadBalancers. The load balancer's name in the cloud is
// spec.Name, which the controller keeps stable per Service.
type loadBalancers struct{ c *examplecloud.Cloud }

func checkSpec(spec *cloud.LoadBalancerSpec) error {
	if spec == nil || spec.Name == "" {
		return cloud.Invalidf("load balancer spec without a name")
	}
	return nil
}

// checkSupported refuses the Service fields the example cloud cannot honour, naming
// them, rather than creating a load balancer that silently ignores them. The cloud
// picks every VIP itself and lets every client in, so it supports no requested IP, and
// source ranges only when they allow every client anyway.
func checkSupported(spec *cloud.LoadBalancerSpec) error {
	if spec.RequestedIP != "" {
		return cloud.Invalidf("Service %s: spec.loadBalancerIP %q is not supported by this provider (the example cloud assigns each load balancer's VIP itself): remove spec.loadBalancerIP", spec.Service, spec.RequestedIP)
	}
	if len(spec.SourceRanges) > 0 && !slices.ContainsFunc(spec.SourceRanges, allowsEveryClient) {
		return cloud.Invalidf("Service %s: spec.loadBalancerSourceRanges (or annotation service.beta.kubernetes.io/load-balancer-source-ranges) %v is not supported by this provider (the example cloud cannot restrict clients): remove it, or allow every client with 0.0.0.0/0", spec.Service, spec.SourceRanges)
	}
	return nil
}

// allowsEveryClient reports whether source range p lets every client reach a VIP: it
// is 0.0.0.0/0, as the example cloud's VIPs are IPv4 addresses.
func allowsEveryClient(p netip.Prefix) bool { return p.Addr().Is4() && p.Bits() == 0 }

// GetLoadBalancer implements cloud.LoadBalancers.
func (l loadBalancers) GetLoadBalancer(ctx context.Context, spec *cloud.LoadBalancerSpec, _ *corev1.Service) (*corev1.LoadBalancerStatus, error) {
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	lb, err := l.c.GetLoadBalancer(ctx, spec.Name)
	if err != nil {
		return nil, mapError(err, true, "load balancer %s of Service %s", spec.Name, spec.Service)
	}
	return status(lb), nil
}

// EnsureLoadBalancer implements cloud.LoadBalancers.
func (l loadBalancers) EnsureLoadBalancer(ctx context.Context, spec *cloud.LoadBalancerSpec, _ *corev1.Service) (*corev1.LoadBalancerStatus, error) {
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	if err := checkSupported(spec); err != nil {
		return nil, err
	}
	want := examplecloud.LoadBalancer{Name: spec.Name, Cluster: spec.ClusterName, Targets: targets(spec.Backends)}
	for _, p := range spec.Ports {
		if p.Protocol != corev1.ProtocolTCP && p.Protocol != corev1.ProtocolUDP {
			return nil, cloud.Invalidf("port %s: protocol %s is not supported by the example cloud: want TCP or UDP", p.Name, p.Protocol)
		}
		want.Listeners = append(want.Listeners, examplecloud.Listener{Protocol: string(p.Protocol), Port: p.Port, TargetPort: p.NodePort})
	}
	lb, err := l.c.PutLoadBalancer(ctx, want)
	if err != nil {
		// A 404 from an ensure is not about the load balancer being gone.
		return nil, mapError(err, false, "ensuring load balancer %s of Service %s", spec.Name, spec.Service)
	}
	return status(lb), nil
}

// UpdateLoadBalancerBackends implements cloud.LoadBalancers. A load balancer that does
// not exist is NotFound, so that the controller ensures it whole.
func (l loadBalancers) UpdateLoadBalancerBackends(ctx context.Context, spec *cloud.LoadBalancerSpec, _ *corev1.Service) error {
	if err := checkSpec(spec); err != nil {
		return err
	}
	err := l.c.SetTargets(ctx, spec.Name, targets(spec.Backends))
	return mapError(err, true, "updating the targets of load balancer %s", spec.Name)
}

// EnsureLoadBalancerDeleted implements cloud.LoadBalancers: a load balancer the cloud
// says does not exist is deleted already.
func (l loadBalancers) EnsureLoadBalancerDeleted(ctx context.Context, spec *cloud.LoadBalancerSpec, _ *corev1.Service) error {
	if err := checkSpec(spec); err != nil {
		return err
	}
	err := l.c.DeleteLoadBalancer(ctx, spec.Name)
	if examplecloud.Code(err) == 404 {
		return nil
	}
	return mapError(err, false, "deleting load balancer %s", spec.Name)
}

// targets returns one address per backend: its first InternalIP, else its first IP.
// Backends without an IP address cannot receive traffic and are left out.
func targets(backends []cloud.Backend) []string {
	var out []string
	for _, b := range backends {
		var first string
		for _, a := range b.Addresses {
			if _, err := netip.ParseAddr(a.Address); err != nil {
				continue
			}
			if a.Type == corev1.NodeInternalIP {
				first = a.Address
				break
			}
			if first == "" {
				first = a.Address
			}
		}
		if first != "" {
			out = append(out, first)
		}
	}
	return out
}

func status(lb *examplecloud.LoadBalancer) *corev1.LoadBalancerStatus {
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: lb.VIP}}}
}

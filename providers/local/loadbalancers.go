package local

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
)

// loadBalancers implements cloud.LoadBalancers.
type loadBalancers struct{ p *Provider }

// GetLoadBalancer implements cloud.LoadBalancers.
func (l loadBalancers) GetLoadBalancer(ctx context.Context, spec *cloud.LoadBalancerSpec, _ *corev1.Service) (*corev1.LoadBalancerStatus, error) {
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	lb, err := l.p.client.GetLoadBalancer(ctx, spec.Name)
	if err != nil {
		return nil, wrapf(err, "getting load balancer %s of service %s", spec.Name, spec.Service)
	}
	return toStatus(lb)
}

// EnsureLoadBalancer implements cloud.LoadBalancers. Backends without a usable address
// are left out, and logged with the reason.
func (l loadBalancers) EnsureLoadBalancer(ctx context.Context, spec *cloud.LoadBalancerSpec, _ *corev1.Service) (*corev1.LoadBalancerStatus, error) {
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	want, skipped := toSpec(spec, l.p.cfg.ProxyHealthzPort)
	logSkipped(ctx, spec, skipped)
	lb, err := l.p.client.EnsureLoadBalancer(ctx, spec.Name, want)
	if err != nil {
		return nil, lbError(err, "ensuring", spec, want.Backends)
	}
	if lb.Status.Error != "" {
		// The listeners are not open: report it so the controller retries rather
		// than publishing a VIP that answers nothing.
		return nil, fmt.Errorf("ensuring load balancer %s of service %s: the local cloud's data plane reports: %s", spec.Name, spec.Service, lb.Status.Error)
	}
	return toStatus(lb)
}

// UpdateLoadBalancerBackends implements cloud.LoadBalancers. A load balancer that does
// not exist is an error wrapping cloud.ErrNotFound.
func (l loadBalancers) UpdateLoadBalancerBackends(ctx context.Context, spec *cloud.LoadBalancerSpec, _ *corev1.Service) error {
	if err := checkSpec(spec); err != nil {
		return err
	}
	backends, skipped := toBackends(spec)
	logSkipped(ctx, spec, skipped)
	if _, err := l.p.client.UpdateLoadBalancerBackends(ctx, spec.Name, backends); err != nil {
		return lbError(err, "updating the backends of", spec, backends)
	}
	return nil
}

// EnsureLoadBalancerDeleted implements cloud.LoadBalancers. A load balancer the cloud
// says does not exist is already deleted.
func (l loadBalancers) EnsureLoadBalancerDeleted(ctx context.Context, spec *cloud.LoadBalancerSpec, _ *corev1.Service) error {
	if err := checkSpec(spec); err != nil {
		return err
	}
	err := l.p.client.DeleteLoadBalancer(ctx, spec.Name)
	if err != nil && !cloud.IsNotFound(err) {
		return wrapf(err, "deleting load balancer %s of service %s", spec.Name, spec.Service)
	}
	return nil
}

func checkSpec(spec *cloud.LoadBalancerSpec) error {
	if spec == nil {
		return cloud.Invalidf("load balancer spec is nil")
	}
	if spec.Name == "" {
		return cloud.Invalidf("load balancer of service %s: the name is empty", spec.Service)
	}
	return nil
}

// skippedBackend is a backend left out of a load balancer, and why.
type skippedBackend struct {
	NodeName string
	Reason   string
}

// toSpec maps the contract's spec to the local cloud's. Ports keep their order, so a
// field the cloud refuses ("spec.ports[1].protocol") points at the Service's port.
// proxyHealthz is kube-proxy's healthz port (Config.ProxyHealthzPort).
func toSpec(spec *cloud.LoadBalancerSpec, proxyHealthz int32) (api.LoadBalancerSpec, []skippedBackend) {
	out := api.LoadBalancerSpec{
		ClusterName:         spec.ClusterName,
		HealthCheckNodePort: healthCheckPort(spec, proxyHealthz),
		RequestedIP:         spec.RequestedIP,
		Ports:               make([]api.Port, 0, len(spec.Ports)),
	}
	if spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		out.SessionAffinity = api.SessionAffinityClientIP
		// Whole seconds, as Kubernetes gives them; the cloud's maximum is Kubernetes'.
		out.SessionAffinityTimeoutSeconds = int32(min(max(spec.SessionAffinityTimeout.Seconds(), 0), api.MaxSessionAffinityTimeoutSeconds))
	}
	if spec.Service.Name != "" {
		out.Service = spec.Service.String()
	}
	// TargetPort and AppProtocol stay behind: the local cloud forwards bytes to node
	// ports, where kube-proxy applies the target port, and has no protocol-aware
	// listeners or probes for the app protocol to choose.
	for _, p := range spec.Ports {
		out.Ports = append(out.Ports, api.Port{Name: p.Name, Protocol: api.Protocol(p.Protocol), Port: p.Port, NodePort: p.NodePort})
	}
	for _, r := range spec.SourceRanges {
		out.SourceRanges = append(out.SourceRanges, r.String())
	}
	var skipped []skippedBackend
	out.Backends, skipped = toBackends(spec)
	return out, skipped
}

// healthCheckPort returns the port the local cloud health-checks each backend on with
// GET /healthz, or 0 for TCP connects to the node port. externalTrafficPolicy Local
// has the Service's own health check node port, which passes only on nodes with a
// ready endpoint. Cluster (or no policy) has kube-proxy's healthz port, as real clouds
// do (GCE's node health check): it fails on a node being deleted or tainted by the
// cluster autoscaler (KEP-3836), whose connections then drain while it stays a backend
// (KEP-3458), and on a node whose kube-proxy is down, and it probes UDP ports too.
func healthCheckPort(spec *cloud.LoadBalancerSpec, proxyHealthz int32) int32 {
	switch {
	case spec.HealthCheckNodePort != 0:
		return spec.HealthCheckNodePort
	case spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal, proxyHealthz == ProxyHealthzOff:
		return 0
	}
	return proxyHealthz
}

// toBackends picks each backend's address: an InternalIP, else an ExternalIP,
// preferring the Service's primary IP family. Backends without one are skipped.
func toBackends(spec *cloud.LoadBalancerSpec) ([]api.Backend, []skippedBackend) {
	var family corev1.IPFamily
	if len(spec.IPFamilies) > 0 {
		family = spec.IPFamilies[0]
	}
	out := make([]api.Backend, 0, len(spec.Backends))
	var skipped []skippedBackend
	seen := make(map[string]bool, len(spec.Backends))
	for _, b := range spec.Backends {
		switch {
		case b.NodeName == "":
			skipped = append(skipped, skippedBackend{Reason: "the backend has no node name"})
			continue
		case seen[b.NodeName]:
			skipped = append(skipped, skippedBackend{NodeName: b.NodeName, Reason: "the node is listed twice"})
			continue
		}
		addrs := b.Addresses
		if len(addrs) == 0 && b.Node != nil {
			addrs = b.Node.Status.Addresses
		}
		addr, ok := backendAddress(addrs, family)
		if !ok {
			skipped = append(skipped, skippedBackend{NodeName: b.NodeName, Reason: "the node has no usable InternalIP or ExternalIP address"})
			continue
		}
		seen[b.NodeName] = true
		out = append(out, api.Backend{NodeName: b.NodeName, Address: addr.String()})
	}
	return out, skipped
}

// backendAddress returns the address traffic to a node goes to: an InternalIP, else an
// ExternalIP; within a type, the first of the wanted family, else the first. Addresses
// that are not IPs, or are unspecified, are never chosen.
func backendAddress(addrs []corev1.NodeAddress, family corev1.IPFamily) (netip.Addr, bool) {
	for _, typ := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		var first netip.Addr
		for _, a := range addrs {
			if a.Type != typ {
				continue
			}
			ip, err := netip.ParseAddr(a.Address)
			if err != nil || ip.IsUnspecified() {
				continue
			}
			ip = ip.Unmap()
			if family == "" || (family == corev1.IPv6Protocol) == ip.Is6() {
				return ip, true
			}
			if !first.IsValid() {
				first = ip
			}
		}
		if first.IsValid() {
			return first, true
		}
	}
	return netip.Addr{}, false
}

// logSkipped logs the backends left out of a load balancer. The manager puts its logger
// in the context.
func logSkipped(ctx context.Context, spec *cloud.LoadBalancerSpec, skipped []skippedBackend) {
	if len(skipped) == 0 {
		return
	}
	log := logr.FromContextOrDiscard(ctx)
	for _, s := range skipped {
		log.Info("Leaving a node out of a load balancer", "loadBalancer", spec.Name, "service", spec.Service.String(), "node", s.NodeName, "reason", s.Reason)
	}
}

// toStatus maps a load balancer to the Service status: its VIP, with the ipMode the
// cloud reports. VIP (the kernel data plane of a cloud with hosts: packets reach the
// nodes with the VIP as destination and the client as source) lets kube-proxy serve the
// VIP inside the cluster itself, as the load balancer would. Proxy (the user-space data
// plane: the nodes see the proxy, not the client) makes in-cluster clients go through
// the load balancer too, and tells upstream's source-IP tests to skip. A cloud from
// before ipMode had only the proxy.
func toStatus(lb *api.LoadBalancer) (*corev1.LoadBalancerStatus, error) {
	vip, err := netip.ParseAddr(lb.Status.VIP)
	if err != nil {
		return nil, fmt.Errorf("load balancer %s: the local cloud answered without a valid VIP (%q)", lb.Name, lb.Status.VIP)
	}
	mode := corev1.LoadBalancerIPModeProxy
	if lb.Status.IPMode == api.IPModeVIP {
		mode = corev1.LoadBalancerIPModeVIP
	}
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: vip.Unmap().String(), IPMode: &mode}}}, nil
}

// indexedField matches the local cloud's names of list elements, "spec.ports[1].port".
var indexedField = regexp.MustCompile(`^(?:spec\.)?(ports|backends)\[(\d+)\]`)

// lbError wraps a failed ensure or backend update. For a refused field it says which
// Service port or node the cloud's field path points at.
func lbError(err error, what string, spec *cloud.LoadBalancerSpec, backends []api.Backend) error {
	wrapped := wrapf(err, "%s load balancer %s of service %s", what, spec.Name, spec.Service)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Field == "" {
		return wrapped
	}
	var detail string
	if m := indexedField.FindStringSubmatch(ce.Field); m != nil {
		i, _ := strconv.Atoi(m[2])
		switch {
		case m[1] == "ports" && i < len(spec.Ports):
			p := spec.Ports[i]
			detail = fmt.Sprintf("Service port %q (%d/%s)", p.Name, p.Port, p.Protocol)
		case m[1] == "backends" && i < len(backends):
			detail = "node " + backends[i].NodeName
		}
	} else if ce.Field == "spec.requestedIP" {
		detail = "spec.loadBalancerIP " + strconv.Quote(spec.RequestedIP)
	}
	if detail == "" {
		return wrapped
	}
	return fmt.Errorf("%s: %w", detail, wrapped)
}

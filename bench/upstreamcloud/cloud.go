package upstreamcloud

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/providers/local"
)

// ProviderName is the name the provider registers under and the scheme of its provider
// IDs; it is nephele's local provider's, so both give Nodes the same provider IDs.
const ProviderName = local.ProviderName

// SecondProviderName is the same provider under a second name, and so a second
// provider-ID scheme: a cluster whose nodes come from two local clouds (the hybrid tests)
// tells them apart by it, as it would an AWS node from a Hetzner one.
const SecondProviderName = "localb"

// Names returns the names the provider answers to.
func Names() []string { return []string{ProviderName, SecondProviderName} }

// Cloud is the local cloud as a cloudprovider.Interface.
type Cloud struct {
	client *client.Client
	// name is the provider's name and the scheme of its provider IDs.
	name string
}

var (
	_ cloudprovider.Interface    = (*Cloud)(nil)
	_ cloudprovider.InstancesV2  = instances{}
	_ cloudprovider.LoadBalancer = loadBalancers{}
	_ cloudprovider.Routes       = routes{}
)

// New reads a providers/local cloud config and returns the provider.
func New(config io.Reader) (*Cloud, error) {
	return NewNamed(ProviderName, config)
}

// NewNamed is New for the provider under name, one of Names.
func NewNamed(name string, config io.Reader) (*Cloud, error) {
	if !slices.Contains(Names(), name) {
		return nil, fmt.Errorf("provider name %q: want one of %v", name, Names())
	}
	cfg, err := local.LoadConfig(config)
	if err != nil {
		return nil, err
	}
	c, err := NewFromConfig(*cfg)
	if err != nil {
		return nil, err
	}
	c.name = name
	return c, nil
}

// NewFromConfig returns the provider for cfg, with the same HTTP client settings as
// providers/local: cfg.RequestTimeout bounds every request.
func NewFromConfig(cfg local.Config) (*Cloud, error) {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = local.DefaultRequestTimeout
	}
	c, err := client.New(strings.TrimSpace(cfg.Endpoint), cfg.Token, client.WithTimeout(cfg.RequestTimeout),
		client.WithUserAgent("bench-upstream-provider"), client.WithCA(cfg.CA))
	if err != nil {
		return nil, fmt.Errorf("upstream local cloud provider: %w", err)
	}
	return &Cloud{client: c, name: ProviderName}, nil
}

// Initialize implements cloudprovider.Interface; the provider needs no Kubernetes client.
func (c *Cloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}

// LoadBalancer implements cloudprovider.Interface.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return loadBalancers{c}, true }

// Instances implements cloudprovider.Interface: the provider has only InstancesV2.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 implements cloudprovider.Interface.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return instances{c}, true }

// Zones implements cloudprovider.Interface: InstancesV2 reports zones.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters implements cloudprovider.Interface.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes implements cloudprovider.Interface.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) { return routes{c}, true }

// ProviderName implements cloudprovider.Interface.
func (c *Cloud) ProviderName() string { return c.name }

// HasClusterID implements cloudprovider.Interface: load balancers are tagged with the
// cluster name.
func (c *Cloud) HasClusterID() bool { return true }

type instances struct{ c *Cloud }

// get returns node's instance: by provider ID when set, else by name.
func (in instances) get(ctx context.Context, node *corev1.Node) (*api.Instance, error) {
	if node == nil {
		return nil, errors.New("node is nil")
	}
	if node.Spec.ProviderID != "" {
		id, err := in.c.instanceID(node.Spec.ProviderID)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", node.Name, err)
		}
		return in.c.client.GetInstance(ctx, id)
	}
	return in.c.client.GetInstanceByName(ctx, node.Name)
}

// InstanceExists implements cloudprovider.InstancesV2. Only a positive NotFound answer
// means the instance does not exist.
func (in instances) InstanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	_, err := in.get(ctx, node)
	switch {
	case cloud.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// InstanceShutdown implements cloudprovider.InstancesV2.
func (in instances) InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	inst, err := in.get(ctx, node)
	if err != nil {
		return false, err
	}
	return inst.State == api.InstanceStopped, nil
}

// InstanceMetadata implements cloudprovider.InstancesV2.
func (in instances) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	inst, err := in.get(ctx, node)
	if err != nil {
		return nil, err
	}
	md := &cloudprovider.InstanceMetadata{
		ProviderID:       in.c.name + "://" + inst.ID,
		InstanceType:     inst.InstanceType,
		Zone:             inst.Zone,
		Region:           inst.Region,
		AdditionalLabels: inst.Labels,
	}
	for _, a := range inst.Addresses {
		md.NodeAddresses = append(md.NodeAddresses, corev1.NodeAddress{Type: corev1.NodeAddressType(a.Type), Address: a.Address})
	}
	return md, nil
}

// instanceID returns the instance ID in "<name>://<id>".
func (c *Cloud) instanceID(providerID string) (string, error) {
	pid, err := cloud.ParseProviderID(providerID)
	if err != nil {
		return "", err
	}
	if pid.Provider != c.name {
		return "", fmt.Errorf("provider ID %q is not the local cloud's", providerID)
	}
	return strings.TrimLeft(pid.ID, "/"), nil
}

type loadBalancers struct{ c *Cloud }

// GetLoadBalancer implements cloudprovider.LoadBalancer.
func (l loadBalancers) GetLoadBalancer(ctx context.Context, _ string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	lb, err := l.c.client.GetLoadBalancer(ctx, cloudprovider.DefaultLoadBalancerName(svc))
	switch {
	case cloud.IsNotFound(err):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return status(lb), true, nil
}

// GetLoadBalancerName implements cloudprovider.LoadBalancer.
func (l loadBalancers) GetLoadBalancerName(_ context.Context, _ string, svc *corev1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(svc)
}

// EnsureLoadBalancer implements cloudprovider.LoadBalancer.
func (l loadBalancers) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	spec := api.LoadBalancerSpec{
		ClusterName: clusterName,
		Service:     svc.Namespace + "/" + svc.Name,
		Backends:    backends(nodes),
		RequestedIP: svc.Spec.LoadBalancerIP,
	}
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		spec.HealthCheckNodePort = svc.Spec.HealthCheckNodePort
	}
	for _, p := range svc.Spec.Ports {
		spec.Ports = append(spec.Ports, api.Port{Name: p.Name, Protocol: api.Protocol(p.Protocol), Port: p.Port, NodePort: p.NodePort})
	}
	spec.SourceRanges = append(spec.SourceRanges, svc.Spec.LoadBalancerSourceRanges...)
	lb, err := l.c.client.EnsureLoadBalancer(ctx, cloudprovider.DefaultLoadBalancerName(svc), spec)
	if err != nil {
		return nil, err
	}
	if lb.Status.Error != "" {
		return nil, fmt.Errorf("load balancer %s: %s", lb.Name, lb.Status.Error)
	}
	return status(lb), nil
}

// UpdateLoadBalancer implements cloudprovider.LoadBalancer.
func (l loadBalancers) UpdateLoadBalancer(ctx context.Context, _ string, svc *corev1.Service, nodes []*corev1.Node) error {
	_, err := l.c.client.UpdateLoadBalancerBackends(ctx, cloudprovider.DefaultLoadBalancerName(svc), backends(nodes))
	return err
}

// EnsureLoadBalancerDeleted implements cloudprovider.LoadBalancer.
func (l loadBalancers) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *corev1.Service) error {
	err := l.c.client.DeleteLoadBalancer(ctx, cloudprovider.DefaultLoadBalancerName(svc))
	if cloud.IsNotFound(err) {
		return nil
	}
	return err
}

// backends maps nodes to their InternalIP, else ExternalIP; nodes with neither are
// left out, as providers/local does.
func backends(nodes []*corev1.Node) []api.Backend {
	out := make([]api.Backend, 0, len(nodes))
	for _, n := range nodes {
		if addr, ok := nodeAddress(n); ok {
			out = append(out, api.Backend{NodeName: n.Name, Address: addr})
		}
	}
	return out
}

func nodeAddress(n *corev1.Node) (string, bool) {
	for _, typ := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, a := range n.Status.Addresses {
			if a.Type != typ {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil && !ip.IsUnspecified() {
				return ip.Unmap().String(), true
			}
		}
	}
	return "", false
}

// status is the Service status of lb, with the IP mode the cloud reports, as
// providers/local maps it (VIP for the kernel data plane, Proxy for the user-space one
// and for a cloud from before ipMode). The mode is always set: without it the
// apiserver defaults one, upstream's service controller finds every status it reads back
// different from the one it computed and patches it again on every sync, spending its
// apiserver budget on a difference that comes from the provider.
func status(lb *api.LoadBalancer) *corev1.LoadBalancerStatus {
	mode := corev1.LoadBalancerIPModeProxy
	if lb.Status.IPMode == api.IPModeVIP {
		mode = corev1.LoadBalancerIPModeVIP
	}
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: lb.Status.VIP, IPMode: &mode}}}
}

type routes struct{ c *Cloud }

// ListRoutes implements cloudprovider.Routes.
func (r routes) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	items, err := r.c.client.ListRoutes(ctx, clusterName)
	if err != nil {
		return nil, err
	}
	out := make([]*cloudprovider.Route, 0, len(items))
	for _, it := range items {
		out = append(out, &cloudprovider.Route{
			Name:            it.Name,
			TargetNode:      types.NodeName(it.TargetNode),
			DestinationCIDR: it.DestinationCIDR,
			Blackhole:       it.Blackhole,
		})
	}
	return out, nil
}

// CreateRoute implements cloudprovider.Routes.
func (r routes) CreateRoute(ctx context.Context, clusterName, nameHint string, route *cloudprovider.Route) error {
	spec := api.RouteSpec{DestinationCIDR: route.DestinationCIDR, TargetNode: string(route.TargetNode)}
	if nameHint != "" && api.ValidateObjectName("name", nameHint) == nil {
		spec.Name = nameHint
	}
	_, err := r.c.client.CreateRoute(ctx, clusterName, spec)
	return err
}

// DeleteRoute implements cloudprovider.Routes.
func (r routes) DeleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	err := r.c.client.DeleteRoute(ctx, clusterName, route.Name)
	if cloud.IsNotFound(err) {
		return nil
	}
	return err
}

package upstream_test

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
)

// stub is a cloudprovider.Interface whose capabilities are whatever the test sets.
type stub struct {
	name        string
	v2          cloudprovider.InstancesV2
	v1          cloudprovider.Instances
	zones       cloudprovider.Zones
	lb          cloudprovider.LoadBalancer
	routes      cloudprovider.Routes
	initialize  func(cloudprovider.ControllerClientBuilder, <-chan struct{})
	noClusterID bool
}

func (s *stub) Initialize(b cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	if s.initialize != nil {
		s.initialize(b, stop)
	}
}
func (s *stub) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return s.lb, s.lb != nil }
func (s *stub) Instances() (cloudprovider.Instances, bool)       { return s.v1, s.v1 != nil }
func (s *stub) InstancesV2() (cloudprovider.InstancesV2, bool)   { return s.v2, s.v2 != nil }
func (s *stub) Zones() (cloudprovider.Zones, bool)               { return s.zones, s.zones != nil }
func (s *stub) Clusters() (cloudprovider.Clusters, bool)         { return nil, false }
func (s *stub) Routes() (cloudprovider.Routes, bool)             { return s.routes, s.routes != nil }
func (s *stub) ProviderName() string                             { return s.name }
func (s *stub) HasClusterID() bool                               { return !s.noClusterID }

// informerStub is a stub that wants informers.
type informerStub struct {
	stub
	mu      sync.Mutex
	factory informers.SharedInformerFactory
}

func (s *informerStub) SetInformers(f informers.SharedInformerFactory) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.Core().V1().Nodes().Informer() // register one, as providers do
	s.factory = f
}

// answer is what a stubbed call returns.
type answer[T any] struct {
	v   T
	err error
}

// v2Stub answers InstancesV2 calls from fixed answers.
type v2Stub struct {
	exists   answer[bool]
	shutdown answer[bool]
	metadata answer[*cloudprovider.InstanceMetadata]
}

func (s *v2Stub) InstanceExists(context.Context, *corev1.Node) (bool, error) {
	return s.exists.v, s.exists.err
}
func (s *v2Stub) InstanceShutdown(context.Context, *corev1.Node) (bool, error) {
	return s.shutdown.v, s.shutdown.err
}
func (s *v2Stub) InstanceMetadata(context.Context, *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	return s.metadata.v, s.metadata.err
}

// v1Stub answers Instances calls; by-name and by-provider-ID answers are separate, so
// tests can tell which path was taken.
type v1Stub struct {
	id                answer[string]
	addrsByName       answer[[]corev1.NodeAddress]
	addrsByID         answer[[]corev1.NodeAddress]
	typeByName        answer[string]
	typeByID          answer[string]
	existsByID        answer[bool]
	shutdownByID      answer[bool]
	shutdownAskedWith string
}

func (s *v1Stub) NodeAddresses(context.Context, types.NodeName) ([]corev1.NodeAddress, error) {
	return s.addrsByName.v, s.addrsByName.err
}
func (s *v1Stub) NodeAddressesByProviderID(context.Context, string) ([]corev1.NodeAddress, error) {
	return s.addrsByID.v, s.addrsByID.err
}
func (s *v1Stub) InstanceID(context.Context, types.NodeName) (string, error) {
	return s.id.v, s.id.err
}
func (s *v1Stub) InstanceType(context.Context, types.NodeName) (string, error) {
	return s.typeByName.v, s.typeByName.err
}
func (s *v1Stub) InstanceTypeByProviderID(context.Context, string) (string, error) {
	return s.typeByID.v, s.typeByID.err
}
func (s *v1Stub) AddSSHKeyToAllInstances(context.Context, string, []byte) error {
	return cloudprovider.NotImplemented
}
func (s *v1Stub) CurrentNodeName(_ context.Context, hostname string) (types.NodeName, error) {
	return types.NodeName(hostname), nil
}
func (s *v1Stub) InstanceExistsByProviderID(context.Context, string) (bool, error) {
	return s.existsByID.v, s.existsByID.err
}
func (s *v1Stub) InstanceShutdownByProviderID(_ context.Context, providerID string) (bool, error) {
	s.shutdownAskedWith = providerID
	return s.shutdownByID.v, s.shutdownByID.err
}

// zonesStub answers Zones calls; by name and by provider ID differ.
type zonesStub struct {
	byName, byID answer[cloudprovider.Zone]
}

func (z *zonesStub) GetZone(context.Context) (cloudprovider.Zone, error) {
	return cloudprovider.Zone{}, cloudprovider.NotImplemented
}
func (z *zonesStub) GetZoneByProviderID(context.Context, string) (cloudprovider.Zone, error) {
	return z.byID.v, z.byID.err
}
func (z *zonesStub) GetZoneByNodeName(context.Context, types.NodeName) (cloudprovider.Zone, error) {
	return z.byName.v, z.byName.err
}

// lbStub records what the adapter hands the provider.
type lbStub struct {
	mu       sync.Mutex
	err      error
	exists   bool
	status   *corev1.LoadBalancerStatus
	services []*corev1.Service
	nodes    [][]*corev1.Node
	cluster  string
}

func (l *lbStub) record(cluster string, svc *corev1.Service, nodes []*corev1.Node) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cluster = cluster
	l.services = append(l.services, svc)
	if nodes != nil {
		l.nodes = append(l.nodes, nodes)
	}
}

func (l *lbStub) GetLoadBalancer(_ context.Context, cluster string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	l.record(cluster, svc, nil)
	return l.status, l.exists, l.err
}
func (l *lbStub) GetLoadBalancerName(_ context.Context, _ string, svc *corev1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(svc)
}
func (l *lbStub) EnsureLoadBalancer(_ context.Context, cluster string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	l.record(cluster, svc, nodes)
	return l.status, l.err
}
func (l *lbStub) UpdateLoadBalancer(_ context.Context, cluster string, svc *corev1.Service, nodes []*corev1.Node) error {
	l.record(cluster, svc, nodes)
	return l.err
}
func (l *lbStub) EnsureLoadBalancerDeleted(_ context.Context, cluster string, svc *corev1.Service) error {
	l.record(cluster, svc, nil)
	return l.err
}

// routesStub is a route table that, like many upstream providers, is not idempotent:
// creating an existing route or deleting a missing one fails.
type routesStub struct {
	mu      sync.Mutex
	listErr error
	table   []*cloudprovider.Route
	created []*cloudprovider.Route
	deleted []*cloudprovider.Route
}

func (r *routesStub) ListRoutes(context.Context, string) ([]*cloudprovider.Route, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*cloudprovider.Route(nil), r.table...), r.listErr
}
func (r *routesStub) CreateRoute(_ context.Context, _, _ string, route *cloudprovider.Route) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.table {
		if t != nil && t.DestinationCIDR == route.DestinationCIDR {
			return errRouteExists
		}
	}
	r.created = append(r.created, route)
	r.table = append(r.table, route)
	return nil
}
func (r *routesStub) DeleteRoute(_ context.Context, _ string, route *cloudprovider.Route) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, t := range r.table {
		if t == route {
			r.deleted = append(r.deleted, route)
			r.table = append(r.table[:i], r.table[i+1:]...)
			return nil
		}
	}
	return errRouteMissing
}

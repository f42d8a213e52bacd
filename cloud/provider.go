package cloud

import (
	"context"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Provider is a cloud. Each capability method returns an implementation and true, or
// nil and false when the cloud does not have that capability. The manager asks once, at
// start, and runs only the controllers the capabilities allow.
type Provider interface {
	// ProviderName is the provider's registered name and the scheme of its provider IDs.
	ProviderName() string
	// Instances returns the per-node instance capability.
	Instances() (Instances, bool)
	// InstanceLister returns the batch listing capability. Providers that have it let
	// the manager keep one shared inventory, so cloud calls do not grow with nodes.
	InstanceLister() (InstanceLister, bool)
	// LoadBalancers returns the load balancer capability.
	LoadBalancers() (LoadBalancers, bool)
	// Routes returns the pod-network route capability.
	Routes() (Routes, bool)
}

// Initializer is implemented by providers that need a Kubernetes client before use.
// The manager calls Initialize once, before any controller starts.
type Initializer interface {
	Initialize(ctx context.Context, clients ClientBuilder) error
}

// ConfigFileLister is implemented by a provider whose cloud config names other files
// (a token or a CA file): the manager rebuilds the provider when one of them changes, as
// when --cloud-config itself does, so a rotated credential is picked up without a
// restart.
type ConfigFileLister interface {
	// ConfigFiles returns the paths of the files the configuration names.
	ConfigFiles() []string
}

// ClientBuilder hands out Kubernetes clients identified by a user-agent name.
type ClientBuilder interface {
	// Config returns a REST config whose user agent carries name.
	Config(name string) (*rest.Config, error)
	// Client returns a clientset whose user agent carries name.
	Client(name string) (kubernetes.Interface, error)
}

// InstanceState is the lifecycle state of an instance as the cloud reports it.
type InstanceState string

// Instance states. A terminated instance that the cloud still lists is not "gone": only
// ErrNotFound is.
const (
	InstanceRunning    InstanceState = "running"
	InstanceStopped    InstanceState = "stopped"
	InstanceTerminated InstanceState = "terminated"
	InstanceUnknown    InstanceState = "unknown"
)

// Instance is what the cloud knows of the machine behind a Node.
type Instance struct {
	// ProviderID is the instance's "<provider>://<id>".
	ProviderID string
	// NodeName is the name of the Node this instance backs (usually its host name).
	// Controllers match Nodes without a provider ID by it.
	NodeName string
	// InstanceType is the machine type, for node.kubernetes.io/instance-type.
	InstanceType string
	// Zone and Region place the instance, for the topology labels.
	Zone   string
	Region string
	// Addresses are the instance's addresses, in the cloud's order of preference.
	Addresses []corev1.NodeAddress
	// Labels are extra node labels the provider wants set. Keys in the kubernetes.io
	// and k8s.io domains are refused by the node controller.
	Labels map[string]string
	// State is the instance's lifecycle state.
	State InstanceState
}

// Instances looks up one instance at a time.
type Instances interface {
	// InstanceMetadata returns the instance behind node: by node.Spec.ProviderID when it
	// is set, otherwise by node name. It returns an error wrapping ErrNotFound only when
	// the cloud positively says there is no such instance.
	InstanceMetadata(ctx context.Context, node *corev1.Node) (*Instance, error)
}

// InstanceLister lists every instance of the cluster in one logical call (the provider
// may page internally). A partial answer must be an error, never a short list: a short
// list would look like instances that are gone.
type InstanceLister interface {
	ListInstances(ctx context.Context) ([]Instance, error)
}

// KubeProxyHealthzPort is the port of kube-proxy's /healthz on every node (upstream's
// ports.ProxyHealthzPort). A provider health-checks the backends of a load balancer
// with externalTrafficPolicy Cluster there, as GCE's does: it fails on a node that is
// being deleted or that the cluster autoscaler is removing (KEP-3836), so that node's
// connections drain while it stays a backend (KEP-3458), and on a node whose kube-proxy
// is not serving. (With policy Local, LoadBalancerSpec.HealthCheckNodePort is the one.)
const KubeProxyHealthzPort = 10256

// LoadBalancerSpec is the normalized description of the load balancer a Service needs.
// The controller derives it from the Service and the backend nodes; providers read
// annotations from the Service passed beside it.
type LoadBalancerSpec struct {
	// Name is the load balancer's stable name in the cloud, unique per cluster.
	Name string
	// ClusterName is the --cluster-name the manager runs with.
	ClusterName string
	// Service names the Service this load balancer serves.
	Service types.NamespacedName
	// Ports are the Service ports to listen on and the node ports to forward to.
	Ports []LoadBalancerPort
	// Backends are the nodes to forward to, sorted by node name. The slice is shared
	// with the controller and every other load balancer's spec of the same node set
	// (thousands of entries each): read it, never modify it; copy it to change it.
	Backends []Backend
	// HealthCheckNodePort is set for externalTrafficPolicy Local: health-check each
	// backend over HTTP on this port. With policy Cluster it is 0: health-check
	// KubeProxyHealthzPort.
	HealthCheckNodePort int32
	// ExternalTrafficPolicy is the Service's policy, Cluster or Local.
	ExternalTrafficPolicy corev1.ServiceExternalTrafficPolicy
	// SourceRanges restricts the client addresses allowed; empty allows all.
	SourceRanges []netip.Prefix
	// IPFamilies are the address families the Service wants, in order.
	IPFamilies []corev1.IPFamily
	// RequestedIP is the deprecated spec.loadBalancerIP, if set.
	RequestedIP string
	// SessionAffinity is the Service's spec.sessionAffinity: ClientIP asks that a client
	// address's connections go to one backend, None (what the controller makes of an
	// empty one) that they spread. Upstream providers read it from the Service; here it
	// is part of the spec, so a change ensures the load balancer again.
	SessionAffinity corev1.ServiceAffinity
	// SessionAffinityTimeout is, with ClientIP, how long a client stays on its backend
	// after its last connection: spec.sessionAffinityConfig.clientIP.timeoutSeconds, or
	// Kubernetes' default of 10800 seconds. 0 with None.
	SessionAffinityTimeout time.Duration
}

// LoadBalancerPort is one listener: a Service port as upstream's service controller
// compares it (portEqualForLB), so a change to any field is a new EnsureLoadBalancer.
type LoadBalancerPort struct {
	// Name is the Service port's name.
	Name string
	// Protocol is TCP, UDP or SCTP; the controller turns an empty protocol into TCP.
	Protocol corev1.Protocol
	// Port is the port the load balancer listens on.
	Port int32
	// NodePort is the port on each backend that kube-proxy forwards to the Service.
	NodePort int32
	// TargetPort is the Service port's targetPort, a number or the name of a container
	// port, as the Service gives it. Providers that send traffic straight to pods (or
	// probe them) read it; those forwarding to node ports may ignore it.
	TargetPort intstr.IntOrString
	// AppProtocol is the Service port's appProtocol ("" when unset), such as
	// "kubernetes.io/h2c" or a provider's own name: providers choose listener and
	// health probe protocols from it (cloud-provider-azure#2434).
	AppProtocol string
}

// Backend is one node behind a load balancer.
type Backend struct {
	// NodeName is the Node's name.
	NodeName string
	// ProviderID is the Node's spec.providerID.
	ProviderID string
	// Addresses are the Node's status addresses.
	Addresses []corev1.NodeAddress
	// Node is the Node object from the informer cache. It is shared: never modify it.
	Node *corev1.Node
}

// LoadBalancers manages the cloud load balancers behind Services of type LoadBalancer.
// Every method must be idempotent: the controller retries after any error.
type LoadBalancers interface {
	// GetLoadBalancer returns the status of the load balancer for spec, or an error
	// wrapping ErrNotFound when it does not exist.
	GetLoadBalancer(ctx context.Context, spec *LoadBalancerSpec, svc *corev1.Service) (*corev1.LoadBalancerStatus, error)
	// EnsureLoadBalancer creates or updates the load balancer to match spec and returns
	// its status.
	EnsureLoadBalancer(ctx context.Context, spec *LoadBalancerSpec, svc *corev1.Service) (*corev1.LoadBalancerStatus, error)
	// UpdateLoadBalancerBackends sets the backends of an existing load balancer to
	// spec.Backends (the whole desired set, not a delta).
	UpdateLoadBalancerBackends(ctx context.Context, spec *LoadBalancerSpec, svc *corev1.Service) error
	// EnsureLoadBalancerDeleted deletes the load balancer. It returns nil when the load
	// balancer is already gone.
	EnsureLoadBalancerDeleted(ctx context.Context, spec *LoadBalancerSpec, svc *corev1.Service) error
}

// Route sends a pod CIDR to the node that owns it.
type Route struct {
	// Name is the cloud's name for the route; empty when creating.
	Name string
	// TargetNode is the name of the node the traffic goes to.
	TargetNode string
	// DestinationCIDR is the node's pod CIDR.
	DestinationCIDR netip.Prefix
	// Blackhole is set by the cloud for routes whose target instance is gone.
	Blackhole bool
	// TargetNodeAddresses are the target node's status addresses. The controller sets
	// them on every route it creates, for providers that route to a next-hop address
	// rather than to an instance (upstream's Route.TargetNodeAddresses). Read them,
	// never modify them.
	TargetNodeAddresses []corev1.NodeAddress
	// EnableNodeAddresses is set by a provider in ListRoutes on a route whose
	// TargetNodeAddresses it recorded at creation and lists back (in any order). The
	// controller then replaces the route, with DeleteRoute and CreateRoute, when its
	// node's addresses change. Unset, the addresses are not compared: a provider that
	// does not record them would otherwise see every route replaced on every sync.
	// Upstream's Route.EnableNodeAddresses.
	EnableNodeAddresses bool
}

// SameNodeAddresses reports whether a and b hold the same addresses in any order, as
// upstream's route controller compares them (equalNodeAddrs): a provider listing a
// route's TargetNodeAddresses need not keep the order it was given.
func SameNodeAddresses(a, b []corev1.NodeAddress) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// Routes manages pod-network routes. Calls are scoped to one cluster.
type Routes interface {
	// ListRoutes lists the routes of the cluster.
	ListRoutes(ctx context.Context, clusterName string) ([]Route, error)
	// CreateRoute creates route; nameHint is a stable name the provider may use. It
	// returns nil when an identical route exists.
	CreateRoute(ctx context.Context, clusterName, nameHint string, route Route) error
	// DeleteRoute deletes route. It returns nil when the route is already gone.
	DeleteRoute(ctx context.Context, clusterName string, route Route) error
}

// RouteChange is one change of a RouteBatcher call: a route to create, with its name
// hint, or (Delete set) a route to delete, as ListRoutes returned it or as it was
// created.
type RouteChange struct {
	// Delete is set for a deletion; unset, Route is created.
	Delete bool
	// NameHint is CreateRoute's nameHint; unused for a deletion.
	NameHint string
	// Route is the route to create or delete.
	Route Route
}

// RouteBatcher is an optional capability of a Routes value, for clouds that program
// many routes of a network in one call (Azure's route table, a VPC route table
// replaced whole). The route controller asserts it on the Routes the provider returns:
// it groups the changes that wait at the same moment into one call of at most
// MaxRouteChanges, and calls CreateRoute and DeleteRoute one route at a time when the
// provider does not implement it. Nothing else changes for the provider: ListRoutes
// stays the only read.
type RouteBatcher interface {
	// MaxRouteChanges is the most changes one ApplyRoutes call takes; at least 1.
	MaxRouteChanges() int
	// ApplyRoutes applies changes (deletions before creations, at most
	// MaxRouteChanges) in one cloud call, each as idempotent as CreateRoute and
	// DeleteRoute: an identical route that exists is created, a route that is gone is
	// deleted. On an error the caller assumes nothing about which changes were made:
	// it lists the routes again. An error that IsInvalid says the request as a whole
	// cannot succeed: the controller then splits the changes in halves, down to single
	// CreateRoute and DeleteRoute calls, so that the change at fault fails alone. An
	// error that IsNotImplemented (a cloud without the batch) makes the controller send
	// every change by itself from then on.
	ApplyRoutes(ctx context.Context, clusterName string, changes []RouteChange) error
}

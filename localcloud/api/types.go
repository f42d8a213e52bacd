package api

import (
	"encoding/json"
	"fmt"
	"time"
)

// Version is the API version, the first element of every resource path.
const Version = "v1"

// InstanceState is the lifecycle state of an instance. The values are those of the
// provider contract's cloud.InstanceState.
type InstanceState string

// Instance states.
const (
	InstanceRunning    InstanceState = "running"
	InstanceStopped    InstanceState = "stopped"
	InstanceTerminated InstanceState = "terminated"
)

// AddressType is the kind of an instance address. The values are Kubernetes'
// NodeAddressType values, so a provider copies them over unchanged.
type AddressType string

// Address types.
const (
	AddressInternalIP  AddressType = "InternalIP"
	AddressExternalIP  AddressType = "ExternalIP"
	AddressHostname    AddressType = "Hostname"
	AddressInternalDNS AddressType = "InternalDNS"
	AddressExternalDNS AddressType = "ExternalDNS"
)

// Address is one address of an instance.
type Address struct {
	Type    AddressType `json:"type"`
	Address string      `json:"address"`
}

// InstanceKind is what an instance is: a record, or a real host on the cloud's machine.
type InstanceKind string

// Instance kinds.
const (
	// InstanceRecord is an instance that exists in the cloud's state only (the default):
	// it needs no privilege and costs nothing, for simulated nodes and scale runs.
	InstanceRecord InstanceKind = "record"
	// InstanceHost is a real host on the machine the cloud runs on: network, mount and
	// UTS namespaces, an address on the cloud's bridge, a cgroup, a state directory, and
	// a boot command the cloud runs inside it and supervises. It needs a cloud started
	// as root with host instances enabled.
	InstanceHost InstanceKind = "host"
)

// InstanceSpec is the body of an instance create request. Empty Zone, Region and
// InstanceType take the server's defaults; without an InternalIP address the server
// assigns one from its instance range, and without a Hostname address it adds Name.
type InstanceSpec struct {
	// Name is the instance's name, the name of the Node it backs. Unique in the cloud.
	Name         string            `json:"name"`
	Zone         string            `json:"zone,omitempty"`
	Region       string            `json:"region,omitempty"`
	InstanceType string            `json:"instanceType,omitempty"`
	Addresses    []Address         `json:"addresses,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	// Kind is "record" (the default) or "host". The fields below are for hosts only.
	Kind InstanceKind `json:"kind,omitempty"`
	// BootCommand is the argv a host runs when it boots, the cloud's "user data":
	// started inside the host, started again after a backoff when it exits. Required
	// for a host.
	BootCommand []string `json:"bootCommand,omitempty"`
	// Env is added to the boot command's environment. Names starting with NEPHELE_ are
	// the cloud's.
	Env map[string]string `json:"env,omitempty"`
	// PrivatePaths are absolute directories of the machine over which a host gets a
	// private directory of its own (in its mount namespace): paths its software would
	// otherwise share with other hosts, such as /var/lib/kubelet.
	PrivatePaths []string `json:"privatePaths,omitempty"`
}

// HostStatus is what the cloud reports about a host instance's machine side.
type HostStatus struct {
	// Phase is running (booted, or waiting to boot again after its boot command
	// exited), stopping or stopped.
	Phase string `json:"phase"`
	// Dir is the host's state directory (NEPHELE_HOST_DIR), kept until it is
	// terminated; Log is its boot log there.
	Dir string `json:"dir"`
	Log string `json:"log"`
	// NetNS, MountNS and UTSNS are the host's namespace files while it is up (to run
	// something inside with its /proc, enter its PID namespace too: nsenter --target
	// BootPID --net --mount --uts --pid); Cgroup its cgroup path below each hierarchy's root.
	NetNS   string `json:"netns,omitempty"`
	MountNS string `json:"mountns,omitempty"`
	UTSNS   string `json:"utsns,omitempty"`
	Cgroup  string `json:"cgroup,omitempty"`
	// BootPID is the running boot process: the host's init, PID 1 of its PID namespace,
	// whose child is the boot command.
	BootPID int `json:"bootPID,omitempty"`
	// Boots counts the boot command's starts since the cloud started.
	Boots int `json:"boots,omitempty"`
	// LastExit says how the boot process last ended: as its boot command did (exit
	// status 128+N after signal N), or "signal: killed" when it was killed itself.
	LastExit string `json:"lastExit,omitempty"`
	// Error is the last failure to boot the host.
	Error string `json:"error,omitempty"`
}

// ConsoleOutput is the end of a host's boot log, the answer of a console request.
type ConsoleOutput struct {
	// Output is the log's last bytes, at most the requested number.
	Output string `json:"output"`
	// Truncated is set when the log holds more than Output.
	Truncated bool `json:"truncated,omitempty"`
	// Path is the log file on the cloud's machine.
	Path string `json:"path"`
}

// Instance is a machine in the local cloud.
type Instance struct {
	// ID is the cloud's identifier, "i-" and twelve hex digits, assigned in creation order.
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	Zone         string            `json:"zone"`
	Region       string            `json:"region"`
	InstanceType string            `json:"instanceType"`
	Addresses    []Address         `json:"addresses"`
	Labels       map[string]string `json:"labels,omitempty"`
	State        InstanceState     `json:"state"`
	CreatedAt    time.Time         `json:"createdAt"`
	UpdatedAt    time.Time         `json:"updatedAt"`
	// Kind is empty for records (the default) and "host" for hosts, whose spec
	// fields follow; Host is their machine side, in answers only.
	Kind         InstanceKind      `json:"kind,omitempty"`
	BootCommand  []string          `json:"bootCommand,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
	PrivatePaths []string          `json:"privatePaths,omitempty"`
	Host         *HostStatus       `json:"host,omitempty"`
}

// IsHost reports whether the instance is a host.
func (i *Instance) IsHost() bool { return i.Kind == InstanceHost }

// InstanceList is one page of an instance listing. An empty NextPageToken means the
// listing is complete.
type InstanceList struct {
	Items         []Instance `json:"items"`
	NextPageToken string     `json:"nextPageToken,omitempty"`
}

// Protocol is a load balancer port's transport protocol.
type Protocol string

// Protocols the data plane forwards.
const (
	ProtocolTCP Protocol = "TCP"
	ProtocolUDP Protocol = "UDP"
)

// Port is one load balancer listener: traffic to VIP:Port is forwarded to each
// backend's Address:NodePort (the user-space data plane), or to each backend unchanged
// (the kernel data plane of a cloud with hosts, where NodePort may be 0: a Service with
// allocateLoadBalancerNodePorts false).
type Port struct {
	Name     string   `json:"name,omitempty"`
	Protocol Protocol `json:"protocol"`
	Port     int32    `json:"port"`
	NodePort int32    `json:"nodePort"`
}

// SessionAffinity is how a load balancer spreads one client's connections: Kubernetes'
// spec.sessionAffinity.
type SessionAffinity string

// Session affinities.
const (
	// SessionAffinityNone spreads every new connection over the healthy backends.
	SessionAffinityNone SessionAffinity = "None"
	// SessionAffinityClientIP sends a client address's connections to one backend.
	SessionAffinityClientIP SessionAffinity = "ClientIP"
)

// Session affinity timeouts, in seconds: Kubernetes' default and maximum of
// sessionAffinityConfig.clientIP.timeoutSeconds.
const (
	DefaultSessionAffinityTimeoutSeconds = 10800
	MaxSessionAffinityTimeoutSeconds     = 86400
)

// Limits of one load balancer, as every cloud has them (a GCE forwarding rule takes 5
// ports, an AWS NLB 50 listeners, an Azure NSG 1,000 rules). A spec over a limit is
// refused naming the field, so that no credential can make the cloud hold or program
// an unbounded load balancer.
const (
	// MaxLoadBalancerPorts bounds spec.ports.
	MaxLoadBalancerPorts = 100
	// MaxSourceRanges bounds spec.sourceRanges.
	MaxSourceRanges = 1000
	// MaxBackends bounds a load balancer's backends: one per node of the largest
	// cluster nephele is measured at (bench scale xl, 100,000 nodes).
	MaxBackends = 100_000
)

// IPMode is how a load balancer's VIP reaches the backends: Kubernetes' ingress ipMode.
type IPMode string

// IP modes.
const (
	// IPModeVIP: packets reach the backends with the VIP as destination and the client
	// as source (the kernel data plane).
	IPModeVIP IPMode = "VIP"
	// IPModeProxy: a proxy terminates the client's connection and opens its own to a
	// backend's node port (the user-space data plane).
	IPModeProxy IPMode = "Proxy"
)

// Backend is one node behind a load balancer.
type Backend struct {
	NodeName string `json:"nodeName"`
	// Address is the IP address traffic is forwarded to.
	Address string `json:"address"`
}

// LoadBalancerSpec is the desired state of a load balancer, the body of an ensure
// request.
type LoadBalancerSpec struct {
	// ClusterName is the cluster the load balancer belongs to; listings can filter by it.
	ClusterName string `json:"clusterName,omitempty"`
	// Service is "namespace/name" of the Service it serves, for people reading the state.
	Service  string    `json:"service,omitempty"`
	Ports    []Port    `json:"ports"`
	Backends []Backend `json:"backends"`
	// HealthCheckNodePort, when set, makes health checks an HTTP GET of /healthz on this
	// port of each backend instead of a TCP connect to the node port: the Service's
	// health check node port for externalTrafficPolicy Local, kube-proxy's own healthz
	// port (10256) for Cluster, as the local provider sends them.
	HealthCheckNodePort int32 `json:"healthCheckNodePort,omitempty"`
	// SourceRanges are the CIDRs clients may connect from; empty allows everyone.
	SourceRanges []string `json:"sourceRanges,omitempty"`
	// RequestedIP asks for a particular VIP from the pool (Service spec.loadBalancerIP).
	RequestedIP string `json:"requestedIP,omitempty"`
	// SessionAffinity is None (or empty) or ClientIP.
	SessionAffinity SessionAffinity `json:"sessionAffinity,omitempty"`
	// SessionAffinityTimeoutSeconds is how long a client address stays on its backend
	// after its last new connection, with ClientIP: 1 to 86400, 0 for the default
	// (10800).
	SessionAffinityTimeoutSeconds int32 `json:"sessionAffinityTimeoutSeconds,omitempty"`
}

// BackendsUpdate is the body of an update-backends request: the whole desired set.
type BackendsUpdate struct {
	Backends []Backend `json:"backends"`
}

// Health is a backend's health as the data plane last saw it.
type Health string

// Health values. Unknown means no check has finished yet, or checks are disabled.
const (
	HealthUnknown   Health = "unknown"
	HealthHealthy   Health = "healthy"
	HealthUnhealthy Health = "unhealthy"
)

// BackendStatus is a backend's health.
type BackendStatus struct {
	NodeName string `json:"nodeName"`
	Address  string `json:"address"`
	Health   Health `json:"health"`
}

// LoadBalancerStatus is what the cloud reports about a load balancer.
type LoadBalancerStatus struct {
	// VIP is the address clients connect to.
	VIP string `json:"vip"`
	// IPMode says how the VIP reaches the backends: VIP (the kernel data plane) or
	// Proxy (the user-space one).
	IPMode   IPMode          `json:"ipMode,omitempty"`
	Backends []BackendStatus `json:"backends,omitempty"`
	// Error is set when the data plane could not open the listeners (for example after
	// a restart found a port taken); the next ensure retries.
	Error string `json:"error,omitempty"`
}

// LoadBalancer is a load balancer in the local cloud.
type LoadBalancer struct {
	Name      string             `json:"name"`
	Spec      LoadBalancerSpec   `json:"spec"`
	Status    LoadBalancerStatus `json:"status"`
	CreatedAt time.Time          `json:"createdAt"`
	UpdatedAt time.Time          `json:"updatedAt"`
}

// LoadBalancerList is a listing of load balancers.
type LoadBalancerList struct {
	Items []LoadBalancer `json:"items"`
}

// RouteSpec is the body of a route create request. Give TargetNode (an instance name),
// TargetInstance (an instance ID), or both if they agree. An empty Name is derived
// from the destination.
type RouteSpec struct {
	Name            string `json:"name,omitempty"`
	DestinationCIDR string `json:"destinationCIDR"`
	TargetNode      string `json:"targetNode,omitempty"`
	TargetInstance  string `json:"targetInstance,omitempty"`
	// TargetNodeAddresses are the target node's addresses as Kubernetes lists them. The
	// cloud routes to the instance and only stores them, for clients that compare them
	// with the node's (upstream's route controller replaces a route whose node's
	// addresses changed). Optional: clients that predate the field send none.
	TargetNodeAddresses []Address `json:"targetNodeAddresses,omitempty"`
}

// Route sends a destination CIDR to an instance.
type Route struct {
	Name            string    `json:"name"`
	ClusterName     string    `json:"clusterName"`
	DestinationCIDR string    `json:"destinationCIDR"`
	TargetNode      string    `json:"targetNode"`
	TargetInstance  string    `json:"targetInstance"`
	CreatedAt       time.Time `json:"createdAt"`
	// Blackhole is set in answers when the target instance no longer exists or is
	// terminated: traffic to the destination goes nowhere.
	Blackhole bool `json:"blackhole,omitempty"`
	// TargetNodeAddresses are the addresses the route was created with, if any.
	TargetNodeAddresses []Address `json:"targetNodeAddresses,omitempty"`
}

// MaxRouteChanges is the most changes one RouteChanges request holds.
const MaxRouteChanges = 500

// RouteChanges is the body of a routes.apply request: route deletions and creations in
// one cluster, applied in one transaction, all or none (deletions first). Each is as
// idempotent as its single call: deleting a route that does not exist, or creating
// one that exists with the same destination and target, succeeds. The answer is a
// RouteList of the created routes, in the order of Create.
type RouteChanges struct {
	// Delete names the routes to delete.
	Delete []string `json:"delete,omitempty"`
	// Create are the routes to create.
	Create []RouteSpec `json:"create,omitempty"`
}

// RouteList is a listing of a cluster's routes.
type RouteList struct {
	Items []Route `json:"items"`
}

// Reason is the machine-readable cause in an error answer.
type Reason string

// Reasons.
const (
	ReasonInvalid          Reason = "Invalid"
	ReasonNotFound         Reason = "NotFound"
	ReasonAlreadyExists    Reason = "AlreadyExists"
	ReasonConflict         Reason = "Conflict"
	ReasonLimitExceeded    Reason = "LimitExceeded"
	ReasonUnauthorized     Reason = "Unauthorized"
	ReasonForbidden        Reason = "Forbidden"
	ReasonThrottled        Reason = "Throttled"
	ReasonUnavailable      Reason = "Unavailable"
	ReasonNotImplemented   Reason = "NotImplemented"
	ReasonInternal         Reason = "Internal"
	ReasonUnknownEndpoint  Reason = "UnknownEndpoint"
	ReasonMethodNotAllowed Reason = "MethodNotAllowed"
)

// Error is the body of every answer with a 4xx or 5xx status.
type Error struct {
	Message string `json:"error"`
	Reason  Reason `json:"reason"`
	// Field names the offending request field for 400 answers, e.g. "spec.ports[0].protocol".
	Field string `json:"field,omitempty"`
}

// Duration is a time.Duration written in JSON as a Go duration string ("250ms").
type Duration struct{ time.Duration }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string such as "1.5s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string such as \"250ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	d.Duration = v
	return nil
}

// Distribution is how injected latency is drawn.
type Distribution string

// Distributions.
const (
	// DistributionFixed always waits Fixed.
	DistributionFixed Distribution = "fixed"
	// DistributionUniform waits between Min and Max, uniformly.
	DistributionUniform Distribution = "uniform"
	// DistributionNormal waits a normally distributed time (Mean, StdDev), never below 0.
	DistributionNormal Distribution = "normal"
)

// Latency is injected delay. Distribution selects which other fields matter; an empty
// Distribution means fixed.
type Latency struct {
	Distribution Distribution `json:"distribution,omitempty"`
	Fixed        Duration     `json:"fixed,omitzero"`
	Min          Duration     `json:"min,omitzero"`
	Max          Duration     `json:"max,omitzero"`
	Mean         Duration     `json:"mean,omitzero"`
	StdDev       Duration     `json:"stddev,omitzero"`
}

// RateLimit is a token bucket: QPS tokens per second, at most Burst stored. Calls that
// find the bucket empty are answered 429 with Retry-After.
type RateLimit struct {
	QPS   float64 `json:"qps"`
	Burst int     `json:"burst,omitempty"`
}

// Fault is one fault rule. Operation selects calls (see ValidOperationPattern). Each
// knob of a call comes from the most specific matching rule that sets it; outages
// and not-implemented apply if any matching rule sets them, and every matching rule's
// rate limit applies.
type Fault struct {
	Operation string `json:"operation"`
	// Latency delays every matching answer, injected failures included.
	Latency *Latency `json:"latency,omitempty"`
	// ErrorRate is the fraction of calls answered 500.
	ErrorRate float64 `json:"errorRate,omitempty"`
	// RateLimit throttles matching calls; one bucket per rule, shared by the
	// operations it matches.
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	// Cost is how many tokens a matching call takes from every rate limit it meets (at
	// most a bucket's burst); 0 means 1. A call that does the work of many, such as
	// routes.apply, may cost more of the account's quota than one that does one thing.
	// The most specific rule that sets it decides.
	Cost int `json:"cost,omitempty"`
	// Outage answers every matching call 503.
	Outage bool `json:"outage,omitempty"`
	// NotImplemented answers every matching call 501.
	NotImplemented bool `json:"notImplemented,omitempty"`
	// InvisibleFor hides instances younger than this from instance reads, lists and
	// actions: eventual consistency after a create.
	InvisibleFor Duration `json:"invisibleFor,omitzero"`
}

// FaultList is the body of GET and PUT /admin/faults.
type FaultList struct {
	Faults []Fault `json:"faults"`
}

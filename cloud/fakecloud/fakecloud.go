package fakecloud

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/nephele-dev/nephele/cloud"
)

// DefaultName is the provider name (and provider ID scheme) of a Cloud built without
// Options.Name.
const DefaultName = "fake"

// DefaultVIPPool is the prefix load balancer VIPs come from by default: TEST-NET-1, so a
// VIP can never be mistaken for a real address.
var DefaultVIPPool = netip.MustParsePrefix("192.0.2.0/24")

// DefaultCallLogLimit is how many calls the call log keeps when Options.CallLogLimit is 0.
const DefaultCallLogLimit = 10000

// Capability names one of the capabilities a cloud.Provider may have.
type Capability string

// The capabilities a Cloud can switch off.
const (
	CapInstances      Capability = "instances"
	CapInstanceLister Capability = "instance_lister"
	CapLoadBalancers  Capability = "load_balancers"
	CapRoutes         Capability = "routes"
)

// Options configures a Cloud. The zero value is a cloud named "fake" with every
// capability.
type Options struct {
	// Name is the provider name and the scheme of the provider IDs the cloud makes up.
	// Empty means DefaultName.
	Name string
	// VIPPool is the prefix load balancer VIPs are allocated from. The zero value
	// means DefaultVIPPool.
	VIPPool netip.Prefix
	// Disabled lists capabilities the cloud starts without.
	Disabled []Capability
	// MaxRouteChanges, when positive, makes the cloud's Routes a cloud.RouteBatcher
	// taking at most that many changes a call (SetMaxRouteChanges changes it).
	MaxRouteChanges int
	// CallLogLimit bounds the ordered call log (the counters are always exact):
	// 0 means DefaultCallLogLimit, a negative value means no limit.
	CallLogLimit int
}

// Cloud is an in-memory cloud.Provider for unit tests. Create it with New; the methods
// that seed and inspect its state (AddInstance, LoadBalancer, AllRoutes, …) and those
// that program faults (SetLatency, FailNext, Hang, …) take effect immediately, also
// for calls already waiting in a fault.
type Cloud struct {
	name     string
	logLimit int

	mu       sync.Mutex
	disabled map[Capability]bool
	// instances are keyed by provider ID.
	instances map[string]*cloud.Instance
	lbs       map[string]*LoadBalancer
	vips      vipPool
	// routes are keyed by cluster name, then destination CIDR.
	routes       map[string]map[netip.Prefix]*cloud.Route
	routeCounter int
	// maxRouteChanges is Options.MaxRouteChanges; 0 means no batching.
	maxRouteChanges int
	faults          faultState
	calls           callLog
}

// Interface checks: a Cloud has every capability.
var (
	_ cloud.Provider       = (*Cloud)(nil)
	_ cloud.Instances      = (*Cloud)(nil)
	_ cloud.InstanceLister = (*Cloud)(nil)
	_ cloud.LoadBalancers  = (*Cloud)(nil)
	_ cloud.Routes         = (*Cloud)(nil)
)

// New returns an empty cloud. It fails only on options that make no sense: an invalid
// provider name or a VIP pool too small to hold one address.
func New(opts Options) (*Cloud, error) {
	name := opts.Name
	if name == "" {
		name = DefaultName
	}
	// The name is the scheme of every provider ID the cloud makes up, so it must be
	// one ParseProviderID accepts.
	if _, err := cloud.NewProviderID(name, "x"); err != nil {
		return nil, fmt.Errorf("fake cloud name %q: %w", name, err)
	}
	pool := opts.VIPPool
	if !pool.IsValid() {
		pool = DefaultVIPPool
	}
	vips, err := newVIPPool(pool)
	if err != nil {
		return nil, err
	}
	limit := opts.CallLogLimit
	if limit == 0 {
		limit = DefaultCallLogLimit
	}
	c := &Cloud{
		name:      name,
		logLimit:  limit,
		disabled:  map[Capability]bool{},
		instances: map[string]*cloud.Instance{},
		lbs:       map[string]*LoadBalancer{},
		vips:      vips,
		routes:    map[string]map[netip.Prefix]*cloud.Route{},
		faults:    newFaultState(),
		calls:     newCallLog(),

		maxRouteChanges: opts.MaxRouteChanges,
	}
	if opts.MaxRouteChanges < 0 {
		return nil, fmt.Errorf("fakecloud: Options.MaxRouteChanges is %d: use 0 for no batching or a positive bound", opts.MaxRouteChanges)
	}
	for _, capability := range opts.Disabled {
		c.disabled[capability] = true
	}
	return c, nil
}

// ProviderName implements cloud.Provider.
func (c *Cloud) ProviderName() string { return c.name }

// SetCapability switches a capability on or off. The capability methods of
// cloud.Provider report the change from the next call on.
func (c *Cloud) SetCapability(capability Capability, enabled bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.disabled[capability] = !enabled
}

func (c *Cloud) has(capability Capability) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.disabled[capability]
}

// Instances implements cloud.Provider.
func (c *Cloud) Instances() (cloud.Instances, bool) {
	if !c.has(CapInstances) {
		return nil, false
	}
	return c, true
}

// InstanceLister implements cloud.Provider.
func (c *Cloud) InstanceLister() (cloud.InstanceLister, bool) {
	if !c.has(CapInstanceLister) {
		return nil, false
	}
	return c, true
}

// LoadBalancers implements cloud.Provider.
func (c *Cloud) LoadBalancers() (cloud.LoadBalancers, bool) {
	if !c.has(CapLoadBalancers) {
		return nil, false
	}
	return c, true
}

// Routes implements cloud.Provider.
func (c *Cloud) Routes() (cloud.Routes, bool) {
	if !c.has(CapRoutes) {
		return nil, false
	}
	c.mu.Lock()
	batch := c.maxRouteChanges > 0
	c.mu.Unlock()
	if batch {
		return batchRoutes{c}, true
	}
	return c, true
}

package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/nephele-dev/nephele/cloud"
)

// clientName is the user agent suffix of the clients the adapter builds for itself.
const clientName = "upstream-cloud-provider"

// Provider is an upstream cloudprovider.Interface as a cloud.Provider. It is safe for
// concurrent use when the upstream provider is.
type Provider struct {
	up   cloudprovider.Interface
	name string

	// instancesOff and routesOff are set when the provider answered a call with
	// ImplementedElsewhere: from then on the capability is reported absent.
	instancesOff atomic.Bool
	routesOff    atomic.Bool

	initMu      sync.Mutex
	initialized bool
}

var (
	_ cloud.Provider    = (*Provider)(nil)
	_ cloud.Initializer = (*Provider)(nil)
)

// New returns the adapter for up. It fails when up is nil or its ProviderName cannot
// be the scheme of provider IDs.
func New(up cloudprovider.Interface) (*Provider, error) {
	if up == nil {
		return nil, errors.New("upstream cloud provider: the provider is nil")
	}
	name := up.ProviderName()
	if _, err := cloud.NewProviderID(name, "x"); err != nil {
		return nil, fmt.Errorf("upstream cloud provider %q: its name cannot be the scheme of provider IDs: %w", name, err)
	}
	return &Provider{up: up, name: name}, nil
}

// Factory adapts an upstream factory, such as the one a provider passes to
// cloudprovider.RegisterCloudProvider, to a cloud.Factory.
func Factory(f cloudprovider.Factory) cloud.Factory {
	return func(config io.Reader) (cloud.Provider, error) {
		if f == nil {
			return nil, errors.New("upstream cloud provider: the factory is nil")
		}
		up, err := f(config)
		if err != nil {
			return nil, err
		}
		return New(up)
	}
}

// Registered returns a cloud.Factory that builds the provider registered upstream-style,
// with cloudprovider.RegisterCloudProvider, under name: the way existing providers
// register themselves in an init function.
func Registered(name string) cloud.Factory {
	return func(config io.Reader) (cloud.Provider, error) {
		if !cloudprovider.IsCloudProvider(name) {
			return nil, fmt.Errorf("upstream cloud provider %q is not registered with cloudprovider.RegisterCloudProvider (is its package imported?)", name)
		}
		up, err := cloudprovider.GetCloudProvider(name, config)
		if err != nil {
			return nil, err
		}
		return New(up)
	}
}

// Upstream returns the hosted provider.
func (p *Provider) Upstream() cloudprovider.Interface { return p.up }

// ProviderName implements cloud.Provider: the upstream provider's name.
func (p *Provider) ProviderName() string { return p.name }

// Instances implements cloud.Provider, from InstancesV2 when the provider has it,
// otherwise from Instances and Zones.
func (p *Provider) Instances() (cloud.Instances, bool) {
	if p.instancesOff.Load() {
		return nil, false
	}
	if v2, ok := p.up.InstancesV2(); ok && v2 != nil {
		return instancesV2{p: p, up: v2}, true
	}
	if v1, ok := p.up.Instances(); ok && v1 != nil {
		in := instancesV1{p: p, up: v1}
		if z, ok := p.up.Zones(); ok && z != nil {
			in.zones = z
		}
		return in, true
	}
	return nil, false
}

// InstanceLister implements cloud.Provider: upstream has no batch listing, so it is
// always absent.
func (p *Provider) InstanceLister() (cloud.InstanceLister, bool) { return nil, false }

// LoadBalancers implements cloud.Provider.
func (p *Provider) LoadBalancers() (cloud.LoadBalancers, bool) {
	lb, ok := p.up.LoadBalancer()
	if !ok || lb == nil {
		return nil, false
	}
	return loadBalancers{p: p, up: lb}, true
}

// Routes implements cloud.Provider.
func (p *Provider) Routes() (cloud.Routes, bool) {
	if p.routesOff.Load() {
		return nil, false
	}
	r, ok := p.up.Routes()
	if !ok || r == nil {
		return nil, false
	}
	return routes{p: p, up: r}, true
}

// switchOff turns a capability off after the provider said ImplementedElsewhere.
func (p *Provider) switchOff(ctx context.Context, flag *atomic.Bool, capability string) {
	if flag.CompareAndSwap(false, true) {
		logr.FromContextOrDiscard(ctx).Info("The upstream provider implements this capability elsewhere; reporting it absent from now on",
			"provider", p.name, "capability", capability)
	}
}

// Initialize implements cloud.Initializer: it calls the provider's Initialize with a
// client builder backed by clients and ctx's lifetime as the stop channel, and gives a
// provider that wants informers a shared informer factory that runs until ctx ends.
// It may be called once.
func (p *Provider) Initialize(ctx context.Context, clients cloud.ClientBuilder) (err error) {
	p.initMu.Lock()
	defer p.initMu.Unlock()
	if p.initialized {
		return fmt.Errorf("upstream cloud provider %s: Initialize called twice", p.name)
	}
	if clients == nil {
		return fmt.Errorf("upstream cloud provider %s: Initialize needs a client builder", p.name)
	}
	log := logr.FromContextOrDiscard(ctx).WithName("upstream-cloud-provider")
	// A builder that cannot build fails here, not later in a provider's *OrDie call.
	client, err := clients.Client(clientName)
	if err != nil {
		return fmt.Errorf("upstream cloud provider %s: building a Kubernetes client: %w", p.name, err)
	}
	p.initialized = true
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("upstream cloud provider %s: Initialize panicked: %v", p.name, r)
		}
	}()
	p.up.Initialize(&clientBuilder{clients: clients, log: log}, ctx.Done())
	if iu, ok := p.up.(cloudprovider.InformerUser); ok {
		factory := informers.NewSharedInformerFactory(client, 0)
		iu.SetInformers(factory)
		factory.Start(ctx.Done())
		go func() {
			<-ctx.Done()
			factory.Shutdown()
		}()
	}
	if !p.up.HasClusterID() {
		log.Info("The upstream provider reports no cluster ID: resources of several clusters in one account may be confused", "provider", p.name)
	}
	return nil
}

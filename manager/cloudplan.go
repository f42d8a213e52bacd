package manager

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/manager/clouds"
	"github.com/nephele-dev/nephele/manager/instrumented"
	"github.com/nephele-dev/nephele/manager/inventory"
)

// cloudPlan is one cloud a runtime serves: its provider, the settings its controllers
// read, and how to reload its configuration.
type cloudPlan struct {
	// name is the cloud's name in --clouds-config, "" for the one cloud of
	// --cloud-provider: it labels the cloud's metrics and names its readiness checks.
	name     string
	provider cloud.Provider
	// controllers are the manager's controller settings with this cloud's ownership and
	// load balancer class.
	controllers ControllerConfig
	// config is what the provider was built from and how to rebuild it; its period is
	// 0 when the manager never reloads.
	config cloudConfigPlan
}

// buildClouds builds the provider of every cloud cfg names and checks what only built
// providers tell: that no two clouds own one provider-ID scheme.
func buildClouds(cfg CompletedConfig, registry *cloud.Registry) ([]cloudPlan, error) {
	o := &cfg.options
	multi := cfg.MultiCloud()
	plans := make([]cloudPlan, 0, len(cfg.clouds))
	for i, src := range cfg.clouds {
		build := func(config []byte) (cloud.Provider, error) {
			var r io.Reader
			if config != nil {
				r = bytes.NewReader(config)
			}
			return registry.New(src.Provider, r)
		}
		provider, err := build(src.Config)
		if err != nil {
			return nil, buildError(registry, src, i, multi, err)
		}
		plans = append(plans, cloudPlan{
			name:        src.Name,
			provider:    provider,
			controllers: cfg.controllers.forCloud(src, provider, multi),
			config:      newCloudConfigPlan(src.CloudConfig, src.Config, provider, o.CloudConfigReloadPeriod, build),
		})
	}
	if !multi {
		return plans, nil
	}
	for i := range plans {
		own := plans[i].controllers.Ownership
		if own.OwnsEveryNode() {
			return nil, fmt.Errorf("invalid value for --clouds-config: clouds[%d] (%s): provider %s's platforms %q own every node: name the cloud's provider-ID schemes in platforms",
				i, plans[i].name, plans[i].provider.ProviderName(), own.Platforms)
		}
		if err := own.Validate(); err != nil {
			return nil, fmt.Errorf("invalid value for --clouds-config: clouds[%d] (%s): provider %s's platforms %q: %w: name the cloud's provider-ID schemes in platforms",
				i, plans[i].name, plans[i].provider.ProviderName(), own.Platforms, err)
		}
		for j := range i {
			for _, p := range plans[i].controllers.Ownership.Platforms {
				if slices.Contains(plans[j].controllers.Ownership.Platforms, p) {
					return nil, fmt.Errorf("invalid value for --clouds-config: clouds[%d] (%s) and clouds[%d] (%s) both own provider-ID scheme %q: "+
						"give each cloud's provider a scheme of its own (the local provider's providerIDScheme), and name it in platforms if the provider does not",
						j, plans[j].name, i, plans[i].name, p)
				}
			}
		}
	}
	// Each cloud leaves its siblings' nodes alone without telling anyone: the manager
	// owns them.
	for i := range plans {
		own := &plans[i].controllers.Ownership
		for j := range plans {
			if j != i {
				sib := plans[j].controllers.Ownership
				sib.Siblings = nil
				own.Siblings = append(own.Siblings, sib)
			}
		}
	}
	return plans, nil
}

// buildError names what to fix when cloud i's provider cannot be built: the flag (or
// the --clouds-config field) with the unknown provider name or the refused config.
func buildError(registry *cloud.Registry, src clouds.Source, i int, multi bool, err error) error {
	known := slices.Contains(registry.Names(), src.Provider)
	if !multi {
		flag := "--cloud-config"
		if !known {
			flag = "--cloud-provider"
		}
		return fmt.Errorf("invalid value for %s: %w", flag, err)
	}
	if !known {
		return fmt.Errorf("invalid value for --clouds-config: clouds[%d] (%s).provider: %w", i, src.Name, err)
	}
	return fmt.Errorf("invalid value for --clouds-config: clouds[%d] (%s).cloudConfig %s: %w", i, src.Name, src.CloudConfig, err)
}

// forCloud returns c for the controllers of the cloud src, whose provider is p. The one
// cloud of --cloud-provider takes the flags' ownership and class (withPlatforms). A cloud
// of several owns exactly its platforms (the provider's own unless src names them),
// serves its class, and, when it is the default, Services without a class and (under
// --undeclared-nodes=adopt) nodes that declare no platform; the others ignore those.
func (c ControllerConfig) forCloud(src clouds.Source, p cloud.Provider, multi bool) ControllerConfig {
	if !multi {
		return c.withPlatforms(p)
	}
	c.LoadBalancerClass = src.LoadBalancerClass
	c.ServeUnclassed = src.Default
	c.Ownership.Platforms = slices.Clone(src.Platforms)
	if len(c.Ownership.Platforms) == 0 {
		c.Ownership.Platforms = cloud.Platforms(p)
	}
	if !src.Default {
		c.Ownership.Undeclared = cloud.UndeclaredIgnore
		c.Ownership.Quiet = true
	}
	return c
}

// cloudRuntime is one cloud's part of a running manager: its own call path (budget,
// timeouts, metrics), inventory and reloads, so that one cloud's outage or throttling
// never takes another's budget or workers.
type cloudRuntime struct {
	plan  *cloudPlan
	cloud *instrumented.Cloud
	// swap is the provider behind cloud: the one built at start until a reload
	// replaces it.
	swap      *swapProvider
	inventory *inventory.Inventory // nil without batch listing
	// registry gets the cloud's metrics and its controllers': the manager's registry,
	// with a provider label naming the cloud when the manager serves several.
	registry prometheus.Registerer
}

func newCloudRuntime(cp *cloudPlan, p *runPlan, mainFence *leaseFence) (*cloudRuntime, error) {
	var reg prometheus.Registerer = p.registry
	if cp.name != "" {
		reg = prometheus.WrapRegistererWith(prometheus.Labels{"provider": cp.name}, reg)
	}
	swap := newSwapProvider(cp.provider)
	ic, err := instrumented.New(swap, instrumented.Options{
		Timeout:       p.cloudCall.timeout,
		QPS:           p.cloudCall.qps,
		MinQPS:        p.cloudCall.minQPS,
		MaxQPS:        p.cloudCall.maxQPS,
		Burst:         p.cloudCall.burst,
		MaxRetryAfter: p.cloudCall.maxRetryAfter,
		Registerer:    reg,
	})
	if err != nil {
		return nil, fmt.Errorf("setting up the cloud call path%s: %w", cp.of(), err)
	}
	var inv *inventory.Inventory
	// The inventory lists through the instrumented path like every other cloud call.
	// It serves the controllers under both leases, and lists only while one asks, so
	// the main lease, which the migration lease is only held under, fences it.
	if lister, ok := ic.ForFenced("inventory", fence(mainFence)).InstanceLister(); ok {
		inv = inventory.New(lister)
	}
	return &cloudRuntime{plan: cp, cloud: ic, swap: swap, inventory: inv, registry: reg}, nil
}

// of names the cloud in a message (" of cloud east"), "" for the one cloud of
// --cloud-provider.
func (cp *cloudPlan) of() string {
	if cp.name == "" {
		return ""
	}
	return " of cloud " + cp.name
}

// instance names one of the cloud's runs of something the manager runs once per cloud
// (a controller, a readiness check): name itself for the one cloud of
// --cloud-provider, name.<cloud> otherwise ("service-lb-controller.east").
func (cp *cloudPlan) instance(name string) string {
	if cp.name == "" {
		return name
	}
	return name + "." + cp.name
}

// inventoryOrNil keeps a nil *inventory.Inventory from becoming a non-nil interface.
func (cr *cloudRuntime) inventoryOrNil() Inventory {
	if cr.inventory == nil {
		return nil
	}
	return cr.inventory
}

// startCloud starts what cr runs beside the controllers (its inventory, its reloads)
// and initializes its provider. The returned stop, never nil, stops them; the caller
// calls it whether or not startCloud failed.
func (r *runtime) startCloud(ctx context.Context, cr *cloudRuntime) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range slices.Backward(stops) {
			s()
		}
	}
	if cr.inventory != nil {
		// Listings happen only when a controller asks, so a follower costs nothing.
		invCtx, stopInv := context.WithCancel(ctx)
		stops = append(stops, stopInv)
		go cr.inventory.Run(invCtx)
	}

	// The provider runs under a context of its own, which a reload that replaces it
	// cancels.
	providerCtx, stopProvider := context.WithCancel(ctx)
	stops = append(stops, stopProvider)
	if err := r.initProvider(providerCtx, cr.plan.provider); err != nil {
		return stop, fmt.Errorf("initializing cloud provider %q%s: %w", cr.plan.provider.ProviderName(), cr.plan.of(), err)
	}

	reloader, err := r.cloudReloader(cr, stopProvider)
	if err != nil || reloader == nil {
		return stop, err
	}
	// Reloads do not depend on leadership: a follower keeps its provider current too,
	// so that it leads with the configuration on disk.
	r.addReadyz(cr.plan.instance("cloud-config"), reloader.ready)
	reloadCtx, stopReload := context.WithCancel(ctx)
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		reloader.run(reloadCtx)
	}()
	stops = append(stops, func() {
		stopReload()
		<-reloaded
	})
	return stop, nil
}

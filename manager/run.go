package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/promreg"
	"github.com/nephele-dev/nephele/manager/instrumented"
	"github.com/nephele-dev/nephele/manager/inventory"
	"github.com/nephele-dev/nephele/manager/serving"
)

// runPlan is everything the runtime needs, built by Run from a CompletedConfig and
// the objects Run makes (the provider, the server, the lease identity).
type runPlan struct {
	component  string
	restConfig *rest.Config
	provider   cloud.Provider
	specs      []ControllerSpec
	// owned run under the main lease; migrated only under the migration lease.
	owned, migrated []string
	leaderElect     bool
	mainLease       LeaseConfig
	migrationLease  *LeaseConfig
	controllers     ControllerConfig
	cloudCall       cloudCallConfig
	// cloudConfig is what the provider was built from and how to rebuild it when
	// --cloud-config changes; its period is 0 when the manager never reloads.
	cloudConfig   cloudConfigPlan
	stallTimeout  time.Duration
	startInterval time.Duration
	// useServiceAccounts is --use-service-account-credentials.
	useServiceAccounts bool
	resync             time.Duration
	registry           *prometheus.Registry
	// metrics are the manager's metrics under upstream's names, on registry.
	metrics *managerMetrics
	// server serves health and metrics; nil when --secure-port is 0.
	server *serving.Server
}

// runtime is one running manager: the shared clients, informers, events and cloud path
// that every controller gets a view of.
type runtime struct {
	plan      *runPlan
	log       logr.Logger
	client    kubernetes.Interface
	informers informers.SharedInformerFactory
	events    record.EventBroadcaster
	cloud     *instrumented.Cloud
	// swap is the provider behind cloud: the one built at start until a reload
	// replaces it.
	swap      *swapProvider
	inventory *inventory.Inventory // nil without batch listing
	clients   *controllerClients
	// mainFence and migrationFence gate the cloud calls of the controllers under each
	// lease; nil without leader election (and without migration).
	mainFence, migrationFence *leaseFence

	mu       sync.Mutex
	progress map[string]*Progress
}

func newRuntime(p *runPlan, log logr.Logger) (*runtime, error) {
	client, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(p.restConfig), p.component+"/shared-informers"))
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	swap := newSwapProvider(p.provider)
	ic, err := instrumented.New(swap, instrumented.Options{
		Timeout:       p.cloudCall.timeout,
		QPS:           p.cloudCall.qps,
		MinQPS:        p.cloudCall.minQPS,
		MaxQPS:        p.cloudCall.maxQPS,
		Burst:         p.cloudCall.burst,
		MaxRetryAfter: p.cloudCall.maxRetryAfter,
		Registerer:    p.registry,
	})
	if err != nil {
		return nil, fmt.Errorf("setting up the cloud call path: %w", err)
	}
	var mainFence, migrationFence *leaseFence
	if p.leaderElect {
		mainFence = newLeaseFence(p.mainLease, clock.RealClock{})
		if p.migrationLease != nil {
			migrationFence = newLeaseFence(*p.migrationLease, clock.RealClock{})
		}
	}
	var inv *inventory.Inventory
	// The inventory lists through the instrumented path like every other cloud call.
	// It serves the controllers under both leases, and lists only while one asks, so
	// the main lease, which the migration lease is only held under, fences it.
	if lister, ok := ic.ForFenced("inventory", fence(mainFence)).InstanceLister(); ok {
		inv = inventory.New(lister)
	}
	return &runtime{
		mainFence:      mainFence,
		migrationFence: migrationFence,
		clients: &controllerClients{root: p.restConfig, rootClient: client, component: p.component,
			useServiceAccounts: p.useServiceAccounts},
		inventory: inv,
		plan:      p,
		log:       log,
		client:    client,
		informers: informers.NewSharedInformerFactoryWithOptions(client, p.resync, informers.WithTransform(TrimForCache)),
		events:    record.NewBroadcaster(record.WithContext(context.Background())),
		cloud:     ic,
		swap:      swap,
		progress:  map[string]*Progress{},
	}, nil
}

// run runs the manager until ctx is done or something fatal happens.
func (r *runtime) run(ctx context.Context) error {
	r.events.StartStructuredLogging(3)
	r.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: r.client.CoreV1().Events("")})
	defer r.events.Shutdown()

	if r.inventory != nil {
		// Listings happen only when a controller asks, so a follower costs nothing.
		invCtx, stopInv := context.WithCancel(ctx)
		defer stopInv()
		go r.inventory.Run(invCtx)
	}

	// The provider runs under a context of its own, which a reload that replaces it
	// cancels.
	providerCtx, stopProvider := context.WithCancel(ctx)
	defer stopProvider()
	if err := r.initProvider(providerCtx, r.plan.provider); err != nil {
		return fmt.Errorf("initializing cloud provider %q: %w", r.plan.provider.ProviderName(), err)
	}

	if reloader, err := r.cloudReloader(stopProvider); err != nil {
		return err
	} else if reloader != nil {
		// Reloads do not depend on leadership: a follower keeps its provider current
		// too, so that it leads with the configuration on disk.
		r.addReadyz("cloud-config", reloader.ready)
		reloadCtx, stopReload := context.WithCancel(ctx)
		reloaded := make(chan struct{})
		go func() {
			defer close(reloaded)
			reloader.run(reloadCtx)
		}()
		defer func() {
			stopReload()
			<-reloaded
		}()
	}

	if !r.plan.leaderElect {
		r.log.Info("Leader election disabled: running every enabled controller")
		return r.runControllers(ctx, slices.Concat(r.plan.owned, r.plan.migrated))
	}

	mainWatchdog := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	r.addReadyz("leader-election", func() error { return mainWatchdog.Check(nil) })
	return withLease(ctx, r.log, r.client, r.plan.mainLease, r.mainFence, mainWatchdog, r.leaderGauge(r.plan.mainLease),
		func(ctx context.Context) error {
			if r.plan.migrationLease == nil {
				return r.runControllers(ctx, r.plan.owned)
			}
			return r.runWithMigration(ctx)
		})
}

// runWithMigration runs the owned controllers under the main lease and, beside them,
// campaigns for the migration lease that guards the migrated controllers. Whoever holds
// the migration lease, this manager or a kube-controller-manager configured for the
// same migration, is the only one running those controllers.
func (r *runtime) runWithMigration(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		if errs[0] = r.runControllers(ctx, r.plan.owned); errs[0] != nil {
			cancel(errs[0])
		}
	}()
	go func() {
		defer wg.Done()
		ml := *r.plan.migrationLease
		watchdog := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
		r.addReadyz("leader-migration", func() error { return watchdog.Check(nil) })
		errs[1] = withLease(ctx, r.log.WithValues("migration", true), r.client, ml, r.migrationFence, watchdog, r.leaderGauge(ml),
			func(ctx context.Context) error { return r.runControllers(ctx, r.plan.migrated) })
		if errs[1] != nil {
			cancel(errs[1])
		}
	}()
	wg.Wait()
	return errors.Join(errs...)
}

// runControllers builds the named controllers, starts the informers they registered and
// runs them until ctx is done. A controller that fails stops the others: the manager
// exits and restarts rather than serve half its duties while reporting healthy.
func (r *runtime) runControllers(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return waitDone(ctx)
	}
	type built struct {
		name string
		c    Controller
		p    *Progress
	}
	var run []built
	for _, name := range names {
		spec := r.spec(name)
		cc, p, err := r.controllerContext(ctx, name)
		if err != nil {
			return err
		}
		c, err := spec.New(ctx, cc)
		switch {
		case errors.Is(err, ErrControllerDisabled):
			r.log.Info("Controller not started", "controller", name, "reason", err.Error())
			continue
		case err != nil:
			return fmt.Errorf("starting controller %s: %w", name, err)
		}
		run = append(run, built{name, c, p})
	}

	// Controllers registered their informers in New; start them all at once.
	r.informers.Start(ctx.Done())
	for typ, ok := range r.informers.WaitForCacheSync(ctx.Done()) {
		if !ok && ctx.Err() == nil {
			return fmt.Errorf("informer cache for %v did not sync", typ)
		}
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for i, b := range run {
		if i > 0 && r.plan.startInterval > 0 {
			// --controller-start-interval spreads the first burst of API and cloud calls.
			select {
			case <-ctx.Done():
			case <-time.After(wait.Jitter(r.plan.startInterval, 1.0)):
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.log.Info("Starting controller", "controller", b.name)
			b.p.Started()
			r.setRunning(b.name, true)
			err := b.c.Run(ctx)
			r.setRunning(b.name, false)
			b.p.Stopped(err)
			if err != nil && ctx.Err() == nil {
				r.log.Error(err, "Controller failed", "controller", b.name)
				cancel(fmt.Errorf("controller %s: %w", b.name, err))
				return
			}
			r.log.Info("Controller stopped", "controller", b.name)
		}()
	}
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// setRunning publishes whether the named controller runs, when the manager has its
// upstream-named metrics (a runtime built by a test may not).
func (r *runtime) setRunning(name string, running bool) {
	if r.plan.metrics != nil {
		r.plan.metrics.setRunning(name, running)
	}
}

func (r *runtime) spec(name string) ControllerSpec {
	i := slices.IndexFunc(r.plan.specs, func(s ControllerSpec) bool { return s.Name == name })
	return r.plan.specs[i]
}

// controllerContext builds the view of the runtime one controller gets.
func (r *runtime) controllerContext(ctx context.Context, name string) (*ControllerContext, *Progress, error) {
	r.mu.Lock()
	p, ok := r.progress[name]
	if !ok {
		p = NewProgress(name, r.plan.stallTimeout)
		r.progress[name] = p
		r.addReadyz(name, p.Check)
	}
	r.mu.Unlock()
	cfg, err := r.clients.config(ctx, name, r.spec(name).ClientName)
	if err != nil {
		return nil, nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("building the Kubernetes client for controller %s: %w", name, err)
	}
	return &ControllerContext{
		Name: name,
		ControllerDeps: ControllerDeps{
			Client:    client,
			Informers: r.informers,
			Recorder:  r.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: name}),
			Logger:    r.log.WithName(name),
			Metrics:   r.plan.registry,
			Health:    p,
		},
		Cloud:     r.cloud.ForFenced(name, r.fenceFor(name)),
		Inventory: r.inventoryOrNil(),
		Config:    r.plan.controllers,
	}, p, nil
}

// fenceFor returns the fence on the cloud calls of the named controller: the main
// lease's, and for a migrated controller the migration lease's too; nil without leader
// election.
func (r *runtime) fenceFor(name string) instrumented.Fence {
	if r.mainFence == nil {
		return nil
	}
	if r.migrationFence != nil && slices.Contains(r.plan.migrated, name) {
		return allOf{r.mainFence, r.migrationFence}
	}
	return r.mainFence
}

// fence returns f as an instrumented.Fence, keeping a nil *leaseFence nil.
func fence(f *leaseFence) instrumented.Fence {
	if f == nil {
		return nil
	}
	return f
}

func waitDone(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// leaderGauge returns a callback that publishes whether this instance holds lease: as
// nephele_leader{lease="<namespace>/<name>"} and as upstream's
// leader_election_master_status{name="<name>"}.
func (r *runtime) leaderGauge(lease LeaseConfig) func(bool) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "nephele_leader",
		Help:        "1 while this instance holds the lease, 0 otherwise.",
		ConstLabels: prometheus.Labels{"lease": lease.String()},
	})
	if existing, err := promreg.Register(r.plan.registry, g); err == nil {
		g = existing
	}
	var upstream prometheus.Gauge
	if r.plan.metrics != nil {
		upstream = r.plan.metrics.leader.WithLabelValues(lease.Name)
	}
	return func(leading bool) {
		v := 0.0
		if leading {
			v = 1
		}
		g.Set(v)
		if upstream != nil {
			upstream.Set(v)
		}
	}
}

// clientBuilder hands providers clients that carry their own user agents.
type clientBuilder struct {
	config    *rest.Config
	component string
}

func (b clientBuilder) Config(name string) (*rest.Config, error) {
	return rest.AddUserAgent(rest.CopyConfig(b.config), b.component+"/"+name), nil
}

func (b clientBuilder) Client(name string) (kubernetes.Interface, error) {
	c, _ := b.Config(name)
	return kubernetes.NewForConfig(c)
}

// inventoryOrNil keeps a nil *inventory.Inventory from becoming a non-nil interface.
func (r *runtime) inventoryOrNil() Inventory {
	if r.inventory == nil {
		return nil
	}
	return r.inventory
}

// cloudCallConfig configures the instrumented cloud call path.
type cloudCallConfig struct {
	timeout       time.Duration
	qps           float64
	minQPS        float64
	maxQPS        float64
	burst         int
	maxRetryAfter time.Duration
}

// addReadyz publishes a readiness check when serving is on.
func (r *runtime) addReadyz(name string, check func() error) {
	if r.plan.server == nil {
		return
	}
	err := r.plan.server.AddReadyzChecks(serving.Check{Name: name, Fn: func(*http.Request) error { return check() }})
	if err != nil {
		r.log.Error(err, "Registering readiness check", "check", name)
	}
}

// initProvider calls p's Initialize, when it has one (cloud.Initializer), with clients
// carrying the manager's user agent: at start, and for a provider a reload built.
func (r *runtime) initProvider(ctx context.Context, p cloud.Provider) error {
	if in, ok := p.(cloud.Initializer); ok {
		return in.Initialize(ctx, clientBuilder{config: r.plan.restConfig, component: r.plan.component})
	}
	return nil
}

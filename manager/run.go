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
	"github.com/nephele-dev/nephele/manager/serving"
)

// runPlan is everything the runtime needs, built by Run from a CompletedConfig and
// the objects Run makes (the provider, the server, the lease identity).
type runPlan struct {
	component  string
	restConfig *rest.Config
	// clouds are the clouds served: one, or those of --clouds-config. Each gets its own
	// call path, budget, inventory and reloads, and its own run of every controller.
	clouds []cloudPlan
	specs  []ControllerSpec
	// owned run under the main lease; migrated only under the migration lease.
	owned, migrated []string
	leaderElect     bool
	mainLease       LeaseConfig
	migrationLease  *LeaseConfig
	cloudCall       cloudCallConfig
	stallTimeout    time.Duration
	startInterval   time.Duration
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
	clouds    []*cloudRuntime
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
	var mainFence, migrationFence *leaseFence
	if p.leaderElect {
		mainFence = newLeaseFence(p.mainLease, clock.RealClock{})
		if p.migrationLease != nil {
			migrationFence = newLeaseFence(*p.migrationLease, clock.RealClock{})
		}
	}
	crs := make([]*cloudRuntime, 0, len(p.clouds))
	for i := range p.clouds {
		cr, err := newCloudRuntime(&p.clouds[i], p, mainFence)
		if err != nil {
			return nil, err
		}
		crs = append(crs, cr)
	}
	return &runtime{
		mainFence:      mainFence,
		migrationFence: migrationFence,
		clients: &controllerClients{root: p.restConfig, rootClient: client, component: p.component,
			useServiceAccounts: p.useServiceAccounts},
		plan:      p,
		log:       log,
		client:    client,
		informers: informers.NewSharedInformerFactoryWithOptions(client, p.resync, informers.WithTransform(TrimForCache)),
		events:    record.NewBroadcaster(record.WithContext(context.Background())),
		clouds:    crs,
		progress:  map[string]*Progress{},
	}, nil
}

// run runs the manager until ctx is done or something fatal happens.
func (r *runtime) run(ctx context.Context) error {
	r.events.StartStructuredLogging(3)
	r.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: r.client.CoreV1().Events("")})
	defer r.events.Shutdown()

	for _, cr := range r.clouds {
		stop, err := r.startCloud(ctx, cr)
		defer stop()
		if err != nil {
			return err
		}
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
		// name is the controller's run: its name, with the cloud's when the manager
		// serves several (cloudPlan.instance).
		name string
		c    Controller
		p    *Progress
	}
	var run []built
	// Every cloud gets its own run of each controller, with its own workers, so that a
	// cloud that is down or throttling holds up only its own queue.
	for _, cr := range r.clouds {
		for _, name := range names {
			instance := cr.plan.instance(name)
			cc, p, err := r.controllerContext(ctx, cr, name)
			if err != nil {
				return err
			}
			c, err := r.spec(name).New(ctx, cc)
			switch {
			case errors.Is(err, ErrControllerDisabled):
				r.log.Info("Controller not started", "controller", instance, "reason", err.Error())
				continue
			case err != nil:
				return fmt.Errorf("starting controller %s: %w", instance, err)
			}
			run = append(run, built{instance, c, p})
		}
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

// controllerContext builds the view of the runtime the named controller's run for the
// cloud cr gets.
func (r *runtime) controllerContext(ctx context.Context, cr *cloudRuntime, name string) (*ControllerContext, *Progress, error) {
	instance := cr.plan.instance(name)
	r.mu.Lock()
	p, ok := r.progress[instance]
	if !ok {
		p = NewProgress(instance, r.plan.stallTimeout)
		r.progress[instance] = p
		r.addReadyz(instance, p.Check)
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
			Logger:    r.log.WithName(instance),
			Metrics:   cr.registry,
			Health:    p,
		},
		Cloud:     cr.cloud.ForFenced(name, r.fenceFor(name)),
		Inventory: cr.inventoryOrNil(),
		Config:    cr.plan.controllers,
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

package nodeinit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/manager"
)

// TaintUninitialized is the taint a kubelet started with --cloud-provider=external
// registers its Node with; the controller removes it once the Node is initialized.
const TaintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"

// Defaults for the zero values of Config.
const (
	DefaultStatusUpdateFrequency = 5 * time.Minute
	DefaultListingGap            = time.Second
)

// Config holds the controller's dependencies and settings.
type Config struct {
	// Client writes Nodes and Events. Required.
	Client kubernetes.Interface
	// Informers is the shared informer factory the Node informer is registered with; its
	// owner starts it after New. Required.
	Informers informers.SharedInformerFactory
	// Instances looks up one instance at a time. Required: it is the whole source of
	// truth without batch listing, and confirms instances a listing lacks.
	Instances cloud.Instances
	// Inventory is the shared instance listing, or nil when the provider has no batch
	// listing. With it, initializing or refreshing N nodes costs O(1) cloud calls.
	Inventory manager.Inventory
	// Recorder records Events on Nodes. Required.
	Recorder record.EventRecorder
	// Logger logs; the zero value discards.
	Logger logr.Logger
	// Metrics is where the metrics are registered; nil registers nothing.
	Metrics prometheus.Registerer
	// Health receives progress reports for /readyz; nil creates a private one.
	Health *manager.Progress
	// StatusUpdateFrequency is how often the addresses of initialized nodes are
	// refreshed from the cloud (--node-status-update-frequency). Default 5m.
	StatusUpdateFrequency time.Duration
	// Workers is the number of nodes initialized (or, without an inventory, refreshed)
	// at once (--concurrent-node-syncs). Default 1.
	Workers int
	// ListingGap is the least time between two inventory listings that node
	// initialization asks for, so that a burst of joining nodes shares listings.
	// Default 1s.
	ListingGap time.Duration
}

// Controller is the cloud-node-controller.
type Controller struct {
	client       kubernetes.Interface
	nodes        corelisters.NodeLister
	synced       cache.InformerSynced
	instances    cloud.Instances
	inventory    manager.Inventory
	recorder     record.EventRecorder
	log          logr.Logger
	metrics      *metrics
	health       *manager.Progress
	queue        workqueue.TypedRateLimitingInterface[string]
	refreshEvery time.Duration
	workers      int
	pacer        *pacer
	now          func() time.Time

	mu      sync.Mutex
	pending map[string]struct{} // names of the nodes carrying the uninitialized taint
}

// New builds the controller and registers its Node informer with cfg.Informers.
func New(cfg Config) (*Controller, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("cloud-node-controller: a Kubernetes client is required")
	case cfg.Informers == nil:
		return nil, errors.New("cloud-node-controller: an informer factory is required")
	case cfg.Instances == nil:
		return nil, errors.New("cloud-node-controller: the provider's Instances capability is required")
	case cfg.Recorder == nil:
		return nil, errors.New("cloud-node-controller: an event recorder is required")
	case cfg.StatusUpdateFrequency < 0, cfg.Workers < 0, cfg.ListingGap < 0:
		return nil, errors.New("cloud-node-controller: durations and worker counts must not be negative")
	}
	if cfg.StatusUpdateFrequency == 0 {
		cfg.StatusUpdateFrequency = DefaultStatusUpdateFrequency
	}
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if cfg.ListingGap == 0 {
		cfg.ListingGap = DefaultListingGap
	}
	if cfg.Health == nil {
		cfg.Health = manager.NewProgress(manager.CloudNodeController, 2*time.Minute)
	}
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("cloud-node-controller: %w", err)
	}
	nodeInformer := cfg.Informers.Core().V1().Nodes()
	c := &Controller{
		client:    cfg.Client,
		nodes:     nodeInformer.Lister(),
		instances: cfg.Instances,
		inventory: cfg.Inventory,
		recorder:  cfg.Recorder,
		log:       cfg.Logger,
		metrics:   m,
		health:    cfg.Health,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: manager.CloudNodeController},
		),
		refreshEvery: cfg.StatusUpdateFrequency,
		workers:      cfg.Workers,
		pacer:        &pacer{gap: cfg.ListingGap},
		now:          time.Now,
		pending:      map[string]struct{}{},
	}
	reg, err := nodeInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				c.observe(nil, n)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 {
				c.observe(o, n)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				c.setPending(n.Name, false)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("cloud-node-controller: registering the Node event handler: %w", err)
	}
	c.synced = reg.HasSynced
	c.health.SetPending(c.queue.Len)
	return c, nil
}

// observe queues a node that needs initialization. Status-only updates (heartbeats) of
// a tainted node do not queue it again: that would defeat the retry backoff of a node
// whose instance the cloud cannot find.
func (c *Controller) observe(old, node *corev1.Node) {
	tainted := hasTaint(node, TaintUninitialized)
	c.setPending(node.Name, tainted)
	if !tainted {
		return
	}
	if old != nil && hasTaint(old, TaintUninitialized) && !initInputsChanged(old, node) {
		return
	}
	c.queue.Add(node.Name)
}

// initInputsChanged reports whether an update changed what initialization reads from
// the Node itself.
func initInputsChanged(old, node *corev1.Node) bool {
	return old.Spec.ProviderID != node.Spec.ProviderID ||
		old.Annotations[AnnotationProvidedNodeIP] != node.Annotations[AnnotationProvidedNodeIP] ||
		len(old.Spec.Taints) != len(node.Spec.Taints)
}

func (c *Controller) setPending(name string, pending bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pending {
		c.pending[name] = struct{}{}
	} else {
		delete(c.pending, name)
	}
	c.metrics.pending.Set(float64(len(c.pending)))
}

// Run initializes nodes with Workers workers and refreshes addresses every
// StatusUpdateFrequency until ctx is done.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.log.Info("Starting", "workers", c.workers, "statusUpdateFrequency", c.refreshEvery, "inventory", c.inventory != nil)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("cloud-node-controller: the Node informer did not sync")
	}
	var wg sync.WaitGroup
	for range c.workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	wg.Go(func() {
		wait.UntilWithContext(ctx, c.refresh, c.refreshEvery)
	})
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	c.log.Info("Stopped")
	return nil
}

func (c *Controller) processNext(ctx context.Context) bool {
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	err := c.initialize(ctx, name)
	var later requeueAfter
	switch {
	case err == nil:
		c.queue.Forget(name)
	case errors.As(err, &later):
		c.queue.AddAfter(name, time.Duration(later))
	case ctx.Err() != nil:
		// Shutting down: the next leader picks the node up.
	default:
		c.log.Info("Node not initialized, will retry", "node", name, "err", err.Error())
		c.queue.AddRateLimited(name)
	}
	c.health.Progressed()
	return true
}

// requeueAfter asks for the node to be tried again after a wait that is not a failure.
type requeueAfter time.Duration

func (r requeueAfter) Error() string {
	return fmt.Sprintf("waiting %s for the next inventory listing", time.Duration(r))
}

// Spec returns the manager's description of the cloud-node-controller.
func Spec() manager.ControllerSpec {
	return manager.ControllerSpec{
		Name:       manager.CloudNodeController,
		Aliases:    []string{"cloud-node"},
		ClientName: "node-controller", // upstream's service account for --use-service-account-credentials
		New: func(_ context.Context, cc *manager.ControllerContext) (manager.Controller, error) {
			instances, ok := cc.Cloud.Instances()
			if !ok || instances == nil {
				return nil, manager.Disabled("provider %s has no Instances capability", cc.Cloud.ProviderName())
			}
			return New(Config{
				Client:                cc.Client,
				Informers:             cc.Informers,
				Instances:             instances,
				Inventory:             cc.Inventory,
				Recorder:              cc.Recorder,
				Logger:                cc.Logger,
				Metrics:               cc.Metrics,
				Health:                cc.Health,
				StatusUpdateFrequency: cc.Config.NodeStatusUpdateFrequency,
				Workers:               cc.Config.ConcurrentNodeSyncs,
			})
		},
	}
}

func hasTaint(node *corev1.Node, key string) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

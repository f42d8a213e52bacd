package nodeinit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers/ownership"
	"github.com/nephele-dev/nephele/controllers/taints"
	"github.com/nephele-dev/nephele/controllers/worker"
	"github.com/nephele-dev/nephele/manager"
)

// DefaultListingGap is the ListingGap of a zero Config. The other zero fields take
// manager.DefaultControllerConfig's values.
const DefaultListingGap = time.Second

// Config holds the controller's dependencies and settings.
type Config struct {
	// ControllerDeps: the client writes Nodes and Events; the Node informer is
	// registered with the factory, which its owner starts after New; Events are recorded
	// on Nodes.
	manager.ControllerDeps
	// Instances looks up one instance at a time. Required: it is the whole source of
	// truth without batch listing, and confirms instances a listing lacks.
	Instances cloud.Instances
	// Inventory is the shared instance listing, or nil when the provider has no batch
	// listing. With it, initializing or refreshing N nodes costs O(1) cloud calls.
	Inventory manager.Inventory
	// StatusUpdateFrequency is how often the addresses of initialized nodes are
	// refreshed from the cloud (--node-status-update-frequency).
	StatusUpdateFrequency time.Duration
	// Workers is the number of nodes initialized at once (--concurrent-node-syncs).
	Workers int
	// StatusWorkers is the number of nodes whose addresses a refresh without an
	// inventory looks up at once (--concurrent-node-status-updates); 0 means Workers.
	StatusWorkers int
	// ListingGap is the least time between two inventory listings that node
	// initialization asks for, so that a burst of joining nodes shares listings.
	// Default 1s.
	ListingGap time.Duration
	// Retry bounds the retries of nodes whose initialization failed; zero fields take
	// worker.DefaultRetry's, client-go's defaults, as upstream's node controller.
	Retry worker.Retry
	// Ownership decides which nodes the controller initializes and refreshes; the zero
	// value owns every node.
	Ownership cloud.NodeOwnership
}

// Controller is the cloud-node-controller.
type Controller struct {
	client       kubernetes.Interface
	nodes        corelisters.NodeLister
	instances    cloud.Instances
	inventory    manager.Inventory
	owner        *ownership.Gate
	recorder     record.EventRecorder
	log          logr.Logger
	metrics      *metrics
	health       *manager.Progress
	worker       *worker.Worker
	refreshEvery time.Duration
	workers      int
	// statusWorkers bound a per-node refresh (--concurrent-node-status-updates).
	statusWorkers int
	pacer         *pacer
	now           func() time.Time

	mu      sync.Mutex
	pending map[string]struct{} // names of the nodes carrying the uninitialized taint
}

// New builds the controller and registers its Node informer with cfg.Informers.
func New(cfg Config) (*Controller, error) {
	if err := cfg.ControllerDeps.Check(); err != nil {
		return nil, fmt.Errorf("cloud-node-controller: %w", err)
	}
	switch {
	case cfg.Instances == nil:
		return nil, errors.New("cloud-node-controller: the provider's Instances capability is required")
	case cfg.StatusUpdateFrequency < 0, cfg.Workers < 0, cfg.StatusWorkers < 0, cfg.ListingGap < 0:
		return nil, errors.New("cloud-node-controller: durations and worker counts must not be negative")
	}
	defaults := manager.DefaultControllerConfig()
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("cloud-node-controller: %w", err)
	}
	owner, err := ownership.New(cfg.Ownership, manager.CloudNodeController, cfg.Recorder, cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("cloud-node-controller: %w", err)
	}
	nodeInformer := cfg.Informers.Core().V1().Nodes()
	c := &Controller{
		owner:        owner,
		client:       cfg.Client,
		nodes:        nodeInformer.Lister(),
		instances:    cfg.Instances,
		inventory:    cfg.Inventory,
		recorder:     cfg.Recorder,
		log:          cfg.Logger,
		metrics:      m,
		health:       cfg.Health,
		refreshEvery: manager.OrDefault(cfg.StatusUpdateFrequency, defaults.NodeStatusUpdateFrequency),
		workers:      manager.OrDefault(cfg.Workers, defaults.ConcurrentNodeSyncs),
		pacer:        &pacer{gap: manager.OrDefault(cfg.ListingGap, DefaultListingGap)},
		now:          time.Now,
		pending:      map[string]struct{}{},
	}
	c.statusWorkers = manager.OrDefault(cfg.StatusWorkers, c.workers)
	c.worker, err = worker.New(worker.Config{
		Name:    manager.CloudNodeController,
		Sync:    c.initialize,
		Workers: c.workers,
		Retry:   cfg.Retry,
		Loops: []worker.Loop{func(ctx context.Context) {
			wait.UntilWithContext(ctx, c.refresh, c.refreshEvery)
		}},
		Health:  c.health,
		Logger:  c.log,
		Metrics: cfg.Metrics,
	})
	if err != nil {
		return nil, fmt.Errorf("cloud-node-controller: %w", err)
	}
	err = c.worker.Watch(nodeInformer.Informer(), cache.ResourceEventHandlerFuncs{
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
			c.owner.Forget(obj)
		},
	})
	if err != nil {
		c.worker.ShutDown()
		return nil, fmt.Errorf("cloud-node-controller: registering the Node event handler: %w", err)
	}
	return c, nil
}

// observe queues a node that needs initialization. Status-only updates (heartbeats) of
// a tainted node do not queue it again: that would defeat the retry backoff of a node
// whose instance the cloud cannot find.
//
// A node the CCM does not own is never queued, so its taint stays for its own CCM;
// its Event says why.
func (c *Controller) observe(old, node *corev1.Node) {
	tainted := taints.Has(node, cloudproviderapi.TaintExternalCloudProvider) && c.owner.Owns(node)
	c.setPending(node.Name, tainted)
	if !tainted {
		return
	}
	if old != nil && taints.Has(old, cloudproviderapi.TaintExternalCloudProvider) && !initInputsChanged(old, node) {
		return
	}
	c.worker.Add(node.Name)
}

// initInputsChanged reports whether an update changed what initialization reads from
// the Node itself.
func initInputsChanged(old, node *corev1.Node) bool {
	return ownership.Changed(old, node) ||
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
	c.log.Info("Starting", "workers", c.workers, "statusUpdateFrequency", c.refreshEvery, "inventory", c.inventory != nil)
	err := c.worker.Run(ctx)
	c.log.Info("Stopped")
	return err
}

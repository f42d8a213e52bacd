package route

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers/ownership"
	"github.com/nephele-dev/nephele/controllers/worker"
	"github.com/nephele-dev/nephele/manager"
)

// DefaultErrorRelistInterval is the ErrorRelistInterval of a zero Config. The other
// defaults are DefaultRetry's and manager.DefaultControllerConfig's.
const DefaultErrorRelistInterval = 10 * time.Second

// DefaultRetry bounds the retries of a zero Config.Retry: 1s doubling to 5m per node,
// and at most 20 retries/s (burst 200) overall, so that a cloud-wide failure does not
// turn into a retry storm.
func DefaultRetry() worker.Retry {
	return worker.Retry{MinDelay: time.Second, MaxDelay: 5 * time.Minute, QPS: 20, Burst: 200}
}

// Config holds the controller's dependencies and settings.
type Config struct {
	// ControllerDeps: the client writes Node status conditions; the controller
	// registers its Node informer in New and the owner starts the factory; Events are
	// recorded on Nodes.
	manager.ControllerDeps
	// Routes is the cloud's route capability. Required.
	Routes cloud.Routes

	// ClusterName is --cluster-name; it scopes the cloud calls and prefixes name hints.
	ClusterName string
	// ClusterCIDRs are the --cluster-cidr networks, at least one, as
	// manager.ParseClusterCIDRs returns them. Only routes inside them are created or
	// deleted.
	ClusterCIDRs []netip.Prefix
	// ConcurrentRouteSyncs bounds the nodes synced, and so the route creates and deletes
	// in flight, at once. With a Routes that batches (cloud.RouteBatcher) it bounds the
	// condition patches instead, and the syncs in flight rise to the provider's bound (at
	// most 1,000) so that a call can fill. Zero means the manager's default.
	ConcurrentRouteSyncs int
	// ReconcilePeriod is how often all routes are listed and every node checked
	// (--route-reconciliation-period). Zero means the manager's default.
	ReconcilePeriod time.Duration
	// Retry bounds the per-node retries; zero fields take DefaultRetry's. Its
	// MinDelay also starts the backoff of the drift check's listing after a failure.
	Retry worker.Retry
	// ErrorRelistInterval is the least time between listings caused by cloud errors;
	// between them the cached listing is used, which is safe because creates and
	// deletes are idempotent. Zero means DefaultErrorRelistInterval.
	ErrorRelistInterval time.Duration
	// Ownership decides which nodes get routes in this cloud; the zero value owns every
	// node. A node the CCM does not own is treated as absent: it gets no route (one to
	// it is deleted) and its NetworkUnavailable condition is left to its own CCM.
	Ownership cloud.NodeOwnership
}

// Controller is the node-route-controller. Create it with New and run it with Run.
type Controller struct {
	client       kubernetes.Interface
	routes       cloud.Routes
	nodes        corelisters.NodeLister
	owner        *ownership.Gate
	recorder     record.EventRecorder
	log          logr.Logger
	health       *manager.Progress
	metrics      *metrics
	clusterName  string
	clusterCIDRs []netip.Prefix
	period       time.Duration
	retryBase    time.Duration
	errorRelist  time.Duration
	now          func() time.Time

	worker *worker.Worker
	// batcher makes the route changes when the provider batches them; nil otherwise.
	batcher *batcher
	// writes holds a slot for each condition patch in flight: the apiserver writes stay
	// bounded by ConcurrentRouteSyncs when batching raises the node syncs in flight.
	writes  chan struct{}
	table   *table
	planner *planner
	locks   cidrLocks
}

// New builds the controller and registers its Node event handlers. It returns an error
// naming the problem when a required dependency is missing or a cluster CIDR is invalid.
func New(cfg Config) (*Controller, error) {
	if err := cfg.ControllerDeps.Check(); err != nil {
		return nil, fmt.Errorf("route controller: %w", err)
	}
	if cfg.Routes == nil {
		return nil, errors.New("route controller: Config.Routes is nil")
	}
	if len(cfg.ClusterCIDRs) == 0 {
		return nil, errors.New("route controller: no cluster CIDR: set --cluster-cidr, or --configure-cloud-routes=false")
	}
	// Masked again for a Config built by hand: routes are compared with networks.
	cidrs := make([]netip.Prefix, len(cfg.ClusterCIDRs))
	for i, p := range cfg.ClusterCIDRs {
		if !p.IsValid() {
			return nil, fmt.Errorf("route controller: cluster CIDR %d is the zero netip.Prefix", i)
		}
		cidrs[i] = p.Masked()
	}
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	owner, err := ownership.New(cfg.Ownership, manager.NodeRouteController, nil, cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("route controller: %w", err)
	}
	defaults := manager.DefaultControllerConfig()
	retry := cfg.Retry.Or(DefaultRetry())
	c := &Controller{
		owner:        owner,
		client:       cfg.Client,
		routes:       cfg.Routes,
		recorder:     cfg.Recorder,
		log:          cfg.Logger,
		health:       cfg.Health,
		metrics:      m,
		clusterName:  cfg.ClusterName,
		clusterCIDRs: cidrs,
		period:       manager.OrDefault(cfg.ReconcilePeriod, defaults.RouteReconciliationPeriod),
		retryBase:    retry.MinDelay,
		errorRelist:  manager.OrDefault(cfg.ErrorRelistInterval, DefaultErrorRelistInterval),
		now:          time.Now,
	}
	c.table = newTable(cidrs, c.listRoutes, c.now, func(n int) { m.managed.Set(float64(n)) })

	nodeInformer := cfg.Informers.Core().V1().Nodes()
	c.nodes = nodeInformer.Lister()
	c.planner = &planner{clusterName: c.clusterName, clusterCIDRs: cidrs, lookup: c.lookupNode}
	workers := manager.OrDefault(cfg.ConcurrentRouteSyncs, defaults.ConcurrentRouteSyncs)
	c.writes = make(chan struct{}, workers)
	loops := []worker.Loop{c.driftLoop}
	if b, ok := cfg.Routes.(batchingRoutes); ok {
		// One batch call is in flight at a time, and it takes the changes of every node
		// sync waiting for it: enough syncs must run at once to fill it.
		c.batcher = newBatcher(b, c.clusterName)
		loops = append(loops, c.batcher.run)
		workers = max(workers, min(c.batcher.max, maxBatchWorkers))
	}
	c.worker, err = worker.New(worker.Config{
		Name:    manager.NodeRouteController,
		Sync:    c.syncNode,
		Workers: workers,
		Retry:   retry,
		Loops:   loops,
		Health:  cfg.Health,
		Logger:  cfg.Logger,
		Metrics: cfg.Metrics,
	})
	if err != nil {
		return nil, fmt.Errorf("route controller: %w", err)
	}
	if err := c.worker.Watch(nodeInformer.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onAdd,
		UpdateFunc: c.onUpdate,
		DeleteFunc: c.onDelete,
	}); err != nil {
		c.worker.ShutDown()
		return nil, fmt.Errorf("route controller: registering node event handlers: %w", err)
	}
	return c, nil
}

func (c *Controller) onAdd(obj any) {
	if node, ok := obj.(*corev1.Node); ok {
		c.worker.Add(node.Name)
	}
}

// onUpdate reacts only to what changes a node's routes: its identity, its ownership,
// its pod CIDRs and its addresses, which routes carry. Periodic resyncs and status heartbeats are left
// to the drift check, which costs one listing for all nodes.
func (c *Controller) onUpdate(oldObj, newObj any) {
	oldNode, ok1 := oldObj.(*corev1.Node)
	newNode, ok2 := newObj.(*corev1.Node)
	if !ok1 || !ok2 {
		return
	}
	if oldNode.UID != newNode.UID || ownership.Changed(oldNode, newNode) || oldNode.Spec.PodCIDR != newNode.Spec.PodCIDR ||
		!slices.Equal(oldNode.Spec.PodCIDRs, newNode.Spec.PodCIDRs) ||
		!slices.Equal(oldNode.Status.Addresses, newNode.Status.Addresses) {
		c.worker.Add(newNode.Name)
	}
}

func (c *Controller) onDelete(obj any) {
	c.owner.Forget(obj)
	switch o := obj.(type) {
	case *corev1.Node:
		c.worker.Add(o.Name)
	case cache.DeletedFinalStateUnknown:
		if node, ok := o.Obj.(*corev1.Node); ok {
			c.worker.Add(node.Name)
		} else if _, name, err := cache.SplitMetaNamespaceKey(o.Key); err == nil && name != "" {
			c.worker.Add(name)
		}
	}
}

// Run runs the controller until ctx is done. It must be called once.
func (c *Controller) Run(ctx context.Context) error {
	log := c.log.WithValues("clusterCIDRs", c.clusterCIDRs)
	log.Info("Starting route controller", "reconcilePeriod", c.period, "batched", c.batcher != nil)
	defer log.Info("Stopped route controller")
	return c.worker.Run(ctx)
}

// driftLoop checks every node against a fresh listing now and then every period,
// retrying a failed check with backoff (bounded by the period).
func (c *Controller) driftLoop(ctx context.Context) {
	after, failures := c.now(), 0
	// Until one check succeeds, checks find the routes new nodes need; later ones only
	// look for drift, so their listing is refine work in the cloud budget.
	checkCtx := ctx
	for {
		next := c.period
		err := c.reconcileAll(checkCtx, after)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			next = min(c.period, c.retryBase<<min(failures-1, 16))
			c.log.Error(err, "Route drift check failed", "retryIn", next)
		} else {
			failures = 0
			checkCtx = cloud.WithClass(ctx, cloud.ClassRefine)
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		after = c.now()
	}
}

// reconcileAll lists the routes once (or joins a listing that started after after) and
// queues every node whose routes or condition are not as they should be, and every
// target of a route whose node is gone. Nodes that are fine cost no work item.
func (c *Controller) reconcileAll(ctx context.Context, after time.Time) error {
	// Upstream counts each full reconciliation, when it starts.
	c.metrics.upstreamSyncs.Inc()
	if err := c.table.refresh(ctx, after); err != nil {
		c.metrics.drift.WithLabelValues("error").Inc()
		return fmt.Errorf("listing routes of cluster %q: %w", c.clusterName, err)
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		c.metrics.drift.WithLabelValues("error").Inc()
		return fmt.Errorf("listing nodes: %w", err)
	}
	keys := c.driftKeys(nodes)
	for _, k := range keys {
		c.worker.Add(k)
	}
	c.metrics.drift.WithLabelValues("success").Inc()
	c.log.V(2).Info("Route drift check done", "nodes", len(nodes), "queued", len(keys))
	return nil
}

// driftKeys returns the keys of the nodes that need work and of the targets of routes
// whose node is gone (orphanKey for routes without a target).
func (c *Controller) driftKeys(nodes []*corev1.Node) []string {
	var keys []string
	seen := make(map[string]struct{}, len(nodes))
	c.table.view(func(idx *routeIndex) {
		for _, node := range nodes {
			if !c.owner.Owns(node) {
				continue // absent for this cloud: a route to it is an orphan
			}
			seen[node.Name] = struct{}{}
			p := c.planner.plan(node.Name, node, idx)
			if !p.empty() {
				keys = append(keys, node.Name)
				continue
			}
			if cond, ok := p.wantCondition(false); ok && !conditionHolds(node, cond) {
				keys = append(keys, node.Name)
			}
		}
		for target := range idx.byNode {
			if _, ok := seen[target]; !ok {
				keys = append(keys, target)
			}
		}
	})
	return keys
}

func (c *Controller) lookupNode(name string) *corev1.Node {
	if name == orphanKey {
		return nil
	}
	node, err := c.nodes.Get(name)
	if err != nil || !c.owner.Owns(node) {
		return nil
	}
	return node
}

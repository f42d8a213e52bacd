package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers/ownership"
	"github.com/nephele-dev/nephele/controllers/worker"
	"github.com/nephele-dev/nephele/manager"
)

// DefaultRetry bounds the backoff of a failing Service for a zero Config.Retry, as
// upstream's service controller does: 5s doubling to 5m per Service, with no overall
// bound. The other defaults are manager.DefaultControllerConfig's.
func DefaultRetry() worker.Retry {
	return worker.Retry{MinDelay: 5 * time.Second, MaxDelay: 5 * time.Minute, QPS: -1}
}

// Config holds the dependencies and settings of the controller.
type Config struct {
	// ControllerDeps: the client writes Service finalizers and status; New registers
	// the Service and Node informers on the factory and the caller starts it; Events
	// are recorded on Services.
	manager.ControllerDeps
	// LoadBalancers is the cloud capability, normally behind the manager's instrumented
	// call path, which bounds each call with a timeout. Required.
	LoadBalancers cloud.LoadBalancers

	// ClusterName is --cluster-name, passed to the provider in every spec.
	ClusterName string
	// LoadBalancerClass is --load-balancer-class: empty serves Services without a
	// class, otherwise Services with exactly this class.
	LoadBalancerClass string
	// ServeUnclassed serves Services without a class beside those of LoadBalancerClass:
	// the default cloud of a manager serving several.
	ServeUnclassed bool
	// Workers is --concurrent-service-syncs; 0 means the manager's default.
	Workers int
	// NodeBatchWindow is --node-batch-window; 0 means the manager's default.
	NodeBatchWindow time.Duration
	// Retry bounds the backoff of failing Services; zero fields take DefaultRetry's.
	Retry worker.Retry
	// Ownership decides which nodes may be backends; the zero value owns every node.
	// This cloud's load balancers cannot reach another cloud's nodes (KEP-5778), so
	// those are never backends.
	Ownership cloud.NodeOwnership
}

// Controller is the service-lb-controller. Build it with New and run it once with Run.
type Controller struct {
	client      kubernetes.Interface
	lbs         cloud.LoadBalancers
	owner       *ownership.Gate
	recorder    record.EventRecorder
	log         logr.Logger
	metrics     *metrics
	health      *manager.Progress
	clusterName string
	// classes are the Services served: the class, and maybe Services without one.
	classes classes
	// window is --node-batch-window: the quiet time that ends a batch of node changes;
	// holdMax bounds a batch that never quiets (holdWindows windows).
	window  time.Duration
	holdMax time.Duration

	services corelisters.ServiceLister
	worker   *worker.Worker

	backends *backendSet
	// nodesChanged holds one pending wake-up for the node batcher.
	nodesChanged chan struct{}

	mu sync.Mutex
	// states are the load balancers this controller has ensured, by Service key. An
	// entry exists only while its Service does; no lock is held across cloud calls.
	states map[string]*lbState
	// nodeSync is the batch of node changes being applied, nil when none is.
	nodeSync *nodeSyncRound
}

// lbState is what the controller last applied to one load balancer.
type lbState struct {
	// uid is the UID of the Service the load balancer was ensured for.
	uid string
	// specKey identifies the spec and Service inputs of the last EnsureLoadBalancer.
	specKey string
	// backends is the hash of the backend set last applied.
	backends uint64
	// status is what the cloud last reported.
	status corev1.LoadBalancerStatus
	// svc is the Service as last synced, to delete the load balancer should the
	// Service vanish without the controller removing its finalizer.
	svc *corev1.Service
	// elsewhere is true when the provider answered that another controller implements
	// this Service's load balancer (upstream's ImplementedElsewhere): the controller
	// leaves its backends and status alone until the Service's spec changes.
	elsewhere bool
	// gone is true when the apiserver answered, after the load balancer was ensured,
	// that its Service is gone or replaced: only its deletion is left to do.
	gone bool
}

// New builds the controller and registers its informers and metrics.
func New(cfg Config) (*Controller, error) {
	if err := cfg.ControllerDeps.Check(); err != nil {
		return nil, fmt.Errorf("service-lb-controller: %w", err)
	}
	switch {
	case cfg.LoadBalancers == nil:
		return nil, errors.New("service-lb-controller: Config.LoadBalancers is nil")
	case cfg.Workers < 0, cfg.NodeBatchWindow < 0:
		return nil, fmt.Errorf("service-lb-controller: negative setting in %+v", struct {
			Workers         int
			NodeBatchWindow time.Duration
		}{cfg.Workers, cfg.NodeBatchWindow})
	}
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	owner, err := ownership.New(cfg.Ownership, manager.ServiceLBController, nil, cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("service-lb-controller: %w", err)
	}
	defaults := manager.DefaultControllerConfig()
	c := &Controller{
		owner:        owner,
		client:       cfg.Client,
		lbs:          cfg.LoadBalancers,
		recorder:     cfg.Recorder,
		log:          cfg.Logger,
		metrics:      m,
		health:       cfg.Health,
		clusterName:  cfg.ClusterName,
		classes:      newClasses(cfg.LoadBalancerClass, cfg.ServeUnclassed),
		window:       manager.OrDefault(cfg.NodeBatchWindow, defaults.NodeBatchWindow),
		backends:     newBackendSet(),
		nodesChanged: make(chan struct{}, 1),
		states:       map[string]*lbState{},
	}
	c.holdMax = holdWindows * c.window

	svcInformer := cfg.Informers.Core().V1().Services()
	nodeInformer := cfg.Informers.Core().V1().Nodes()
	c.worker, err = worker.New(worker.Config{
		Name:    manager.ServiceLBController,
		Sync:    c.syncService,
		Workers: manager.OrDefault(cfg.Workers, defaults.ConcurrentServiceSyncs),
		Retry:   cfg.Retry.Or(DefaultRetry()),
		Loops:   []worker.Loop{c.batchNodeChanges},
		Health:  cfg.Health,
		Logger:  cfg.Logger,
		Metrics: cfg.Metrics,
		// A Service waiting for its load balancer, or for its deletion, goes before
		// backend updates of load balancers that already serve (see enqueue).
		Prioritized: true,
	})
	if err != nil {
		return nil, fmt.Errorf("service-lb-controller: %w", err)
	}
	if err := c.worker.Watch(svcInformer.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.serviceAdded,
		UpdateFunc: c.serviceUpdated,
		DeleteFunc: c.serviceDeleted,
	}); err != nil {
		c.worker.ShutDown()
		return nil, fmt.Errorf("service-lb-controller: watching Services: %w", err)
	}
	if err := c.worker.Watch(nodeInformer.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.nodeChanged,
		UpdateFunc: func(_, obj any) { c.nodeChanged(obj) },
		DeleteFunc: c.nodeDeleted,
	}); err != nil {
		c.worker.ShutDown()
		return nil, fmt.Errorf("service-lb-controller: watching Nodes: %w", err)
	}
	c.services = svcInformer.Lister()
	return c, nil
}

// Run syncs load balancers until ctx is done. It waits for its workers before it
// returns; a cloud call that ignores ctx can delay the return by up to its timeout.
func (c *Controller) Run(ctx context.Context) error {
	c.log.Info("Starting", "nodeBatchWindow", c.window, "loadBalancerClass", c.classes.class, "unclassed", c.classes.unclassed)
	err := c.worker.Run(ctx)
	c.log.Info("Stopped")
	return err
}

// serviceAdded queues Services this controller may have to act on.
func (c *Controller) serviceAdded(obj any) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	if c.concerns(svc) {
		c.enqueue(svc)
	}
}

// concerns reports whether svc may need this controller's work: it asks for a load
// balancer of this controller's class, or has a finalizer or a load balancer of this
// controller's to clean up. The Services of other classes cost nothing.
func (c *Controller) concerns(svc *corev1.Service) bool {
	held := c.holds(svc)
	return held || wantsLoadBalancer(svc, c.classes) || needsCleanup(svc, c.classes, held) || movedAway(svc, c.classes, held)
}

func (c *Controller) serviceUpdated(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Service)
	svc, ok2 := newObj.(*corev1.Service)
	if !ok1 || !ok2 {
		return
	}
	if old.ResourceVersion != "" && old.ResourceVersion == svc.ResourceVersion {
		// A resync: the sync that handled this version has already run or is queued.
		return
	}
	if c.concerns(svc) || c.hasState(key(svc)) {
		c.enqueue(svc)
	}
}

func (c *Controller) serviceDeleted(obj any) {
	k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	// Only a Service whose load balancer we ensured needs work once it is gone.
	if c.hasState(k) {
		c.worker.AddCritical(k)
	}
}

// enqueue queues svc: ahead of backend updates when it has no address yet or its load
// balancer is to be deleted, the work that leaves a Service unserved or a cloud
// resource leaking until it is done; behind them otherwise.
func (c *Controller) enqueue(svc *corev1.Service) {
	if svc.DeletionTimestamp != nil || needsCleanup(svc, c.classes, c.holds(svc)) ||
		(wantsLoadBalancer(svc, c.classes) && len(svc.Status.LoadBalancer.Ingress) == 0) {
		c.worker.AddCritical(key(svc))
		return
	}
	c.worker.Add(key(svc))
}

func key(svc *corev1.Service) string { return svc.Namespace + "/" + svc.Name }

// nodeChanged records an added or updated node's eligibility; only a change to the
// backend set wakes the batcher, so heartbeats and other node updates cost a hash of
// the node and nothing more.
func (c *Controller) nodeChanged(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	name := node.Name
	if !c.owner.Owns(node) {
		node = nil // another cloud's node: never a backend here
	}
	if c.backends.update(name, node) {
		c.signalNodes()
	}
}

func (c *Controller) nodeDeleted(obj any) {
	var name string
	c.owner.Forget(obj)
	switch o := obj.(type) {
	case *corev1.Node:
		name = o.Name
	case cache.DeletedFinalStateUnknown:
		name = o.Key
	default:
		return
	}
	if c.backends.update(name, nil) {
		c.signalNodes()
	}
}

func (c *Controller) signalNodes() {
	select {
	case c.nodesChanged <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// holdWindows bounds the hold of batchNodeChanges, in batch windows: node changes that
// never pause for a window (a steady trickle) still reach the load balancers this often.
const holdWindows = 10

// batchNodeChanges waits for a node change, then holds until the batch window passes
// with no further change (at most holdWindows windows from the first), so that a burst
// of nodes that join over several seconds, each a little after the other, becomes one
// backend update per load balancer; then it queues the load balancers whose backends
// differ.
func (c *Controller) batchNodeChanges(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.nodesChanged:
		}
		if !c.hold(ctx) {
			return
		}
		// Changes up to now are in the set we are about to compare; a wake-up they left
		// would open a window with nothing new in it.
		select {
		case <-c.nodesChanged:
		default:
		}
		n := c.queueChangedBackends()
		c.log.V(2).Info("Node changes batched", "loadBalancersQueued", n)
	}
}

// hold waits until a batch window passes without a node change, or holdMax since it
// started; false means ctx ended.
func (c *Controller) hold(ctx context.Context) bool {
	deadline := time.NewTimer(c.holdMax)
	defer deadline.Stop()
	quiet := time.NewTimer(c.window)
	defer quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return true
		case <-quiet.C:
			return true
		case <-c.nodesChanged:
			// Another change: the burst goes on, so the window starts again.
			quiet.Reset(c.window)
		}
	}
}

// queueChangedBackends queues every managed load balancer whose last applied backend
// set differs from the current one, and returns how many it queued. It costs one
// comparison per load balancer and no cloud call.
func (c *Controller) queueChangedBackends() int {
	current := c.backends.currentHash()
	n := 0
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for k, st := range c.states {
		if !st.elsewhere && st.backends != current {
			c.startNodeSync(k, now)
			c.worker.Add(k)
			n++
		}
	}
	return n
}

// syncService is the worker's sync: one Service. The worker counts and times it, under
// the reason errorReason gives a failure, and decides when it runs again; upstream's
// metrics of backend updates are recorded here.
func (c *Controller) syncService(ctx context.Context, k string) (worker.Result, error) {
	start := time.Now()
	op, err := c.sync(ctx, k)
	if op == opUpdateBackends {
		c.metrics.upstreamSyncs.Inc()
		c.metrics.upstreamHostUpdate.Observe(time.Since(start).Seconds())
	}
	c.finishNodeSync(k, op, err)
	if reason := errorReason(err); reason != "" {
		err = worker.WithReason(reason, err)
	}
	return worker.Result{}, err
}

// nodeSyncRound is one batch of node changes on its way to the load balancers: what
// upstream's service controller calls a node sync, timed the same way
// (service_controller_nodesync_latency_seconds), from the batch to the last sync of a
// load balancer it queued.
type nodeSyncRound struct {
	start   time.Time
	pending map[string]struct{}
}

// startNodeSync adds key, queued for a batch of node changes, to the node sync under
// way, or starts one. The caller holds c.mu.
func (c *Controller) startNodeSync(key string, now time.Time) {
	if c.nodeSync == nil {
		c.nodeSync = &nodeSyncRound{start: now, pending: map[string]struct{}{}}
	}
	c.nodeSync.pending[key] = struct{}{}
}

// finishNodeSync records that key, which a node sync may have queued, was synced with op
// and err; the node sync ends with the last of its keys. A backend update that failed
// is a node sync error, as upstream's; it is retried by the worker, outside the round.
func (c *Controller) finishNodeSync(key, op string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.nodeSync
	if r == nil {
		return
	}
	if _, ok := r.pending[key]; !ok {
		return
	}
	if op == opUpdateBackends && err != nil {
		c.metrics.upstreamNodeErrors.Inc()
	}
	delete(r.pending, key)
	if len(r.pending) == 0 {
		c.metrics.upstreamNodeSync.Observe(time.Since(r.start).Seconds())
		c.nodeSync = nil
	}
}

// apiError marks a failed Kubernetes API call, to tell it from a cloud failure.
type apiError struct{ err error }

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

// errorReason returns the reason a failed sync is counted under when it is not the
// cloud's (the worker's default): a Service the controller refuses, or a failed
// Kubernetes API call. It is "" otherwise.
func errorReason(err error) string {
	var sr *SourceRangeError
	var ae *apiError
	switch {
	case errors.As(err, &sr):
		return reasonInvalidSpec
	case errors.As(err, &ae):
		return reasonKubernetesAPI
	default:
		return ""
	}
}

// state returns a copy of the state of the load balancer for key.
func (c *Controller) state(k string) (lbState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.states[k]
	if !ok {
		return lbState{}, false
	}
	return *st, true
}

func (c *Controller) hasState(k string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.states[k]
	return ok
}

func (c *Controller) setState(k string, st lbState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.states[k] = &st
	c.metrics.managed.Set(float64(len(c.states)))
}

// forget drops everything the controller keeps for key.
func (c *Controller) forget(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.states, k)
	c.metrics.managed.Set(float64(len(c.states)))
}

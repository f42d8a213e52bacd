package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers/ownership"
	"github.com/nephele-dev/nephele/controllers/worker"
	"github.com/nephele-dev/nephele/manager"
)

// maxSafeModeEvents bounds the Events one entry into safe mode records, so that an
// outage in a large cluster does not flood the apiserver with Events.
const maxSafeModeEvents = 20

// Config holds the controller's dependencies and settings.
type Config struct {
	// ControllerDeps: the client reads and writes Nodes and Events; the Node informer
	// is registered with the factory, which its owner starts after New; Events are
	// recorded on Nodes.
	manager.ControllerDeps
	// Instances looks up one instance at a time; its typed NotFound is the only answer
	// that can lead to a deletion. Required.
	Instances cloud.Instances
	// Inventory is the shared instance listing, or nil when the provider has no batch
	// listing.
	Inventory manager.Inventory
	// MonitorPeriod is the time between rounds (--node-monitor-period). Zero fields
	// below take manager.DefaultControllerConfig's values.
	MonitorPeriod time.Duration
	// DeletionGracePeriod is the least time between the two NotFound answers that
	// confirm an instance is gone (--node-deletion-grace-period). Default 40s.
	DeletionGracePeriod time.Duration
	// SafeModeThreshold is the largest share of the cluster's Nodes one round may delete
	// (--node-deletion-safe-mode-threshold); at least one deletion per round is always
	// allowed. Between 0 and 1.
	SafeModeThreshold float64
	// Workers is how many per-node cloud lookups run at once (--concurrent-node-syncs).
	Workers int
	// Clock times the NotFound observations; nil is the real clock.
	Clock clock.PassiveClock
	// Ownership decides which nodes the controller may delete or taint; the zero value
	// owns every node. The others are not looked up and do not count towards the
	// safe-mode share.
	Ownership cloud.NodeOwnership
}

// Controller is the cloud-node-lifecycle-controller.
type Controller struct {
	client    kubernetes.Interface
	nodes     corelisters.NodeLister
	worker    *worker.Worker
	instances cloud.Instances
	inventory manager.Inventory
	owner     *ownership.Gate
	recorder  record.EventRecorder
	log       logr.Logger
	metrics   *metrics
	health    *manager.Progress
	period    time.Duration
	grace     time.Duration
	threshold float64
	workers   int
	clock     clock.PassiveClock

	// The state below belongs to the goroutine running rounds.

	// notFound holds, per not-Ready node whose instance the cloud reported NotFound, the
	// first such answer. Entries of nodes that are gone, Ready, or found again are
	// dropped every round, so it never outgrows the not-Ready part of the cluster.
	notFound map[string]observation
	// safeMode is the reason of the current safe mode, "" when not in safe mode.
	safeMode string
}

// observation is the first NotFound answer for a node, tied to the node's UID so that
// a Node re-created under the same name starts afresh.
type observation struct {
	uid   types.UID
	first time.Time
}

// New builds the controller and registers its Node informer with cfg.Informers.
func New(cfg Config) (*Controller, error) {
	if err := cfg.ControllerDeps.Check(); err != nil {
		return nil, fmt.Errorf("cloud-node-lifecycle-controller: %w", err)
	}
	switch {
	case cfg.Instances == nil:
		return nil, errors.New("cloud-node-lifecycle-controller: the provider's Instances capability is required")
	case cfg.MonitorPeriod < 0, cfg.DeletionGracePeriod < 0, cfg.Workers < 0:
		return nil, errors.New("cloud-node-lifecycle-controller: durations and worker counts must not be negative")
	case cfg.SafeModeThreshold < 0 || cfg.SafeModeThreshold > 1:
		return nil, fmt.Errorf("cloud-node-lifecycle-controller: safe-mode threshold %v: want a share between 0 and 1", cfg.SafeModeThreshold)
	}
	defaults := manager.DefaultControllerConfig()
	cfg.MonitorPeriod = manager.OrDefault(cfg.MonitorPeriod, defaults.NodeMonitorPeriod)
	cfg.DeletionGracePeriod = manager.OrDefault(cfg.DeletionGracePeriod, defaults.NodeDeletionGracePeriod)
	cfg.SafeModeThreshold = manager.OrDefault(cfg.SafeModeThreshold, defaults.NodeDeletionSafeModeThreshold)
	cfg.Workers = manager.OrDefault(cfg.Workers, defaults.ConcurrentNodeSyncs)
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	nodeInformer := cfg.Informers.Core().V1().Nodes()
	// A round is always due, so a round that hangs for the stall timeout (a cloud call
	// without a deadline, say) shows in /readyz.
	cfg.Health.SetPending(func() int { return 1 })
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("cloud-node-lifecycle-controller: %w", err)
	}
	owner, err := ownership.New(cfg.Ownership, manager.CloudNodeLifecycleController, cfg.Recorder, cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("cloud-node-lifecycle-controller: %w", err)
	}
	c := &Controller{
		owner:     owner,
		client:    cfg.Client,
		nodes:     nodeInformer.Lister(),
		instances: cfg.Instances,
		inventory: cfg.Inventory,
		recorder:  cfg.Recorder,
		log:       cfg.Logger,
		metrics:   m,
		health:    cfg.Health,
		period:    cfg.MonitorPeriod,
		grace:     cfg.DeletionGracePeriod,
		threshold: cfg.SafeModeThreshold,
		workers:   cfg.Workers,
		clock:     cfg.Clock,
		notFound:  map[string]observation{},
	}
	// Rounds, not a queue: the one loop runs every MonitorPeriod after the cache syncs.
	c.worker, err = worker.New(worker.Config{
		Name: manager.CloudNodeLifecycleController,
		Loops: []worker.Loop{func(ctx context.Context) {
			wait.UntilWithContext(ctx, c.monitor, c.period)
		}},
		Logger:  c.log,
		Metrics: cfg.Metrics,
	})
	if err != nil {
		return nil, fmt.Errorf("cloud-node-lifecycle-controller: %w", err)
	}
	// The controller reads the cache once per round; the handler gives it a
	// registration to wait for, and forgets the deleted nodes' ownership Events.
	if err := c.worker.Watch(nodeInformer.Informer(), cache.ResourceEventHandlerFuncs{
		DeleteFunc: c.owner.Forget,
	}); err != nil {
		c.worker.ShutDown()
		return nil, fmt.Errorf("cloud-node-lifecycle-controller: registering the Node informer: %w", err)
	}
	return c, nil
}

// Run runs a round every MonitorPeriod (measured from the end of the previous round)
// until ctx is done.
func (c *Controller) Run(ctx context.Context) error {
	c.log.Info("Starting", "monitorPeriod", c.period, "deletionGracePeriod", c.grace,
		"safeModeThreshold", c.threshold, "inventory", c.inventory != nil)
	err := c.worker.Run(ctx)
	c.log.Info("Stopped")
	return err
}

package nodeinit

import (
	"context"
	"slices"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/workqueue"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers/taints"
)

// addressChange is one node whose status addresses the refresh rewrites.
type addressChange struct {
	node  *corev1.Node
	addrs []corev1.NodeAddress
}

// refresh brings the addresses of every initialized node in line with the cloud. Nodes
// still tainted are left to initialize, and nodes the CCM does not own to their own CCM. It never writes an empty or partial set because
// the cloud answered badly: such answers are skipped with a Warning event on the node.
func (c *Controller) refresh(ctx context.Context) {
	defer c.health.Progressed()
	all, err := c.nodes.List(labels.Everything())
	if err != nil {
		c.log.Error(err, "Listing nodes from the cache")
		return
	}
	nodes := make([]*corev1.Node, 0, len(all))
	for _, n := range all {
		if !taints.Has(n, cloudproviderapi.TaintExternalCloudProvider) && c.owner.Owns(n) {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return // nothing to refresh: ask the cloud nothing
	}
	start := c.now()
	var written int
	if c.inventory != nil {
		written = c.refreshFromInventory(ctx, nodes)
	} else {
		written = c.refreshPerNode(ctx, nodes)
	}
	c.log.V(2).Info("Refreshed node addresses", "nodes", len(nodes), "updated", written, "took", c.now().Sub(start))
}

// refreshFromInventory refreshes nodes from one shared listing. A listing up to half a
// period old is good enough (another controller may have just made one), which keeps
// the addresses at most one and a half periods behind the cloud.
func (c *Controller) refreshFromInventory(ctx context.Context, nodes []*corev1.Node) int {
	if err := c.inventory.Sync(ctx, c.refreshEvery/2); err != nil {
		c.metrics.errors.WithLabelValues(reasonInventoryError).Inc()
		c.log.Error(err, "Not refreshing node addresses this period")
		return 0
	}
	changes := c.addressChanges(nodes)
	return c.apply(ctx, changes)
}

// addressChanges returns the writes a refresh from the inventory's listing needs. It is
// the hot path of a large cluster's refresh: for a node whose addresses are current it
// allocates nothing.
func (c *Controller) addressChanges(nodes []*corev1.Node) []addressChange {
	var changes []addressChange
	for _, n := range nodes {
		inst, ok := c.inventory.Lookup(n.Spec.ProviderID, n.Name)
		if !ok {
			// Gone or not listed: deciding that is the lifecycle controller's job.
			continue
		}
		if addrs, ok := c.addressUpdate(n, inst.Addresses); ok {
			changes = append(changes, addressChange{node: n, addrs: addrs})
		}
	}
	return changes
}

// refreshPerNode refreshes nodes with one InstanceMetadata call each, StatusWorkers at a
// time.
func (c *Controller) refreshPerNode(ctx context.Context, nodes []*corev1.Node) int {
	var written atomic.Int64
	// A refresh of initialized nodes refines; it waits behind initialization in the budget.
	lookupCtx := cloud.WithClass(ctx, cloud.ClassRefine)
	workqueue.ParallelizeUntil(ctx, c.statusWorkers, len(nodes), func(i int) {
		n := nodes[i]
		inst, err := c.instances.InstanceMetadata(lookupCtx, n)
		switch {
		case cloud.IsNotFound(err):
			return // the lifecycle controller's job
		case err != nil:
			c.metrics.errors.WithLabelValues(reasonCloudError).Inc()
			c.log.V(2).Info("Not refreshing the addresses of a node", "node", n.Name, "err", err.Error())
			return
		case inst == nil:
			return
		}
		if addrs, ok := c.addressUpdate(n, inst.Addresses); ok {
			written.Add(int64(c.apply(ctx, []addressChange{{node: n, addrs: addrs}})))
		}
	})
	return int(written.Load())
}

// addressUpdate returns the addresses node should be given, and false when it needs no
// write or the cloud's answer must not be written.
func (c *Controller) addressUpdate(node *corev1.Node, cloudAddrs []corev1.NodeAddress) ([]corev1.NodeAddress, bool) {
	if len(cloudAddrs) == 0 {
		c.warn(node, reasonNoAddresses, EventAddressesNotUpdated,
			"The cloud returned no addresses for this node; keeping %s", formatAddresses(node.Status.Addresses))
		return nil, false
	}
	addrs, err := desiredAddresses(node, cloudAddrs)
	if err != nil {
		c.warn(node, reasonProvidedNodeIP, EventProvidedNodeIPInvalid, "%v; keeping %s", err, formatAddresses(node.Status.Addresses))
		return nil, false
	}
	if slices.Equal(node.Status.Addresses, addrs) {
		return nil, false
	}
	if dropped := droppedTypes(node.Status.Addresses, addrs); len(dropped) > 0 {
		c.warn(node, reasonPartialAddresses, EventAddressesNotUpdated,
			"The cloud's addresses %s lack the type(s) %v this node has; keeping %s",
			formatAddresses(addrs), dropped, formatAddresses(node.Status.Addresses))
		return nil, false
	}
	return addrs, true
}

// apply writes changes, Workers at a time, and returns how many succeeded.
func (c *Controller) apply(ctx context.Context, changes []addressChange) int {
	var written atomic.Int64
	workqueue.ParallelizeUntil(ctx, c.workers, len(changes), func(i int) {
		ch := changes[i]
		if _, err := c.patchAddresses(ctx, ch.node.Name, ch.addrs); err != nil {
			c.metrics.errors.WithLabelValues(reasonAPIError).Inc()
			c.log.Error(err, "Refreshing node addresses")
			return
		}
		c.metrics.addrUpdates.Inc()
		c.log.V(2).Info("Updated node addresses", "node", ch.node.Name, "from", formatAddresses(ch.node.Status.Addresses), "to", formatAddresses(ch.addrs))
		written.Add(1)
	})
	return int(written.Load())
}

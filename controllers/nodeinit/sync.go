package nodeinit

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers/taints"
	"github.com/nephele-dev/nephele/controllers/worker"
)

// initialize initializes the node called name if it still carries the taint: the
// worker's sync.
func (c *Controller) initialize(ctx context.Context, name string) (worker.Result, error) {
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return worker.Result{}, nil
	}
	if err != nil {
		return worker.Result{}, fmt.Errorf("reading node %s from the cache: %w", name, err)
	}
	if !taints.Has(node, cloudproviderapi.TaintExternalCloudProvider) || !c.owner.Owns(node) {
		return worker.Result{}, nil
	}
	inst, wait, err := c.instanceFor(ctx, node)
	if err == nil && wait > 0 {
		// Not a failure: the node waits for a listing it can share with others.
		return worker.Result{RequeueAfter: wait}, nil
	}
	return worker.Result{}, c.initializeFrom(ctx, node, inst, err)
}

// initializeFrom initializes node from what the cloud answered for its instance.
func (c *Controller) initializeFrom(ctx context.Context, node *corev1.Node, inst *cloud.Instance, err error) error {
	name := node.Name
	log := c.log.WithValues("node", name)
	switch {
	case cloud.IsNotFound(err):
		c.warn(node, reasonInstanceNotFound, EventInstanceNotFound,
			"The cloud has no instance for this node (provider ID %q): it stays uninitialized and is retried", node.Spec.ProviderID)
		return fmt.Errorf("looking up the instance of node %s: %w", name, err) // the worker counts it as the cloud error it is
	case err != nil:
		c.warn(node, reasonCloudError, EventInitializationFailed, "Looking up the node's instance in the cloud failed, retrying: %v", err)
		return fmt.Errorf("looking up the instance of node %s: %w", name, err)
	}

	providerID := node.Spec.ProviderID
	if providerID == "" {
		providerID = inst.ProviderID
	}
	if providerID == "" {
		c.warn(node, reasonNoProviderID, EventNoProviderID, "The cloud returned no provider ID for this node's instance: it stays uninitialized")
		return worker.WithReason(reasonNoProviderID, fmt.Errorf("node %s: the cloud returned no provider ID", name))
	}
	addrs, err := desiredAddresses(node, inst.Addresses)
	if err != nil {
		c.warn(node, reasonProvidedNodeIP, EventProvidedNodeIPInvalid, "%v: the node stays uninitialized", err)
		return worker.WithReason(reasonProvidedNodeIP, fmt.Errorf("node %s: %w", name, err))
	}
	if len(addrs) == 0 {
		c.warn(node, reasonNoAddresses, EventNoAddresses, "The cloud returned no addresses for this node's instance: it stays uninitialized")
		return worker.WithReason(reasonNoAddresses, fmt.Errorf("node %s: the cloud returned no addresses", name))
	}
	labels, refused := nodeLabels(node, inst)
	for _, r := range refused {
		c.metrics.errors.WithLabelValues(reasonLabelRefused).Inc()
		c.recorder.Eventf(node, corev1.EventTypeWarning, EventLabelRefused, "Not setting label %q requested by the cloud provider: %s", r.key, r.why)
	}

	// Write 1: the addresses, in status. The taint stays until write 2, so no pod is
	// scheduled to a node whose addresses are not there yet.
	rv := node.ResourceVersion
	if !slices.Equal(node.Status.Addresses, addrs) {
		updated, err := c.patchAddresses(ctx, name, addrs)
		if err != nil {
			c.metrics.errors.WithLabelValues(reasonAPIError).Inc()
			return worker.WithReason(reasonAPIError, err)
		}
		rv = updated.ResourceVersion
	}
	// Write 2: provider ID, labels and the taint removal in one patch.
	done, err := c.finishInit(ctx, node, rv, providerID, labels)
	if err != nil {
		c.metrics.errors.WithLabelValues(reasonAPIError).Inc()
		return worker.WithReason(reasonAPIError, err)
	}
	if !done {
		return nil // someone else removed the taint meanwhile
	}
	age := nodeAge(c.now(), node).Seconds()
	c.metrics.initDuration.Observe(age)
	// Upstream's two measures of the same moment: its taint removal is its initial sync.
	c.metrics.upstreamTaintRemoval.Observe(age)
	c.metrics.upstreamInitialSync.Observe(age)
	c.setPending(name, false)
	c.recorder.Event(node, corev1.EventTypeNormal, EventSynced, "Node synced successfully")
	log.Info("Initialized node", "providerID", providerID, "addresses", formatAddresses(addrs), "labels", labels)
	return nil
}

// warn counts a failure by reason and records a Warning event on the node; the caller
// returns the error that decides the retry, with the same reason (worker.WithReason)
// for the worker's count.
func (c *Controller) warn(node *corev1.Node, reason, event, format string, args ...any) {
	c.metrics.errors.WithLabelValues(reason).Inc()
	c.recorder.Eventf(node, corev1.EventTypeWarning, event, format, args...)
}

// instanceFor returns what the cloud knows of node's instance. With an inventory it reads
// a listing that started after the node was created, shared with the other nodes of a
// burst; an instance such a listing lacks is asked for directly, since absence from a
// listing is no proof (and some providers list instances without node names). A
// positive wait, with no instance and no error, asks to come back then for a listing
// shared with the other nodes of a burst.
func (c *Controller) instanceFor(ctx context.Context, node *corev1.Node) (*cloud.Instance, time.Duration, error) {
	if c.inventory != nil {
		// When the listing was made is read before looking in it: a listing that
		// completes between the two would otherwise make a miss in the older one look
		// like a miss in a listing new enough to hold the instance, and cost a lookup.
		synced := c.inventory.LastSync()
		if inst, ok := c.inventory.Lookup(node.Spec.ProviderID, node.Name); ok {
			return &inst, 0, nil
		}
		now := c.now()
		after := listedAfter(node, now)
		if synced.Before(after) {
			if now.Before(after) {
				// Nodes created within the same second wait for one listing together.
				return nil, after.Sub(now), nil
			}
			requested, wait := c.pacer.schedule(now, after)
			if wait > 0 {
				return nil, wait, nil
			}
			if err := c.inventory.Sync(ctx, max(0, c.now().Sub(requested))); err != nil {
				c.pacer.fail(requested)
				return nil, 0, err
			}
			if inst, ok := c.inventory.Lookup(node.Spec.ProviderID, node.Name); ok {
				return &inst, 0, nil
			}
		}
	}
	inst, err := c.instances.InstanceMetadata(ctx, node)
	if err != nil {
		return nil, 0, err
	}
	if inst == nil {
		return nil, 0, fmt.Errorf("the provider returned no instance and no error for node %s", node.Name)
	}
	return inst, 0, nil
}

// listedAfter returns when a listing must have started to be sure to include node's
// instance, which exists before its kubelet registers the node. The apiserver keeps
// creation times in whole seconds, so a node created at 10:00:00.7 says 10:00:00: only
// a listing from 10:00:01 on is sure to be newer. A time far ahead of now means the
// clocks disagree; the node's creation is then taken as now.
func listedAfter(node *corev1.Node, now time.Time) time.Time {
	t := node.CreationTimestamp.Time
	if t.Nanosecond() == 0 {
		t = t.Add(time.Second)
	}
	if t.Sub(now) > time.Second {
		return now
	}
	return t
}

// patchAddresses replaces the node's status addresses. A JSON merge patch replaces the
// list as a whole: a strategic merge patch would merge by address type and could keep
// stale addresses of a type that has several.
func (c *Controller) patchAddresses(ctx context.Context, name string, addrs []corev1.NodeAddress) (*corev1.Node, error) {
	body, err := json.Marshal(map[string]any{"status": map[string]any{"addresses": addrs}})
	if err != nil {
		return nil, fmt.Errorf("encoding the address patch of node %s: %w", name, err)
	}
	n, err := c.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("patching the addresses of node %s: %w", name, err)
	}
	return n, nil
}

// finishInit sets the provider ID and labels and removes the taint in one patch,
// conditional on resourceVersion rv because the taint list is replaced as a whole. On a
// conflict it reads the node again and retries; it reports false when the taint is gone
// already.
func (c *Controller) finishInit(ctx context.Context, node *corev1.Node, rv, providerID string, labels map[string]string) (bool, error) {
	done, reread := false, false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !taints.Has(node, cloudproviderapi.TaintExternalCloudProvider) {
			return nil
		}
		// The first attempt follows the address write; a node read again after a
		// conflict must still have addresses, or the taint stays.
		if reread && len(node.Status.Addresses) == 0 {
			return fmt.Errorf("node %s lost its addresses before initialization finished", node.Name)
		}
		spec := map[string]any{"taints": taints.Without(node.Spec.Taints, cloudproviderapi.TaintExternalCloudProvider)}
		if node.Spec.ProviderID == "" {
			spec["providerID"] = providerID
		}
		meta := map[string]any{"resourceVersion": rv}
		if len(labels) > 0 {
			meta["labels"] = labels
		}
		body, err := json.Marshal(map[string]any{"metadata": meta, "spec": spec})
		if err != nil {
			return fmt.Errorf("encoding the initialization patch of node %s: %w", node.Name, err)
		}
		_, err = c.client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, body, metav1.PatchOptions{})
		if err == nil {
			done = true
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("removing the taint of node %s: %w", node.Name, err)
		}
		fresh, getErr := c.client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if getErr != nil {
			return fmt.Errorf("reading node %s after a conflict: %w", node.Name, getErr)
		}
		node, rv, reread = fresh, fresh.ResourceVersion, true
		return err
	})
	return done, err
}

// nodeAge is how long ago node was created, never negative.
func nodeAge(now time.Time, node *corev1.Node) time.Duration {
	return max(0, now.Sub(node.CreationTimestamp.Time))
}

package nodeinit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/nephele-dev/nephele/cloud"
)

// Event reasons.
const (
	EventSynced                = "Synced"
	EventInstanceNotFound      = "InstanceNotFound"
	EventInitializationFailed  = "InitializationFailed"
	EventProvidedNodeIPInvalid = "ProvidedNodeIPNotFound"
	EventNoAddresses           = "NoAddresses"
	EventNoProviderID          = "NoProviderID"
	EventLabelRefused          = "LabelRefused"
	EventAddressesNotUpdated   = "AddressesNotUpdated"
)

// initialize initializes the node called name if it still carries the taint.
func (c *Controller) initialize(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading node %s from the cache: %w", name, err)
	}
	if !hasTaint(node, TaintUninitialized) {
		return nil
	}
	log := c.log.WithValues("node", name)

	inst, err := c.instanceFor(ctx, node)
	var later requeueAfter
	switch {
	case errors.As(err, &later):
		return err
	case cloud.IsNotFound(err):
		c.fail(node, reasonInstanceNotFound, EventInstanceNotFound,
			"The cloud has no instance for this node (provider ID %q): it stays uninitialized and is retried", node.Spec.ProviderID)
		return fmt.Errorf("looking up the instance of node %s: %w", name, err)
	case err != nil:
		c.fail(node, reasonCloudError, EventInitializationFailed, "Looking up the node's instance in the cloud failed, retrying: %v", err)
		return fmt.Errorf("looking up the instance of node %s: %w", name, err)
	}

	providerID := node.Spec.ProviderID
	if providerID == "" {
		providerID = inst.ProviderID
	}
	if providerID == "" {
		c.fail(node, reasonNoProviderID, EventNoProviderID, "The cloud returned no provider ID for this node's instance: it stays uninitialized")
		return fmt.Errorf("node %s: the cloud returned no provider ID", name)
	}
	addrs, err := desiredAddresses(node, inst.Addresses)
	if err != nil {
		c.fail(node, reasonProvidedNodeIP, EventProvidedNodeIPInvalid, "%v: the node stays uninitialized", err)
		return fmt.Errorf("node %s: %w", name, err)
	}
	if len(addrs) == 0 {
		c.fail(node, reasonNoAddresses, EventNoAddresses, "The cloud returned no addresses for this node's instance: it stays uninitialized")
		return fmt.Errorf("node %s: the cloud returned no addresses", name)
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
			return err
		}
		rv = updated.ResourceVersion
	}
	// Write 2: provider ID, labels and the taint removal in one patch.
	done, err := c.finishInit(ctx, node, rv, providerID, labels)
	if err != nil {
		c.metrics.errors.WithLabelValues(reasonAPIError).Inc()
		return err
	}
	if !done {
		return nil // someone else removed the taint meanwhile
	}
	c.metrics.initDuration.Observe(nodeAge(c.now(), node).Seconds())
	c.setPending(name, false)
	c.recorder.Event(node, corev1.EventTypeNormal, EventSynced, "Node synced successfully")
	log.Info("Initialized node", "providerID", providerID, "addresses", formatAddresses(addrs), "labels", labels)
	return nil
}

// fail counts a failure and records a Warning event on the node.
func (c *Controller) fail(node *corev1.Node, reason, event, format string, args ...any) {
	c.metrics.errors.WithLabelValues(reason).Inc()
	c.recorder.Eventf(node, corev1.EventTypeWarning, event, format, args...)
}

// instanceFor returns what the cloud knows of node's instance. With an inventory it reads
// a listing that started after the node was created, shared with the other nodes of a
// burst; an instance such a listing lacks is asked for directly, since absence from a
// listing is no proof (and some providers list instances without node names).
func (c *Controller) instanceFor(ctx context.Context, node *corev1.Node) (*cloud.Instance, error) {
	if c.inventory != nil {
		if inst, ok := c.inventory.Lookup(node.Spec.ProviderID, node.Name); ok {
			return &inst, nil
		}
		now := c.now()
		after := listedAfter(node, now)
		if c.inventory.LastSync().Before(after) {
			if now.Before(after) {
				// Nodes created within the same second wait for one listing together.
				return nil, requeueAfter(after.Sub(now))
			}
			requested, wait := c.pacer.plan(now, after)
			if wait > 0 {
				return nil, requeueAfter(wait)
			}
			if err := c.inventory.Sync(ctx, max(0, c.now().Sub(requested))); err != nil {
				c.pacer.fail(requested)
				return nil, err
			}
			if inst, ok := c.inventory.Lookup(node.Spec.ProviderID, node.Name); ok {
				return &inst, nil
			}
		}
	}
	inst, err := c.instances.InstanceMetadata(ctx, node)
	if err != nil {
		return nil, err
	}
	if inst == nil {
		return nil, fmt.Errorf("the provider returned no instance and no error for node %s", node.Name)
	}
	return inst, nil
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
		if !hasTaint(node, TaintUninitialized) {
			return nil
		}
		// The first attempt follows the address write; a node read again after a
		// conflict must still have addresses, or the taint stays.
		if reread && len(node.Status.Addresses) == 0 {
			return fmt.Errorf("node %s lost its addresses before initialization finished", node.Name)
		}
		spec := map[string]any{"taints": withoutTaint(node.Spec.Taints, TaintUninitialized)}
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

// withoutTaint returns taints without those with key; nil when none is left, which the
// merge patch turns into removing the field.
func withoutTaint(taints []corev1.Taint, key string) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		if t.Key != key {
			out = append(out, t)
		}
	}
	return out
}

// nodeAge is how long ago node was created, never negative.
func nodeAge(now time.Time, node *corev1.Node) time.Duration {
	return max(0, now.Sub(node.CreationTimestamp.Time))
}

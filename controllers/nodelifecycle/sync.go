package nodelifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers/taints"
	"github.com/nephele-dev/nephele/controllers/worker"
)

// errNotLookedUp marks a lookup the round did not get to (it was cancelled).
var errNotLookedUp = errors.New("not looked up")

// errSafeMode is wrapped by the error of a round that deleted nothing in safe mode.
var errSafeMode = errors.New("no node deleted in safe mode")

// lookup is what the cloud said about one not-Ready node's instance.
type lookup struct {
	node *corev1.Node
	inst *cloud.Instance
	err  error
}

// monitor runs one round, the controller's unit of work: the worker counts it, failed
// when it could not decide (safe mode, a cache that cannot be listed).
func (c *Controller) monitor(ctx context.Context) {
	defer c.health.Progressed()
	start := time.Now()
	var roundErr error
	defer func() { c.worker.Observe(ctx, start, worker.Result{}, roundErr) }()
	c.metrics.rounds.Inc()
	listed, err := c.nodes.List(labels.Everything())
	if err != nil {
		c.log.Error(err, "Listing nodes from the cache")
		roundErr = worker.WithReason("cache_error", fmt.Errorf("listing nodes from the cache: %w", err))
		return
	}
	// Only the nodes the CCM owns are looked at: another cloud's node is neither looked
	// up here (its instance is not in this cloud, so it would look gone) nor counted.
	all := make([]*corev1.Node, 0, len(listed))
	for _, n := range listed {
		if c.owner.Owns(n) {
			all = append(all, n)
		}
	}
	var notReady []*corev1.Node
	for _, n := range all {
		if isReady(n) {
			// A Ready node costs no cloud call: its kubelet is the better witness.
			if taints.Has(n, cloudproviderapi.TaintNodeShutdown) {
				c.setShutdownTaint(ctx, n, false)
			}
			continue
		}
		notReady = append(notReady, n)
	}
	c.forgetAllBut(notReady)
	if len(notReady) == 0 {
		c.leaveSafeMode()
		return
	}

	results, listErr := c.lookup(ctx, notReady)
	if ctx.Err() != nil {
		return // stopping: decide nothing on a cut-short round
	}
	r := round{total: len(all), listingFailed: listErr != nil, lookups: len(notReady)}
	now := c.clock.Now()
	var candidates, failed []*corev1.Node
	for _, res := range results {
		switch {
		case res.err == nil:
			delete(c.notFound, res.node.Name)
			c.reconcileShutdown(ctx, res.node, res.inst.State)
		case cloud.IsNotFound(res.err):
			if c.observeNotFound(res.node, now) {
				candidates = append(candidates, res.node)
			}
		default:
			r.failed++
			failed = append(failed, res.node)
		}
	}
	if listErr != nil {
		failed = notReady
	}
	r.candidates = len(candidates)

	if reason := safeModeReason(c.threshold, r); reason != "" {
		affected := candidates
		if reason == SafeModeCloudErrors {
			affected = failed
		}
		c.enterSafeMode(reason, r, affected, listErr)
		roundErr = worker.WithReason(reason, fmt.Errorf("in safe mode (%s): %d nodes, %d lookups, %d failed, %d to delete: %w",
			reason, r.total, r.lookups, r.failed, r.candidates, errors.Join(listErr, errSafeMode)))
		return
	}
	c.leaveSafeMode()
	for _, n := range candidates {
		c.deleteNode(ctx, n, c.notFound[n.Name].first, now)
	}
}

// lookup asks the cloud about nodes: from one shared listing when there is an
// inventory (no older than a period, so rounds cost at most one listing per period), and
// one by one for the nodes the listing lacks, since absence from a listing is no proof
// that an instance is gone. The error is the listing's.
func (c *Controller) lookup(ctx context.Context, nodes []*corev1.Node) ([]lookup, error) {
	results := make([]lookup, len(nodes))
	direct := make([]int, 0, len(nodes))
	for i, n := range nodes {
		results[i] = lookup{node: n, err: errNotLookedUp}
	}
	if c.inventory != nil {
		if err := c.inventory.Sync(ctx, c.period); err != nil {
			c.metrics.lookupErrors.Inc()
			return nil, err
		}
		for i, n := range nodes {
			if inst, ok := c.inventory.Lookup(n.Spec.ProviderID, n.Name); ok {
				results[i].inst, results[i].err = &inst, nil
				continue
			}
			direct = append(direct, i)
		}
	} else {
		for i := range nodes {
			direct = append(direct, i)
		}
	}
	// Checking nodes that run refines; it waits behind initialization in the budget.
	lookupCtx := cloud.WithClass(ctx, cloud.ClassRefine)
	workqueue.ParallelizeUntil(ctx, c.workers, len(direct), func(j int) {
		res := &results[direct[j]]
		inst, err := c.instances.InstanceMetadata(lookupCtx, res.node)
		if err == nil && inst == nil {
			err = fmt.Errorf("the provider returned no instance and no error for node %s", res.node.Name)
		}
		if err != nil && !cloud.IsNotFound(err) {
			c.metrics.lookupErrors.Inc()
			c.log.V(2).Info("Looking up a node's instance failed", "node", res.node.Name, "err", err.Error())
		}
		res.inst, res.err = inst, err
	})
	return results, nil
}

// observeNotFound records a NotFound answer for node and reports whether it confirms an
// earlier one given at least the grace period before.
func (c *Controller) observeNotFound(node *corev1.Node, now time.Time) bool {
	obs, ok := c.notFound[node.Name]
	if !ok || obs.uid != node.UID {
		c.notFound[node.Name] = observation{uid: node.UID, first: now}
		c.log.Info("The cloud reports the node's instance gone; deleting the node if it still does after the grace period",
			"node", node.Name, "providerID", node.Spec.ProviderID, "grace", c.grace)
		return false
	}
	return now.Sub(obs.first) >= c.grace
}

// forgetAllBut drops the observations of nodes not in notReady: deleted, Ready again, or
// re-created under another UID.
func (c *Controller) forgetAllBut(notReady []*corev1.Node) {
	if len(c.notFound) == 0 {
		return
	}
	keep := make(map[string]types.UID, len(notReady))
	for _, n := range notReady {
		keep[n.Name] = n.UID
	}
	for name, obs := range c.notFound {
		if uid, ok := keep[name]; !ok || uid != obs.uid {
			delete(c.notFound, name)
		}
	}
}

// enterSafeMode records a round in safe mode. Events go on the affected nodes (those
// whose lookup failed, or those that would have been deleted) once per entry into safe
// mode or change of reason, at most maxSafeModeEvents of them.
func (c *Controller) enterSafeMode(reason string, r round, affected []*corev1.Node, listErr error) {
	c.metrics.safeMode.Set(1)
	c.metrics.safeModeRounds.WithLabelValues(reason).Inc()
	if c.safeMode == reason {
		return
	}
	c.safeMode = reason
	var msg string
	switch reason {
	case SafeModeCloudErrors:
		if listErr != nil {
			msg = fmt.Sprintf("Safe mode: no node is deleted while the cloud fails: listing instances failed: %v", listErr)
		} else {
			msg = fmt.Sprintf("Safe mode: no node is deleted while the cloud fails: %d of %d lookups of not-Ready nodes failed", r.failed, r.lookups)
		}
	default:
		msg = fmt.Sprintf("Safe mode: %d nodes would be deleted at once, more than the %d allowed (safe-mode threshold %v of %d nodes); deleting none",
			r.candidates, allowedDeletions(c.threshold, r.total), c.threshold, r.total)
	}
	c.log.Info("Entering safe mode: no node will be deleted", "reason", reason, "nodes", r.total,
		"lookups", r.lookups, "failed", r.failed, "candidates", r.candidates, "listingError", errString(listErr))
	for i, n := range affected {
		if i == maxSafeModeEvents {
			c.log.Info("Not recording safe-mode events on the remaining nodes", "count", len(affected)-i)
			break
		}
		c.recorder.Event(n, corev1.EventTypeWarning, EventNodeDeletionSafeMode, msg)
	}
}

// leaveSafeMode ends safe mode when the last round needed none.
func (c *Controller) leaveSafeMode() {
	c.metrics.safeMode.Set(0)
	if c.safeMode != "" {
		c.log.Info("Leaving safe mode", "reason", c.safeMode)
		c.safeMode = ""
	}
}

// deleteNode deletes a Node whose instance the cloud reported gone twice, at first and
// now. The UID precondition keeps a Node re-created under the same name safe.
func (c *Controller) deleteNode(ctx context.Context, node *corev1.Node, first, now time.Time) {
	c.recorder.Eventf(node, corev1.EventTypeNormal, EventDeletingNode,
		"Deleting node %s because its instance does not exist in the cloud (NotFound since %s, confirmed %s later)",
		node.Name, first.UTC().Format(time.RFC3339), now.Sub(first).Round(time.Millisecond))
	uid := node.UID
	err := c.client.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case err == nil:
		c.metrics.deletions.Inc()
		c.log.Info("Deleted node: its instance is gone", "node", node.Name, "providerID", node.Spec.ProviderID)
	case apierrors.IsNotFound(err):
	default:
		c.recorder.Eventf(node, corev1.EventTypeWarning, EventDeletingNodeFailed, "Failed deleting node %s: %v", node.Name, err)
		c.log.Error(err, "Deleting node", "node", node.Name)
		return // keep the observation: retried next round
	}
	delete(c.notFound, node.Name)
}

// reconcileShutdown taints a not-Ready node whose instance is stopped (or terminated but
// still listed) and untaints it once the instance runs.
func (c *Controller) reconcileShutdown(ctx context.Context, node *corev1.Node, state cloud.InstanceState) {
	switch state {
	case cloud.InstanceStopped, cloud.InstanceTerminated:
		c.setShutdownTaint(ctx, node, true)
	case cloud.InstanceRunning:
		c.setShutdownTaint(ctx, node, false)
	}
}

// setShutdownTaint adds or removes the shutdown taint. The taint list is replaced as a
// whole, so the patch is conditional on the cached resourceVersion; a conflict is left
// to the next round.
func (c *Controller) setShutdownTaint(ctx context.Context, node *corev1.Node, want bool) {
	if taints.Has(node, cloudproviderapi.TaintNodeShutdown) == want {
		return
	}
	list := taints.Without(node.Spec.Taints, cloudproviderapi.TaintNodeShutdown)
	if want {
		now := metav1.Now()
		list = append(list, corev1.Taint{Key: cloudproviderapi.TaintNodeShutdown, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &now})
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": node.ResourceVersion},
		"spec":     map[string]any{"taints": list},
	})
	if err != nil {
		c.log.Error(err, "Encoding the shutdown taint patch", "node", node.Name)
		return
	}
	_, err = c.client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, body, metav1.PatchOptions{})
	switch {
	case err == nil:
		c.log.Info("Updated the shutdown taint", "node", node.Name, "tainted", want)
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		c.log.V(2).Info("Shutdown taint not updated, retrying next round", "node", node.Name, "err", err.Error())
	default:
		c.log.Error(err, "Updating the shutdown taint", "node", node.Name, "tainted", want)
	}
}

func isReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

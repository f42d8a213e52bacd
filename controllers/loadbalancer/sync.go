package loadbalancer

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers/worker"
)

// sync brings the load balancer of the Service named by k in line with the Service. It
// returns what it did, for the duration metric.
func (c *Controller) sync(ctx context.Context, k string) (string, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(k)
	if err != nil {
		return opNone, worker.Terminal(fmt.Errorf("bad Service key %q: %w", k, err))
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return c.syncGone(ctx, k)
	}
	if err != nil {
		return opNone, &apiError{fmt.Errorf("reading Service %s from the cache: %w", k, err)}
	}
	if st, ok := c.state(k); ok && (st.uid != string(svc.UID) || st.gone) {
		// The Service was replaced by one of the same name while its load balancer
		// still existed (someone removed our finalizer), or the apiserver said it is
		// gone while the cache still shows it: that load balancer is an orphan now.
		if op, err := c.deleteOrphan(ctx, k, st); err != nil {
			return op, err
		}
	}
	held := c.holds(svc)
	switch {
	case needsCleanup(svc, c.classes, held):
		return c.cleanup(ctx, k, svc)
	case movedAway(svc, c.classes, held):
		return c.release(ctx, k, svc)
	case !wantsLoadBalancer(svc, c.classes) || svc.DeletionTimestamp != nil:
		if st, ok := c.state(k); ok {
			// We ensured a load balancer but the finalizer is gone: someone removed
			// it by hand. Do not leak the load balancer.
			return c.deleteOrphan(ctx, k, st)
		}
		return opNone, nil
	default:
		return c.ensure(ctx, k, svc)
	}
}

// syncGone handles a Service that no longer exists.
func (c *Controller) syncGone(ctx context.Context, k string) (string, error) {
	st, ok := c.state(k)
	if !ok {
		return opNone, nil
	}
	return c.deleteOrphan(ctx, k, st)
}

// deleteOrphan deletes the load balancer of a Service that vanished or stopped asking
// for it without the finalizer protocol, from the Service as last seen.
func (c *Controller) deleteOrphan(ctx context.Context, k string, st lbState) (string, error) {
	c.log.Info("Deleting the load balancer of a Service that went away without its finalizer", "service", k, "uid", st.uid)
	if st.elsewhere {
		// Another controller implements this load balancer: nothing of ours to delete.
		c.forget(k)
		return opNone, nil
	}
	c.recorder.Event(st.svc, corev1.EventTypeNormal, EventDeletingLoadBalancer, "Deleting load balancer")
	err := c.lbs.EnsureLoadBalancerDeleted(ctx, cleanupSpec(st.svc, c.clusterName), st.svc)
	if err != nil && !cloud.IsNotImplemented(err) {
		c.recorder.Eventf(st.svc, corev1.EventTypeWarning, EventDeleteLoadBalancerFailed, "Error deleting load balancer: %v", err)
		return opDelete, fmt.Errorf("deleting load balancer %s of Service %s: %w", LoadBalancerName(st.svc), k, err)
	}
	c.recorder.Event(st.svc, corev1.EventTypeNormal, EventDeletedLoadBalancer, "Deleted load balancer")
	c.forget(k)
	return opDelete, nil
}

// cleanup deletes the cloud load balancer, then clears the Service's status and removes
// the finalizer, in that order: the finalizer goes only once nothing is left to leak.
func (c *Controller) cleanup(ctx context.Context, k string, svc *corev1.Service) (string, error) {
	live, op, err := c.reread(ctx, k, svc, func(s *corev1.Service) bool { return needsCleanup(s, c.classes, c.holds(s)) })
	if live == nil {
		return op, err
	}
	svc = live
	c.recorder.Event(svc, corev1.EventTypeNormal, EventDeletingLoadBalancer, "Deleting load balancer")
	err = c.lbs.EnsureLoadBalancerDeleted(ctx, cleanupSpec(svc, c.clusterName), svc)
	// "Implemented elsewhere" (upstream's ImplementedElsewhere): another controller owns
	// this load balancer and its status, so there is nothing of ours left to leak and the
	// finalizer goes, as upstream's service controller lets the deletion through.
	elsewhere := cloud.IsNotImplemented(err)
	if err != nil && !elsewhere {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, EventSyncLoadBalancerFailed, "Error syncing load balancer: failed to delete load balancer: %v", err)
		return opDelete, fmt.Errorf("deleting load balancer %s of Service %s: %w", LoadBalancerName(svc), k, err)
	}
	c.recorder.Event(svc, corev1.EventTypeNormal, EventDeletedLoadBalancer, "Deleted load balancer")
	if !elsewhere && len(svc.Status.LoadBalancer.Ingress) > 0 {
		var err error
		if svc, err = c.patchStatus(ctx, svc, nil); err != nil {
			return opDelete, err
		}
	}
	if err := c.removeFinalizer(ctx, svc); err != nil {
		return opDelete, err
	}
	c.forget(k)
	return opDelete, nil
}

// reread returns svc as the apiserver has it before a deletion, which must not run
// twice: the cache lags behind the controller's own writes, and a sync queued by the
// previous deletion's patch would otherwise delete and announce everything again.
// Deletions are rare enough for one read each. It returns nil when the Service is gone
// (with what syncGone did), when it was replaced, or when it no longer needs the work
// (still says): the event for that change queues it again.
func (c *Controller) reread(ctx context.Context, k string, svc *corev1.Service, still func(*corev1.Service) bool) (*corev1.Service, string, error) {
	live, err := c.client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		op, err := c.syncGone(ctx, k)
		return nil, op, err
	case err != nil:
		return nil, opNone, &apiError{fmt.Errorf("reading Service %s: %w", k, err)}
	case live.UID != svc.UID || !still(live):
		return nil, opNone, nil
	}
	return live, opNone, nil
}

// release deletes the load balancer this controller made for a Service that now is a
// LoadBalancer of another class (see movedAway) and removes its ClassAnnotation. The
// finalizer and the status stay: they belong to the new class's implementation, which
// uses the same finalizer (KEP-1959), and removing it could let the Service go before
// that implementation has cleaned up. If that implementation uses no finalizer, the
// Service keeps one nobody removes; deleting it then waits for a person, which is
// visible, where a removed finalizer would leak silently.
func (c *Controller) release(ctx context.Context, k string, svc *corev1.Service) (string, error) {
	live, op, err := c.reread(ctx, k, svc, func(s *corev1.Service) bool { return movedAway(s, c.classes, c.holds(s)) })
	if live == nil {
		return op, err
	}
	st, held := c.state(k)
	c.log.Info("The Service moved to another load balancer class; deleting the load balancer this controller made for it",
		"service", k, "uid", live.UID, "class", className(live))
	if !held || !st.elsewhere {
		// The Service as this controller ensured it, if it did in this process: the
		// new class's Service may say nothing about the old load balancer.
		old := live
		if held {
			old = st.svc
		}
		c.recorder.Event(live, corev1.EventTypeNormal, EventDeletingLoadBalancer, "Deleting load balancer")
		err := c.lbs.EnsureLoadBalancerDeleted(ctx, cleanupSpec(old, c.clusterName), old)
		if err != nil && !cloud.IsNotImplemented(err) {
			c.recorder.Eventf(live, corev1.EventTypeWarning, EventDeleteLoadBalancerFailed, "Error deleting load balancer: %v", err)
			return opDelete, fmt.Errorf("deleting load balancer %s of Service %s, now of class %s: %w", LoadBalancerName(live), k, className(live), err)
		}
		c.recorder.Event(live, corev1.EventTypeNormal, EventDeletedLoadBalancer, "Deleted load balancer")
	}
	if annotatedFor(live, c.classes.class) {
		if err := c.patchMeta(ctx, live, map[string]any{"annotations": map[string]any{ClassAnnotation: nil}}, "removing annotation "+ClassAnnotation); err != nil {
			return opDelete, err
		}
	}
	c.forget(k)
	return opDelete, nil
}

// holds reports whether this process has ensured a load balancer for svc, by UID.
func (c *Controller) holds(svc *corev1.Service) bool {
	st, ok := c.state(key(svc))
	return ok && st.uid == string(svc.UID)
}

// ensure makes the Service's load balancer match it: a backend update when only the
// nodes changed since the last ensure, a full EnsureLoadBalancer otherwise.
func (c *Controller) ensure(ctx context.Context, k string, svc *corev1.Service) (string, error) {
	spec, err := buildSpec(svc, c.clusterName)
	if err != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, EventSyncLoadBalancerFailed, "Error syncing load balancer: %v", err)
		return opNone, worker.Terminal(fmt.Errorf("service %s: %w", k, err))
	}
	if st, ok := c.state(k); !ok || st.uid != string(svc.UID) {
		// This process has not ensured this Service's load balancer, so the ensure below
		// may create it. The cache may be old (this process was frozen, or its watch
		// lagged) and show a Service that is gone, replaced or being deleted, whose
		// finalizer another leader has already handled: read the apiserver first. Once
		// per Service and process, or none when adding the finalizer reads it anyway.
		live, err := c.confirmLive(ctx, k, svc)
		if err != nil || live == nil {
			return opNone, err
		}
		if live.ResourceVersion != svc.ResourceVersion {
			if spec, err = buildSpec(live, c.clusterName); err != nil {
				c.recorder.Eventf(live, corev1.EventTypeWarning, EventSyncLoadBalancerFailed, "Error syncing load balancer: %v", err)
				return opNone, worker.Terminal(fmt.Errorf("service %s: %w", k, err))
			}
		}
		svc = live
	}
	snap := c.backends.current()
	// Shared, not copied: the provider contract makes spec.Backends read-only, and a
	// copy per sync of a 5,000-node set was megabytes of heap with 20 syncs in flight.
	spec.Backends = snap.backends
	sk := specKey(spec, svc)

	if st, ok := c.state(k); ok && specUnchanged(st.specKey, sk) {
		if st.elsewhere {
			return opNone, nil // another controller's load balancer: its backends and status are not ours
		}
		op := opNone
		if st.backends != snap.hash {
			op = opUpdateBackends
			switch err := c.updateBackends(ctx, k, svc, spec); {
			case err == nil:
				st.backends = snap.hash
				st.svc = svc
				c.setState(k, st)
				c.requeueIfNodesMoved(k, snap.hash)
			case cloud.IsNotFound(err) || cloud.IsNotImplemented(err):
				// The load balancer is gone from the cloud, or the provider only does
				// full ensures: fall through to one.
				c.log.Info("Backend update not possible, ensuring the whole load balancer", "service", k, "err", err)
				return c.ensureFull(ctx, k, svc, spec, snap.hash, sk)
			default:
				return op, err
			}
		}
		// Someone else may have overwritten the status we wrote.
		if !equality.Semantic.DeepEqual(svc.Status.LoadBalancer, st.status) {
			if _, err := c.patchStatus(ctx, svc, &st.status); err != nil {
				return op, err
			}
		}
		return op, nil
	}
	return c.ensureFull(ctx, k, svc, spec, snap.hash, sk)
}

// updateBackends calls UpdateLoadBalancerBackends and records the outcome.
func (c *Controller) updateBackends(ctx context.Context, k string, svc *corev1.Service, spec *cloud.LoadBalancerSpec) error {
	if len(spec.Backends) == 0 {
		c.recorder.Event(svc, corev1.EventTypeWarning, EventUnAvailableLoadBalancer, "There are no available nodes for LoadBalancer")
	}
	if err := c.lbs.UpdateLoadBalancerBackends(ctx, spec, svc); err != nil {
		if !cloud.IsNotFound(err) && !cloud.IsNotImplemented(err) {
			c.recorder.Eventf(svc, corev1.EventTypeWarning, EventUpdateLoadBalancerFailed, "Error updating load balancer with new hosts (%d nodes): %v", len(spec.Backends), err)
		}
		return fmt.Errorf("updating backends of load balancer %s of Service %s: %w", spec.Name, k, err)
	}
	c.metrics.backendUpdates.Inc()
	c.recorder.Eventf(svc, corev1.EventTypeNormal, EventUpdatedLoadBalancer, "Updated load balancer with new hosts (%d nodes)", len(spec.Backends))
	return nil
}

// ensureFull calls EnsureLoadBalancer, publishes the status and remembers what it applied.
func (c *Controller) ensureFull(ctx context.Context, k string, svc *corev1.Service, spec *cloud.LoadBalancerSpec, backends uint64, sk string) (string, error) {
	c.recorder.Event(svc, corev1.EventTypeNormal, EventEnsuringLoadBalancer, "Ensuring load balancer")
	if len(spec.Backends) == 0 {
		c.recorder.Event(svc, corev1.EventTypeWarning, EventUnAvailableLoadBalancer, "There are no available nodes for LoadBalancer")
	}
	if len(svc.Status.LoadBalancer.Ingress) > 0 {
		// The load balancer already serves: re-ensuring it refines (nephele: priority class).
		ctx = cloud.WithClass(ctx, cloud.ClassRefine)
	}
	status, err := c.lbs.EnsureLoadBalancer(ctx, spec, svc)
	if cloud.IsNotImplemented(err) {
		// The provider says another controller implements this Service's load balancer
		// (upstream's ImplementedElsewhere). Like upstream, leave the Service alone
		// quietly, without a warning or a retry; remember it so that node changes do
		// not queue it, and ensure again only when its spec changes.
		c.log.V(2).Info("Load balancer implemented by another controller; leaving the Service alone", "service", k)
		c.setState(k, lbState{uid: string(svc.UID), specKey: sk, backends: backends, svc: svc, elsewhere: true})
		return opEnsure, nil
	}
	if err != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, EventSyncLoadBalancerFailed, "Error syncing load balancer: %v", err)
		return opEnsure, fmt.Errorf("ensuring load balancer %s of Service %s: %w", spec.Name, k, err)
	}
	if status == nil {
		status = &corev1.LoadBalancerStatus{}
	}
	st := lbState{uid: string(svc.UID), specKey: sk, backends: backends, status: *status.DeepCopy(), svc: svc}
	if !equality.Semantic.DeepEqual(svc.Status.LoadBalancer, st.status) {
		patched, err := c.patchStatus(ctx, svc, &st.status)
		if err != nil {
			if c.staleReason(ctx, svc, err) != "" {
				// The Service went away, or was replaced by one of the same name, while
				// its load balancer was being ensured: nothing may outlive it.
				return c.deleteCreated(ctx, k, st, err)
			}
			// Keep nothing: the next attempt ensures again and retries the patch.
			return opEnsure, err
		}
		st.svc = patched
		svc = patched
	}
	c.setState(k, st)
	c.recorder.Event(svc, corev1.EventTypeNormal, EventEnsuredLoadBalancer, "Ensured load balancer")
	c.requeueIfNodesMoved(k, backends)
	return opEnsure, nil
}

// confirmLive returns the Service as the apiserver has it, with the cleanup finalizer,
// before an ensure that may create its load balancer; or nil when the cached copy is
// out of date in a way that forbids creating: the Service is gone, was replaced by one
// of the same name, is being deleted or no longer asks for a load balancer. The event
// that brings the cache up to date queues the Service again.
func (c *Controller) confirmLive(ctx context.Context, k string, cached *corev1.Service) (*corev1.Service, error) {
	var live *corev1.Service
	var err error
	if hasFinalizer(cached) && annotatedFor(cached, c.classes.class) {
		live, err = c.client.CoreV1().Services(cached.Namespace).Get(ctx, cached.Name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			err = &apiError{fmt.Errorf("reading Service %s before ensuring its load balancer: %w", k, err)}
		}
	} else {
		// The finalizer goes on before anything exists in the cloud, so that nothing
		// the controller creates can outlive the Service unnoticed. The patch answers
		// with the Service as stored, and fails on a UID other than the cache's.
		live, err = c.addFinalizer(ctx, cached)
	}
	var why string
	if err != nil {
		why = c.staleReason(ctx, cached, err)
	}
	switch {
	case why != "":
		return nil, c.skipStale(k, cached, why)
	case err != nil:
		return nil, err
	case live.UID != cached.UID:
		return nil, c.skipStale(k, cached, "the apiserver has another Service of that name, UID "+string(live.UID))
	case live.DeletionTimestamp != nil:
		return nil, c.skipStale(k, cached, "the Service is being deleted")
	case !wantsLoadBalancer(live, c.classes):
		return nil, c.skipStale(k, cached, "the Service no longer asks for a load balancer of this class")
	case !hasFinalizer(live) || !annotatedFor(live, c.classes.class):
		return c.addFinalizer(ctx, live)
	}
	return live, nil
}

// staleReason says why a write to svc failed with err when the cause is that the cached
// Service is out of date: it is gone, was replaced by one of the same name, or is being
// deleted (which forbids adding a finalizer); "" otherwise. A write that carries the UID
// fails on another Service with 422 Invalid (the UID is immutable), not 409 Conflict, so
// the answer comes from reading the Service, which costs a GET on failed writes only.
func (c *Controller) staleReason(ctx context.Context, svc *corev1.Service, err error) string {
	if apierrors.IsNotFound(err) {
		return "the apiserver has no such Service"
	}
	if !apierrors.IsInvalid(err) && !apierrors.IsConflict(err) && !apierrors.IsForbidden(err) {
		return ""
	}
	live, err := c.client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "the apiserver has no such Service"
	case err != nil:
		return ""
	case live.UID != svc.UID:
		return "the apiserver has another Service of that name, UID " + string(live.UID)
	case live.DeletionTimestamp != nil:
		return "the Service is being deleted"
	}
	return ""
}

// skipStale counts and logs an ensure left out because the cache was out of date. It
// returns nil: there is nothing to retry.
func (c *Controller) skipStale(k string, cached *corev1.Service, why string) error {
	c.metrics.stale.WithLabelValues(staleSkipped).Inc()
	c.log.Info("Not ensuring a load balancer: the cached Service is out of date", "service", k, "uid", cached.UID, "reason", why)
	return nil
}

// deleteCreated deletes the load balancer just ensured for a Service that the status
// patch found gone or replaced (cause), and keeps it as an orphan to delete should
// that fail, so that it does not depend on a cache that may still show the Service.
func (c *Controller) deleteCreated(ctx context.Context, k string, st lbState, cause error) (string, error) {
	c.metrics.stale.WithLabelValues(staleDeleted).Inc()
	c.log.Info("Deleting the load balancer just ensured: its Service went away meanwhile", "service", k, "uid", st.uid, "cause", cause)
	st.gone = true
	c.setState(k, st)
	return c.deleteOrphan(ctx, k, st)
}

// requeueIfNodesMoved queues k again when the backend set changed while its cloud call
// ran: the node batcher may have compared before this load balancer's state was saved.
func (c *Controller) requeueIfNodesMoved(k string, applied uint64) {
	if c.backends.currentHash() != applied {
		c.worker.Add(k)
	}
}

// addFinalizer adds the cleanup finalizer, and ClassAnnotation naming this controller's
// class, in one strategic merge patch, which appends to the list without clobbering
// other finalizers.
func (c *Controller) addFinalizer(ctx context.Context, svc *corev1.Service) (*corev1.Service, error) {
	return c.patchMetaAnswer(ctx, svc, map[string]any{
		"finalizers":  []string{Finalizer},
		"annotations": map[string]any{ClassAnnotation: c.classes.class},
	}, "adding finalizer "+Finalizer)
}

// removeFinalizer removes the cleanup finalizer and ClassAnnotation in one patch, and
// leaves other finalizers alone.
func (c *Controller) removeFinalizer(ctx context.Context, svc *corev1.Service) error {
	return c.patchMeta(ctx, svc, map[string]any{
		"$deleteFromPrimitiveList/finalizers": []string{Finalizer},
		"annotations":                         map[string]any{ClassAnnotation: nil},
	}, "removing finalizer "+Finalizer)
}

// patchMeta applies meta to svc's metadata like patchMetaAnswer. A Service that is gone
// has nothing left to remove, so NotFound is success.
func (c *Controller) patchMeta(ctx context.Context, svc *corev1.Service, meta map[string]any, what string) error {
	_, err := c.patchMetaAnswer(ctx, svc, meta, what)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// patchMetaAnswer applies meta to svc's metadata with a strategic merge patch and
// returns the Service as stored. The UID in the patch makes it fail rather than touch
// a different Service of the same name; what names the change in errors.
func (c *Controller) patchMetaAnswer(ctx context.Context, svc *corev1.Service, meta map[string]any, what string) (*corev1.Service, error) {
	m := map[string]any{"uid": svc.UID}
	for k, v := range meta {
		m[k] = v
	}
	patch, err := json.Marshal(map[string]any{"metadata": m})
	if err != nil {
		return nil, fmt.Errorf("encoding the patch %s of Service %s/%s: %w", what, svc.Namespace, svc.Name, err)
	}
	out, err := c.client.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, &apiError{fmt.Errorf("%s of Service %s/%s: %w", what, svc.Namespace, svc.Name, err)}
	}
	return out, nil
}

// patchStatus sets status.loadBalancer through the status subresource with a JSON merge
// patch; nil clears it. The ingress list is always written whole (null to clear), since
// a merge patch would otherwise keep the old entries.
func (c *Controller) patchStatus(ctx context.Context, svc *corev1.Service, status *corev1.LoadBalancerStatus) (*corev1.Service, error) {
	var ingress []corev1.LoadBalancerIngress
	if status != nil {
		ingress = status.Ingress
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": svc.UID},
		"status":   map[string]any{"loadBalancer": map[string]any{"ingress": ingress}},
	})
	if err != nil {
		return nil, fmt.Errorf("encoding status patch for Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	out, err := c.client.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, &apiError{fmt.Errorf("patching status.loadBalancer of Service %s/%s: %w", svc.Namespace, svc.Name, err)}
	}
	return out, nil
}

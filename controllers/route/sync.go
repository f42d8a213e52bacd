package route

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers/worker"
)

// syncNode brings the routes of the node named key (or the orphan routes) in line with
// the node, then sets its NetworkUnavailable condition.
func (c *Controller) syncNode(ctx context.Context, key string) (worker.Result, error) {
	err := c.syncRoutes(ctx, key)
	if err != nil && isPermanent(err) {
		// Only a change to the node (its next event) can help.
		return worker.Result{}, worker.Terminal(err)
	}
	return worker.Result{}, err
}

// syncRoutes does syncNode's work and returns every error it met, joined.
func (c *Controller) syncRoutes(ctx context.Context, key string) error {
	if after, need := c.table.needsListing(c.errorRelist); need {
		if err := c.table.refresh(ctx, after); err != nil {
			return fmt.Errorf("listing routes of cluster %q: %w", c.clusterName, err)
		}
	}
	var node *corev1.Node
	if key != orphanKey {
		n, err := c.nodes.Get(key)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("getting node %q: %w", key, err)
		case c.owner.Owns(n):
			node = n
		}
		// A node the CCM does not own stays nil: absent for this cloud.
	}

	p, unlistedAt := c.planNode(key, node)
	if !unlistedAt.IsZero() {
		// A route to delete was created by this controller and never listed, so its
		// cloud name is unknown: wait for a listing newer than it and plan again. Workers
		// deleting a burst of such routes share that listing.
		if err := c.table.refresh(ctx, unlistedAt); err != nil {
			return fmt.Errorf("listing routes of cluster %q: %w", c.clusterName, err)
		}
		p, _ = c.planNode(key, node)
	}

	errs := c.apply(ctx, key, node, &p)
	createFailed := false
	for _, e := range errs {
		var ce *createError
		if errors.As(e, &ce) {
			createFailed = true
		}
	}
	if node != nil {
		if err := c.updateCondition(ctx, node, &p, createFailed); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// planNode plans key's routes. When a delete names a route that no listing has shown
// yet, or the node's addresses differ from those such a route was created with (only a
// listing says whether the provider routes by them, and so whether to replace it), it
// also returns the latest time such a route was created; else the zero time.
func (c *Controller) planNode(key string, node *corev1.Node) (p nodePlan, unlistedAt time.Time) {
	c.table.view(func(idx *routeIndex) {
		p = c.planner.plan(key, node, idx)
		later := func(r cloud.Route) {
			if at, ok := idx.unlisted[keyOf(r)]; ok && at.After(unlistedAt) {
				unlistedAt = at
			}
		}
		for _, r := range p.deletes {
			later(r)
		}
		if node != nil {
			for _, r := range idx.byNode[key] {
				if !cloud.SameNodeAddresses(r.TargetNodeAddresses, node.Status.Addresses) {
					later(r)
				}
			}
		}
	})
	return p, unlistedAt
}

// createError marks a failed route creation.
type createError struct{ err error }

func (e *createError) Error() string { return e.err.Error() }

func (e *createError) Unwrap() error { return e.err }

// apply runs the plan's deletes, then its creates. A create whose CIDR still has a
// route that could not be deleted is not attempted: the cloud would refuse it.
func (c *Controller) apply(ctx context.Context, key string, node *corev1.Node, p *nodePlan) []error {
	var errs []error
	var blocked []netip.Prefix
	for _, r := range p.deletes {
		done, err := c.deleteRoute(ctx, r)
		if done {
			continue
		}
		if err != nil {
			if node != nil && ctx.Err() == nil {
				c.recorder.Eventf(node, corev1.EventTypeWarning, EventFailedToDeleteRoute,
					"Could not delete route %q to %s: %v", r.Name, r.DestinationCIDR, err)
			}
			errs = append(errs, fmt.Errorf("deleting route %q (%s to node %q): %w", r.Name, r.DestinationCIDR, r.TargetNode, err))
			blocked = append(blocked, r.DestinationCIDR.Masked())
		}
	}
	for _, cr := range p.creates {
		if slices.Contains(blocked, cr.route.DestinationCIDR) {
			errs = append(errs, &createError{fmt.Errorf("not creating route %s for node %q: an old route for it could not be deleted", cr.route.DestinationCIDR, key)})
			continue
		}
		if err := c.createRoute(ctx, cr); err != nil {
			if ctx.Err() == nil {
				c.recorder.Eventf(node, corev1.EventTypeWarning, EventFailedToCreateRoute,
					"Could not create route %s (name hint %q) for node %s: %v", cr.route.DestinationCIDR, cr.hint, key, err)
			}
			errs = append(errs, &createError{fmt.Errorf("creating route %s (name hint %q) for node %q: %w", cr.route.DestinationCIDR, cr.hint, key, err)})
		}
	}
	return errs
}

// deleteRoute deletes r under its CIDR's lock. done is true when r is gone: deleted
// now, or already by another worker, which the table shows.
func (c *Controller) deleteRoute(ctx context.Context, r cloud.Route) (done bool, err error) {
	unlock, err := c.locks.lock(ctx, r.DestinationCIDR.Masked())
	if err != nil {
		return false, err
	}
	defer unlock()
	if !c.table.has(r) {
		return true, nil
	}
	c.log.Info("Deleting route", "node", r.TargetNode, "cidr", r.DestinationCIDR, "name", r.Name, "blackhole", r.Blackhole)
	if err := c.change(ctx, cloud.RouteChange{Delete: true, Route: r}); err != nil {
		c.changeFailed(ctx)
		return false, err
	}
	c.table.deleted(r)
	return true, nil
}

// createRoute creates cr under its CIDR's lock, unless another worker already did.
func (c *Controller) createRoute(ctx context.Context, cr create) error {
	cidr := cr.route.DestinationCIDR
	unlock, err := c.locks.lock(ctx, cidr)
	if err != nil {
		return err
	}
	defer unlock()
	if c.table.routed(cr.route.TargetNode, cidr) {
		return nil
	}
	c.log.Info("Creating route", "node", cr.route.TargetNode, "cidr", cidr, "nameHint", cr.hint)
	if err := c.change(ctx, cloud.RouteChange{NameHint: cr.hint, Route: cr.route}); err != nil {
		c.changeFailed(ctx)
		return err
	}
	// Recorded with the addresses it was created with but not EnableNodeAddresses:
	// whether the provider routes by them shows only in a listing, which planNode waits
	// for when the node's addresses change before one has shown the route.
	c.table.created(cloud.Route{Name: cr.hint, TargetNode: cr.route.TargetNode, DestinationCIDR: cidr,
		TargetNodeAddresses: slices.Clone(cr.route.TargetNodeAddresses)})
	return nil
}

// change makes one route change: in the batcher's next call when the provider batches,
// else with CreateRoute or DeleteRoute.
func (c *Controller) change(ctx context.Context, ch cloud.RouteChange) error {
	if c.batcher != nil {
		return c.batcher.do(ctx, ch)
	}
	return applyOne(ctx, c.routes, c.clusterName, ch)
}

// changeFailed marks the route table for relisting after a create or delete failed
// for a reason other than stopping: the cloud may have done it anyway. Waiting out a
// throttled answer's Retry-After, counting and timing calls are the manager's cloud
// call path's job, shared by every controller.
func (c *Controller) changeFailed(ctx context.Context) {
	if ctx.Err() == nil {
		c.table.markDirty()
	}
}

func (c *Controller) listRoutes(ctx context.Context) ([]cloud.Route, error) {
	return c.routes.ListRoutes(ctx, c.clusterName)
}

// isPermanent reports whether every error in err cannot go away by retrying: only
// ErrInvalid from the cloud, which says the node asks for something the provider cannot do.
func isPermanent(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !isPermanent(e) {
				return false
			}
		}
		return true
	}
	return cloud.IsInvalid(err) && !cloud.IsThrottled(err)
}

package conformance

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"
)

// testRoute returns the i-th route of the run and its name hint. It carries the target
// node's addresses as the route controller sends them; a host name, which any provider
// can take.
func (s *suite) testRoute(ctx context.Context, i uint64) (cloud.Route, string) {
	target := s.routeTarget(ctx)
	return cloud.Route{
		TargetNode:          target,
		DestinationCIDR:     s.routeCIDR(i),
		TargetNodeAddresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: target}},
	}, s.nameFor(fmt.Sprintf("route-%d", i))
}

func (c *checker) listRoutes(cluster string) ([]cloud.Route, error) {
	return call(c, func(ctx context.Context) ([]cloud.Route, error) { return c.s.routes.ListRoutes(ctx, cluster) })
}

func (c *checker) createRoute(hint string, r cloud.Route) error {
	return do(c, func(ctx context.Context) error { return c.s.routes.CreateRoute(ctx, c.s.cfg.ClusterName, hint, r) })
}

func (c *checker) deleteRoute(r cloud.Route) error {
	return do(c, func(ctx context.Context) error { return c.s.routes.DeleteRoute(ctx, c.s.cfg.ClusterName, r) })
}

// routesTo returns the routes in list to r's destination.
func routesTo(list []cloud.Route, r cloud.Route) []cloud.Route {
	var out []cloud.Route
	for _, l := range list {
		if l.DestinationCIDR.Masked() == r.DestinationCIDR.Masked() {
			out = append(out, l)
		}
	}
	return out
}

// mustCreateRoute creates r and records a problem when that fails.
func (c *checker) mustCreateRoute(hint string, r cloud.Route) bool {
	if err := c.createRoute(hint, r); err != nil {
		c.errorf("CreateRoute %s to node %s in cluster %s: %s", r.DestinationCIDR, r.TargetNode, c.s.cfg.ClusterName, describe(err))
		return false
	}
	return true
}

func checkRouteCreateList(c *checker) {
	r, hint := c.s.testRoute(c.ctx, 0)
	if !c.mustCreateRoute(hint, r) {
		return
	}
	c.poll(fmt.Sprintf("route %s to node %s is listed", r.DestinationCIDR, r.TargetNode), func() (bool, string) {
		list, err := c.listRoutes(c.s.cfg.ClusterName)
		if err != nil {
			return false, "ListRoutes: " + describe(err)
		}
		found := routesTo(list, r)
		if len(found) == 0 {
			return false, fmt.Sprintf("not among the %d routes listed", len(list))
		}
		for _, f := range found {
			if f.TargetNode != r.TargetNode {
				c.errorf("route to %s is listed with target node %q, want %q", r.DestinationCIDR, f.TargetNode, r.TargetNode)
			}
			if f.Blackhole {
				c.errorf("route to %s via live node %s is listed as a blackhole", r.DestinationCIDR, r.TargetNode)
			}
			// A provider saying it records the node's addresses must list what it was
			// given: the controller replaces a route whose addresses differ from the
			// node's, so a wrong answer would replace it on every sync.
			if f.EnableNodeAddresses && !cloud.SameNodeAddresses(f.TargetNodeAddresses, r.TargetNodeAddresses) {
				c.errorf("route to %s is listed with EnableNodeAddresses and node addresses %v, want the %v it was created with", r.DestinationCIDR, f.TargetNodeAddresses, r.TargetNodeAddresses)
			}
		}
		return true, ""
	})
}

func checkRouteCreateIdempotent(c *checker) {
	r, hint := c.s.testRoute(c.ctx, 0)
	for try := 1; try <= 2; try++ {
		if err := c.createRoute(hint, r); err != nil {
			c.errorf("CreateRoute %s to node %s, call %d: %s", r.DestinationCIDR, r.TargetNode, try, describe(err))
		}
	}
	if c.failed() {
		return
	}
	list, err := c.listRoutes(c.s.cfg.ClusterName)
	if err != nil {
		c.errorf("ListRoutes: %s", describe(err))
		return
	}
	if n := len(routesTo(list, r)); n != 1 {
		c.errorf("after creating the route to %s repeatedly, %d routes to it are listed, want 1", r.DestinationCIDR, n)
	}
}

func checkRouteClusterScoped(c *checker) {
	r, hint := c.s.testRoute(c.ctx, 0)
	if !c.mustCreateRoute(hint, r) {
		return
	}
	other := c.s.cfg.ClusterName + "-other"
	list, err := c.listRoutes(other)
	if err != nil {
		c.errorf("ListRoutes of cluster %s: %s", other, describe(err))
		return
	}
	if found := routesTo(list, r); len(found) > 0 {
		c.errorf("the route to %s of cluster %s is listed for cluster %s too", r.DestinationCIDR, c.s.cfg.ClusterName, other)
	}
}

func checkRouteDeleteIdempotent(c *checker) {
	r, hint := c.s.testRoute(c.ctx, 0)
	if !c.mustCreateRoute(hint, r) {
		return
	}
	list, err := c.listRoutes(c.s.cfg.ClusterName)
	if err != nil {
		c.errorf("ListRoutes: %s", describe(err))
		return
	}
	// Controllers delete the routes they listed, so the suite does too.
	target := r
	if found := routesTo(list, r); len(found) > 0 {
		target = found[0]
	}
	if err := c.deleteRoute(target); err != nil {
		c.errorf("DeleteRoute %s (%s to node %s): %s", target.Name, target.DestinationCIDR, target.TargetNode, describe(err))
		return
	}
	if !c.poll(fmt.Sprintf("deleted route to %s is no longer listed", r.DestinationCIDR), func() (bool, string) {
		list, err := c.listRoutes(c.s.cfg.ClusterName)
		if err != nil {
			return false, "ListRoutes: " + describe(err)
		}
		if len(routesTo(list, r)) > 0 {
			return false, "still listed"
		}
		return true, ""
	}) {
		return
	}
	if err := c.deleteRoute(target); err != nil {
		c.errorf("DeleteRoute %s again, once it was gone: %s; want success", target.DestinationCIDR, describe(err))
	}
}

// checkRouteBatch checks the optional cloud.RouteBatcher of a provider's Routes: it
// takes at least one change a call, creates routes that are then listed once each, is
// idempotent, and deletes routes, a gone one included. Routes without it skip.
func checkRouteBatch(c *checker) {
	b, ok := c.s.routes.(cloud.RouteBatcher)
	if !ok {
		c.skipf("the provider's Routes do not implement cloud.RouteBatcher, which is optional")
		return
	}
	bound := b.MaxRouteChanges()
	if bound < 1 {
		c.errorf("MaxRouteChanges = %d, want at least 1", bound)
		return
	}
	apply := func(changes []cloud.RouteChange) error {
		return do(c, func(ctx context.Context) error { return b.ApplyRoutes(ctx, c.s.cfg.ClusterName, changes) })
	}
	// Two creations, or one when the provider takes one change a call.
	var creates []cloud.RouteChange
	for i := range uint64(min(bound, 2)) {
		r, hint := c.s.testRoute(c.ctx, 1+i)
		creates = append(creates, cloud.RouteChange{NameHint: hint, Route: r})
	}
	for try := 1; try <= 2; try++ {
		if err := apply(creates); err != nil {
			c.errorf("ApplyRoutes of %d creations, call %d: %s", len(creates), try, describe(err))
			return
		}
	}
	var listed []cloud.Route
	if !c.poll(fmt.Sprintf("the %d routes ApplyRoutes created are listed once each", len(creates)), func() (bool, string) {
		list, err := c.listRoutes(c.s.cfg.ClusterName)
		if err != nil {
			return false, "ListRoutes: " + describe(err)
		}
		listed = listed[:0]
		for _, ch := range creates {
			found := routesTo(list, ch.Route)
			if len(found) != 1 {
				return false, fmt.Sprintf("%d routes to %s listed", len(found), ch.Route.DestinationCIDR)
			}
			if found[0].TargetNode != ch.Route.TargetNode {
				c.errorf("route to %s is listed with target node %q, want %q", ch.Route.DestinationCIDR, found[0].TargetNode, ch.Route.TargetNode)
			}
			listed = append(listed, found[0])
		}
		return true, ""
	}) {
		return
	}
	// Delete them as listed; the first one goes in a call of its own first, so that the
	// second call also deletes a route that is already gone.
	deletes := make([]cloud.RouteChange, 0, len(listed))
	for _, r := range listed {
		deletes = append(deletes, cloud.RouteChange{Delete: true, Route: r})
	}
	if err := apply(deletes[:1]); err != nil {
		c.errorf("ApplyRoutes deleting the route to %s: %s", listed[0].DestinationCIDR, describe(err))
		return
	}
	for len(deletes) > 0 {
		n := min(bound, len(deletes))
		if err := apply(deletes[:n]); err != nil {
			c.errorf("ApplyRoutes deleting %d routes, one of them already gone: %s; want success", n, describe(err))
			return
		}
		deletes = deletes[n:]
	}
	c.poll("the routes ApplyRoutes deleted are no longer listed", func() (bool, string) {
		list, err := c.listRoutes(c.s.cfg.ClusterName)
		if err != nil {
			return false, "ListRoutes: " + describe(err)
		}
		for _, r := range listed {
			if len(routesTo(list, r)) > 0 {
				return false, fmt.Sprintf("the route to %s is still listed", r.DestinationCIDR)
			}
		}
		return true, ""
	})
}

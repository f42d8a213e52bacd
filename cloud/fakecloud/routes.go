package fakecloud

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/nephele-dev/nephele/cloud"
)

// AllRoutes returns the routes of clusterName sorted by target node, then destination,
// without a logged call or any fault.
func (c *Cloud) AllRoutes(clusterName string) []cloud.Route {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sortedRoutes(clusterName)
}

// AddRoute creates route in clusterName as CreateRoute would, without a logged call or
// any fault, keeping route.Name, route.Blackhole and the node addresses (with
// route.EnableNodeAddresses) as given.
func (c *Cloud) AddRoute(clusterName string, route cloud.Route) error {
	if err := checkRoute(route); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if route.Name == "" {
		route.Name = c.newRouteName()
	}
	route.TargetNodeAddresses = slices.Clone(route.TargetNodeAddresses)
	c.clusterRoutes(clusterName)[route.DestinationCIDR] = &route
	return nil
}

// SetRouteBlackhole marks the route to destination in clusterName as a blackhole (or
// not), as a cloud does when the route's target instance is gone. It returns an error
// wrapping cloud.ErrNotFound when there is no such route.
func (c *Cloud) SetRouteBlackhole(clusterName string, destination netip.Prefix, blackhole bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.routes[clusterName][destination]
	if !ok {
		return cloud.NotFoundf("route to %s in cluster %q", destination, clusterName)
	}
	r.Blackhole = blackhole
	return nil
}

// ListRoutes implements cloud.Routes.
func (c *Cloud) ListRoutes(ctx context.Context, clusterName string) ([]cloud.Route, error) {
	var out []cloud.Route
	err := c.do(ctx, cloud.OpListRoutes, clusterName, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		out = c.sortedRoutes(clusterName)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CreateRoute implements cloud.Routes. Routes are identified by destination CIDR: an
// existing route to the same destination and node makes the call succeed without
// change; one to another node makes it fail, as a cloud route table would. The route
// is named nameHint, or a made-up name when nameHint is empty.
func (c *Cloud) CreateRoute(ctx context.Context, clusterName, nameHint string, route cloud.Route) error {
	return c.do(ctx, cloud.OpCreateRoute, route.TargetNode, func() error {
		if err := checkRoute(route); err != nil {
			return err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.createRoute(clusterName, c.clusterRoutes(clusterName), nameHint, route)
	})
}

// createRoute creates route in routes, clusterName's table, as CreateRoute does.
// Callers hold c.mu and checked route.
func (c *Cloud) createRoute(clusterName string, routes map[netip.Prefix]*cloud.Route, nameHint string, route cloud.Route) error {
	if cur, ok := routes[route.DestinationCIDR]; ok {
		if cur.TargetNode == route.TargetNode {
			return nil
		}
		return fmt.Errorf("creating route to %s via node %q in cluster %q: a route to it via node %q exists", route.DestinationCIDR, route.TargetNode, clusterName, cur.TargetNode)
	}
	name := nameHint
	if name == "" {
		name = c.newRouteName()
	}
	// The fake records the node's addresses and lists them back, as a cloud routing
	// by next-hop address does.
	routes[route.DestinationCIDR] = &cloud.Route{
		Name: name, TargetNode: route.TargetNode, DestinationCIDR: route.DestinationCIDR,
		TargetNodeAddresses: slices.Clone(route.TargetNodeAddresses), EnableNodeAddresses: true,
	}
	return nil
}

// DeleteRoute implements cloud.Routes. It deletes the route to route.DestinationCIDR,
// or, when that is unset, the route called route.Name. Deleting a route that does not
// exist succeeds.
func (c *Cloud) DeleteRoute(ctx context.Context, clusterName string, route cloud.Route) error {
	return c.do(ctx, cloud.OpDeleteRoute, route.TargetNode, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		routes := c.routes[clusterName]
		if err := deleteRoute(clusterName, routes, route); err != nil {
			return err
		}
		if len(routes) == 0 {
			delete(c.routes, clusterName)
		}
		return nil
	})
}

// deleteRoute deletes route from routes, clusterName's table, as DeleteRoute does.
func deleteRoute(clusterName string, routes map[netip.Prefix]*cloud.Route, route cloud.Route) error {
	switch {
	case route.DestinationCIDR.IsValid():
		delete(routes, route.DestinationCIDR)
	case route.Name != "":
		for dst, r := range routes {
			if r.Name == route.Name {
				delete(routes, dst)
			}
		}
	default:
		return cloud.Invalidf("deleting a route in cluster %q: it has neither a destination nor a name", clusterName)
	}
	return nil
}

// SetMaxRouteChanges makes the cloud's Routes a cloud.RouteBatcher taking at most max
// changes a call, or (max 0) plain Routes; a negative max is taken as 0.
func (c *Cloud) SetMaxRouteChanges(max int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maxRouteChanges = 0
	if max > 0 {
		c.maxRouteChanges = max
	}
}

// batchRoutes is the cloud's Routes while it batches.
type batchRoutes struct{ *Cloud }

var _ cloud.RouteBatcher = batchRoutes{}

// MaxRouteChanges implements cloud.RouteBatcher.
func (b batchRoutes) MaxRouteChanges() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(1, b.maxRouteChanges)
}

// ApplyRoutes implements cloud.RouteBatcher, all or nothing, as a cloud replacing a
// route table in one write does: the changes are made to a copy of clusterName's table,
// which replaces it only if every change succeeded. More changes than MaxRouteChanges,
// a change that fails checkRoute, or a creation CreateRoute would refuse (another
// node's route to its destination) is ErrInvalid. Faults are injected for
// cloud.OpApplyRoutes with the cluster's name as subject.
func (b batchRoutes) ApplyRoutes(ctx context.Context, clusterName string, changes []cloud.RouteChange) error {
	c := b.Cloud
	return c.do(ctx, cloud.OpApplyRoutes, clusterName, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if n := c.maxRouteChanges; n > 0 && len(changes) > n {
			return cloud.Invalidf("applying %d route changes in cluster %q: at most %d a call", len(changes), clusterName, n)
		}
		table := maps.Clone(c.routes[clusterName])
		if table == nil {
			table = map[netip.Prefix]*cloud.Route{}
		}
		for i, ch := range changes {
			if !ch.Delete {
				continue
			}
			if err := deleteRoute(clusterName, table, ch.Route); err != nil {
				return fmt.Errorf("route change %d: %w", i, err)
			}
		}
		for i, ch := range changes {
			if ch.Delete {
				continue
			}
			if err := checkRoute(ch.Route); err != nil {
				return fmt.Errorf("route change %d: %w", i, err)
			}
			if err := c.createRoute(clusterName, table, ch.NameHint, ch.Route); err != nil {
				// The call as a whole cannot succeed: the contract's ErrInvalid.
				return fmt.Errorf("route change %d: %w: %w", i, err, cloud.ErrInvalid)
			}
		}
		if len(table) == 0 {
			delete(c.routes, clusterName)
		} else {
			c.routes[clusterName] = table
		}
		return nil
	})
}

func checkRoute(route cloud.Route) error {
	if !route.DestinationCIDR.IsValid() {
		return cloud.Invalidf("route to node %q: destination CIDR is not set", route.TargetNode)
	}
	if route.TargetNode == "" {
		return cloud.Invalidf("route to %s: target node is empty", route.DestinationCIDR)
	}
	return nil
}

// clusterRoutes returns the route table of clusterName, creating it. Callers hold c.mu.
func (c *Cloud) clusterRoutes(clusterName string) map[netip.Prefix]*cloud.Route {
	routes, ok := c.routes[clusterName]
	if !ok {
		routes = map[netip.Prefix]*cloud.Route{}
		c.routes[clusterName] = routes
	}
	return routes
}

// newRouteName makes up a unique route name. Callers hold c.mu.
func (c *Cloud) newRouteName() string {
	c.routeCounter++
	return fmt.Sprintf("route-%d", c.routeCounter)
}

// sortedRoutes returns copies of the routes of clusterName. Callers hold c.mu.
func (c *Cloud) sortedRoutes(clusterName string) []cloud.Route {
	routes := c.routes[clusterName]
	out := make([]cloud.Route, 0, len(routes))
	for _, r := range routes {
		cp := *r
		cp.TargetNodeAddresses = slices.Clone(r.TargetNodeAddresses)
		out = append(out, cp)
	}
	slices.SortFunc(out, func(a, b cloud.Route) int {
		if n := strings.Compare(a.TargetNode, b.TargetNode); n != 0 {
			return n
		}
		return strings.Compare(a.DestinationCIDR.String(), b.DestinationCIDR.String())
	})
	return out
}

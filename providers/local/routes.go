package local

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
)

// routes implements cloud.Routes over the local cloud's per-cluster route tables.
type routes struct{ p *Provider }

// ListRoutes implements cloud.Routes. A route the cloud answers with an unreadable
// destination fails the listing: leaving it out would hide it from the controller.
func (r routes) ListRoutes(ctx context.Context, clusterName string) ([]cloud.Route, error) {
	items, err := r.p.client.ListRoutes(ctx, clusterName)
	if err != nil {
		return nil, listingError(err, "listing the routes of cluster "+clusterName)
	}
	out := make([]cloud.Route, 0, len(items))
	for _, it := range items {
		cidr, err := netip.ParsePrefix(it.DestinationCIDR)
		if err != nil {
			return nil, fmt.Errorf("listing the routes of cluster %s: route %s has destination %q, not a CIDR", clusterName, it.Name, it.DestinationCIDR)
		}
		out = append(out, cloud.Route{
			Name: it.Name, TargetNode: it.TargetNode, DestinationCIDR: cidr, Blackhole: it.Blackhole,
			TargetNodeAddresses: nodeAddresses(it.TargetNodeAddresses),
			// A route lists addresses only when it was created with them by a cloud that
			// stores them: a cloud from before the field, or a route created without
			// them, has none to compare, and comparing would replace it on every sync.
			EnableNodeAddresses: len(it.TargetNodeAddresses) > 0,
		})
	}
	return out, nil
}

// CreateRoute implements cloud.Routes. The local cloud answers an identical route with
// success. nameHint names the route when the cloud accepts it as a name; otherwise the
// cloud derives the name from the destination.
func (r routes) CreateRoute(ctx context.Context, clusterName, nameHint string, route cloud.Route) error {
	spec, err := routeSpec(clusterName, nameHint, route)
	if err != nil {
		return err
	}
	if _, err := r.p.client.CreateRoute(ctx, clusterName, spec); err != nil {
		return wrapf(err, "creating the route for %s to node %s in cluster %s", spec.DestinationCIDR, route.TargetNode, clusterName)
	}
	return nil
}

// routeSpec is the local cloud's spec of a route to create in clusterName: named nameHint
// when the cloud accepts it as a name; otherwise the cloud derives the name from the
// destination. A route without a destination or target node is ErrInvalid.
func routeSpec(clusterName, nameHint string, route cloud.Route) (api.RouteSpec, error) {
	if !route.DestinationCIDR.IsValid() {
		return api.RouteSpec{}, cloud.Invalidf("creating a route to node %s in cluster %s: the destination CIDR is empty", route.TargetNode, clusterName)
	}
	if route.TargetNode == "" {
		return api.RouteSpec{}, cloud.Invalidf("creating the route for %s in cluster %s: the target node is empty", route.DestinationCIDR, clusterName)
	}
	spec := api.RouteSpec{DestinationCIDR: route.DestinationCIDR.Masked().String(), TargetNode: route.TargetNode}
	for _, a := range route.TargetNodeAddresses {
		spec.TargetNodeAddresses = append(spec.TargetNodeAddresses, api.Address{Type: api.AddressType(a.Type), Address: a.Address})
	}
	if nameHint != "" && api.ValidateObjectName("name", nameHint) == nil {
		spec.Name = nameHint
	}
	return spec, nil
}

// DeleteRoute implements cloud.Routes. A route the cloud says does not exist is
// already deleted. A route without a name (not one ListRoutes returned) is found by
// destination and target.
func (r routes) DeleteRoute(ctx context.Context, clusterName string, route cloud.Route) error {
	name := route.Name
	if name == "" {
		found, err := r.findRoute(ctx, clusterName, route)
		if err != nil || found == "" {
			return err
		}
		name = found
	}
	err := r.p.client.DeleteRoute(ctx, clusterName, name)
	if err != nil && !cloud.IsNotFound(err) {
		return wrapf(err, "deleting route %s (%s to node %s) of cluster %s", name, route.DestinationCIDR, route.TargetNode, clusterName)
	}
	return nil
}

// findRoute returns the name of the route to route's destination and target, or "" if
// there is none.
func (r routes) findRoute(ctx context.Context, clusterName string, route cloud.Route) (string, error) {
	names, err := r.findRoutes(ctx, clusterName, []cloud.Route{route})
	if err != nil || len(names) == 0 {
		return "", err
	}
	return names[0], nil
}

// batchRoutes are routes that also change many in one call (routes.apply).
type batchRoutes struct{ routes }

var _ cloud.RouteBatcher = batchRoutes{}

// MaxRouteChanges implements cloud.RouteBatcher: the local cloud's bound.
func (r batchRoutes) MaxRouteChanges() int { return api.MaxRouteChanges }

// ApplyRoutes implements cloud.RouteBatcher with one routes.apply call, which the local
// cloud applies all or none. Routes to delete without a name (not from ListRoutes) are
// found by one listing for all of them. The cloud's refusal of the request (400) or of
// a change in it (409: a destination another route holds, a target without an
// instance) is ErrInvalid, so that the controller splits the call until the change at
// fault gets its own CreateRoute or DeleteRoute answer. A cloud without the endpoint
// (older than routes.apply) is ErrNotImplemented, and the controller stops batching.
func (r batchRoutes) ApplyRoutes(ctx context.Context, clusterName string, changes []cloud.RouteChange) error {
	var req api.RouteChanges
	var unnamed []cloud.Route
	for _, ch := range changes {
		switch {
		case !ch.Delete:
			spec, err := routeSpec(clusterName, ch.NameHint, ch.Route)
			if err != nil {
				return err
			}
			req.Create = append(req.Create, spec)
		case ch.Route.Name != "":
			req.Delete = append(req.Delete, ch.Route.Name)
		default:
			unnamed = append(unnamed, ch.Route)
		}
	}
	if len(unnamed) > 0 {
		names, err := r.findRoutes(ctx, clusterName, unnamed)
		if err != nil {
			return err
		}
		req.Delete = append(req.Delete, names...)
	}
	if len(req.Delete)+len(req.Create) == 0 {
		return nil // only deletions of routes that are gone
	}
	if _, err := r.p.client.ApplyRoutes(ctx, clusterName, req); err != nil {
		var ce *client.Error
		if errors.As(err, &ce) {
			switch ce.StatusCode {
			case http.StatusConflict:
				err = fmt.Errorf("%w: %w", err, cloud.ErrInvalid)
			case http.StatusNotFound, http.StatusMethodNotAllowed:
				// The endpoint itself is missing: a local cloud from before routes.apply.
				// The controller then makes each change by itself. Not wrapped: a 404
				// here must never read as a route that is gone.
				err = fmt.Errorf("the local cloud has no routes.apply (older than this provider): %s: %w", err.Error(), cloud.ErrNotImplemented)
			}
		}
		return wrapf(err, "applying %d route deletions and %d creations in cluster %s", len(req.Delete), len(req.Create), clusterName)
	}
	return nil
}

// findRoutes returns the names of the routes to the unnamed routes' destinations and
// targets that exist, from one listing.
func (r routes) findRoutes(ctx context.Context, clusterName string, unnamed []cloud.Route) ([]string, error) {
	items, err := r.p.client.ListRoutes(ctx, clusterName)
	if err != nil {
		return nil, listingError(err, fmt.Sprintf("deleting the route for %s of cluster %s: listing the routes", unnamed[0].DestinationCIDR, clusterName))
	}
	var names []string
	for _, it := range items {
		cidr, err := netip.ParsePrefix(it.DestinationCIDR)
		if err != nil {
			continue
		}
		for _, u := range unnamed {
			if cidr.Masked() == u.DestinationCIDR.Masked() && (u.TargetNode == "" || it.TargetNode == u.TargetNode) {
				names = append(names, it.Name)
				break
			}
		}
	}
	return names, nil
}

package local

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/localcloud/api"
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
	if !route.DestinationCIDR.IsValid() {
		return cloud.Invalidf("creating a route to node %s in cluster %s: the destination CIDR is empty", route.TargetNode, clusterName)
	}
	if route.TargetNode == "" {
		return cloud.Invalidf("creating the route for %s in cluster %s: the target node is empty", route.DestinationCIDR, clusterName)
	}
	spec := api.RouteSpec{DestinationCIDR: route.DestinationCIDR.Masked().String(), TargetNode: route.TargetNode}
	for _, a := range route.TargetNodeAddresses {
		spec.TargetNodeAddresses = append(spec.TargetNodeAddresses, api.Address{Type: api.AddressType(a.Type), Address: a.Address})
	}
	if nameHint != "" && api.ValidateObjectName("name", nameHint) == nil {
		spec.Name = nameHint
	}
	if _, err := r.p.client.CreateRoute(ctx, clusterName, spec); err != nil {
		return wrapf(err, "creating the route for %s to node %s in cluster %s", spec.DestinationCIDR, route.TargetNode, clusterName)
	}
	return nil
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
	items, err := r.p.client.ListRoutes(ctx, clusterName)
	if err != nil {
		return "", listingError(err, fmt.Sprintf("deleting the route for %s of cluster %s: listing the routes", route.DestinationCIDR, clusterName))
	}
	for _, it := range items {
		cidr, err := netip.ParsePrefix(it.DestinationCIDR)
		if err != nil || cidr.Masked() != route.DestinationCIDR.Masked() {
			continue
		}
		if route.TargetNode == "" || it.TargetNode == route.TargetNode {
			return it.Name, nil
		}
	}
	return "", nil
}

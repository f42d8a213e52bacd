package upstream

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/nephele-dev/nephele/cloud"
)

// routes serves cloud.Routes from upstream's Routes. Destinations are CIDR strings
// upstream and netip.Prefix here; a string that does not parse is an error, never a
// route left out or a panic.
type routes struct {
	p  *Provider
	up cloudprovider.Routes
}

// parseCIDR parses an upstream destination. Surrounding white space is tolerated and
// host bits are cleared ("10.244.1.5/24" is 10.244.1.0/24), as upstream's own parsing
// does.
func parseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, err
	}
	return p.Masked(), nil
}

// routeCall runs one upstream route call and maps its error. ImplementedElsewhere
// switches the Routes capability off.
func routeCall[T any](ctx context.Context, p *Provider, op, subject string, fn func(context.Context) (T, error)) (T, error) {
	v, err := call(ctx, op, fn)
	if implementedElsewhere(err) {
		p.switchOff(ctx, &p.routesOff, "routes")
	}
	return v, mapError(areaRoutes, op, subject, err)
}

// list returns the upstream routes of the cluster and their parsed destinations.
func (r routes) list(ctx context.Context, clusterName string) ([]*cloudprovider.Route, []netip.Prefix, error) {
	subject := "routes of cluster " + clusterName
	ups, err := routeCall(ctx, r.p, "ListRoutes", subject, func(ctx context.Context) ([]*cloudprovider.Route, error) {
		return r.up.ListRoutes(ctx, clusterName)
	})
	if err != nil {
		return nil, nil, err
	}
	var (
		kept  []*cloudprovider.Route
		cidrs []netip.Prefix
	)
	for _, u := range ups {
		if u == nil {
			continue // nothing to manage
		}
		cidr, err := parseCIDR(u.DestinationCIDR)
		if err != nil {
			// Leaving the route out would make it look absent to the controller.
			return nil, nil, fmt.Errorf("upstream cloud provider: ListRoutes of cluster %s: route %q to node %s has destination %q: %w", clusterName, u.Name, u.TargetNode, u.DestinationCIDR, err)
		}
		kept = append(kept, u)
		cidrs = append(cidrs, cidr)
	}
	return kept, cidrs, nil
}

// ListRoutes implements cloud.Routes.
func (r routes) ListRoutes(ctx context.Context, clusterName string) ([]cloud.Route, error) {
	ups, cidrs, err := r.list(ctx, clusterName)
	if err != nil {
		return nil, err
	}
	out := make([]cloud.Route, len(ups))
	for i, u := range ups {
		out[i] = cloud.Route{
			Name: u.Name, TargetNode: string(u.TargetNode), DestinationCIDR: cidrs[i], Blackhole: u.Blackhole,
			// Passed on as the provider sets them: a provider that records the addresses
			// says so, and only then does the controller compare them.
			TargetNodeAddresses: slices.Clone(u.TargetNodeAddresses),
			EnableNodeAddresses: u.EnableNodeAddresses,
		}
	}
	return out, nil
}

// CreateRoute implements cloud.Routes. It lists the routes first and succeeds without
// calling the provider when an identical route exists, since upstream CreateRoute need
// not be idempotent.
func (r routes) CreateRoute(ctx context.Context, clusterName, nameHint string, route cloud.Route) error {
	if !route.DestinationCIDR.IsValid() {
		return cloud.Invalidf("creating a route to node %q in cluster %s: the destination CIDR is not set", route.TargetNode, clusterName)
	}
	if route.TargetNode == "" {
		return cloud.Invalidf("creating the route to %s in cluster %s: the target node is empty", route.DestinationCIDR, clusterName)
	}
	dst := route.DestinationCIDR.Masked()
	ups, cidrs, err := r.list(ctx, clusterName)
	if err != nil {
		return err
	}
	for i, u := range ups {
		if cidrs[i] == dst && string(u.TargetNode) == route.TargetNode {
			return nil
		}
	}
	subject := fmt.Sprintf("route %s to node %s in cluster %s", dst, route.TargetNode, clusterName)
	_, err = routeCall(ctx, r.p, "CreateRoute", subject, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, r.up.CreateRoute(ctx, clusterName, nameHint, &cloudprovider.Route{
			Name:                nameHint,
			TargetNode:          types.NodeName(route.TargetNode),
			TargetNodeAddresses: slices.Clone(route.TargetNodeAddresses),
			DestinationCIDR:     dst.String(),
		})
	})
	return err
}

// DeleteRoute implements cloud.Routes. It deletes the listed route with route's
// destination (and target, when set), or with route's name when it has no
// destination, handing the provider the route as it listed it. A route that is not
// listed is already gone.
func (r routes) DeleteRoute(ctx context.Context, clusterName string, route cloud.Route) error {
	if !route.DestinationCIDR.IsValid() && route.Name == "" {
		return cloud.Invalidf("deleting a route in cluster %s: it has neither a destination nor a name", clusterName)
	}
	ups, cidrs, err := r.list(ctx, clusterName)
	if err != nil {
		return err
	}
	for i, u := range ups {
		match := route.DestinationCIDR.IsValid() && cidrs[i] == route.DestinationCIDR.Masked() &&
			(route.TargetNode == "" || string(u.TargetNode) == route.TargetNode)
		if !route.DestinationCIDR.IsValid() {
			match = u.Name == route.Name
		}
		if !match {
			continue
		}
		subject := fmt.Sprintf("route %s (%s to node %s) in cluster %s", u.Name, u.DestinationCIDR, u.TargetNode, clusterName)
		if _, err := routeCall(ctx, r.p, "DeleteRoute", subject, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, r.up.DeleteRoute(ctx, clusterName, u)
		}); err != nil {
			return err
		}
	}
	return nil
}

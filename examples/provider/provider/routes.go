package provider

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/nephele-dev/nephele/cloud"

	"example.com/cloud-provider-example/examplecloud"
)

// routes implements cloud.Routes. A route's name in the cloud is derived from its
// cluster and destination, so each destination has one name and a retry finds it.
type routes struct{ c *examplecloud.Cloud }

// routeName is the cloud's name of the route to dst in cluster.
func routeName(cluster string, dst netip.Prefix) string {
	r := strings.NewReplacer(".", "-", ":", "-", "/", "-")
	return cluster + "-" + r.Replace(dst.Masked().String())
}

// ListRoutes implements cloud.Routes. A destination that does not parse fails the
// listing: leaving the route out would hide it from the controller.
func (r routes) ListRoutes(ctx context.Context, clusterName string) ([]cloud.Route, error) {
	list, err := r.c.ListRoutes(ctx, clusterName)
	if err != nil {
		return nil, mapError(err, false, "listing the routes of cluster %s", clusterName)
	}
	out := make([]cloud.Route, 0, len(list))
	for _, rt := range list {
		dst, err := netip.ParsePrefix(rt.Destination)
		if err != nil {
			return nil, fmt.Errorf("listing the routes of cluster %s: route %s has destination %q: %w", clusterName, rt.Name, rt.Destination, err)
		}
		out = append(out, cloud.Route{Name: rt.Name, TargetNode: rt.NextHop, DestinationCIDR: dst.Masked()})
	}
	return out, nil
}

// CreateRoute implements cloud.Routes. The cloud refuses a route that exists, so the
// provider looks first: an identical route is success.
func (r routes) CreateRoute(ctx context.Context, clusterName, _ string, route cloud.Route) error {
	if !route.DestinationCIDR.IsValid() || route.TargetNode == "" {
		return cloud.InvalidError("a route needs a destination CIDR and a target node (got %s to %q)", route.DestinationCIDR, route.TargetNode)
	}
	dst := route.DestinationCIDR.Masked()
	existing, err := r.ListRoutes(ctx, clusterName)
	if err != nil {
		return err
	}
	for _, e := range existing {
		if e.DestinationCIDR == dst && e.TargetNode == route.TargetNode {
			return nil
		}
	}
	err = r.c.CreateRoute(ctx, examplecloud.Route{
		Name: routeName(clusterName, dst), Cluster: clusterName, Destination: dst.String(), NextHop: route.TargetNode,
	})
	return mapError(err, false, "creating the route to %s via node %s in cluster %s", dst, route.TargetNode, clusterName)
}

// DeleteRoute implements cloud.Routes: a route the cloud says does not exist is deleted
// already.
func (r routes) DeleteRoute(ctx context.Context, clusterName string, route cloud.Route) error {
	name := route.Name
	if name == "" {
		if !route.DestinationCIDR.IsValid() {
			return cloud.InvalidError("deleting a route of cluster %s without a name or a destination", clusterName)
		}
		name = routeName(clusterName, route.DestinationCIDR)
	}
	err := r.c.DeleteRoute(ctx, name)
	if examplecloud.Code(err) == 404 {
		return nil
	}
	return mapError(err, false, "deleting route %s of cluster %s", name, clusterName)
}

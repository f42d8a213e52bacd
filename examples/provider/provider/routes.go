package provider

import (
	"context"
	"fmt"
	"net/http"
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

// CreateRoute implements cloud.Routes with one API call. The cloud refuses a route
// that exists (409), so only then does the provider look at the cluster's routes: the
// same destination via the same node is success, via another node an error.
func (r routes) CreateRoute(ctx context.Context, clusterName, _ string, route cloud.Route) error {
	if !route.DestinationCIDR.IsValid() || route.TargetNode == "" {
		return cloud.Invalidf("a route needs a destination CIDR and a target node (got %s to %q)", route.DestinationCIDR, route.TargetNode)
	}
	dst := route.DestinationCIDR.Masked()
	name := routeName(clusterName, dst)
	what := fmt.Sprintf("creating the route to %s via node %s in cluster %s", dst, route.TargetNode, clusterName)
	err := r.c.CreateRoute(ctx, examplecloud.Route{Name: name, Cluster: clusterName, Destination: dst.String(), NextHop: route.TargetNode})
	if examplecloud.Code(err) != http.StatusConflict {
		return mapError(err, false, "%s", what)
	}
	list, lerr := r.c.ListRoutes(ctx, clusterName)
	if lerr != nil {
		return mapError(lerr, false, "%s: the route exists (409); listing the routes of cluster %s to compare", what, clusterName)
	}
	for _, rt := range list {
		rdst, perr := netip.ParsePrefix(rt.Destination)
		same := perr == nil && rdst.Masked() == dst
		if rt.Name != name && !same {
			continue
		}
		if same && rt.NextHop == route.TargetNode {
			return nil
		}
		// A retry can succeed once the route controller has deleted the stale route.
		return fmt.Errorf("%s: route %s to %s exists via node %s: delete that route first: %w", what, rt.Name, rt.Destination, rt.NextHop, err)
	}
	// The conflict is about a route outside the cluster (route names are global).
	return mapError(err, false, "%s", what)
}

// DeleteRoute implements cloud.Routes: a route the cloud says does not exist is deleted
// already.
func (r routes) DeleteRoute(ctx context.Context, clusterName string, route cloud.Route) error {
	name := route.Name
	if name == "" {
		if !route.DestinationCIDR.IsValid() {
			return cloud.Invalidf("deleting a route of cluster %s without a name or a destination", clusterName)
		}
		name = routeName(clusterName, route.DestinationCIDR)
	}
	err := r.c.DeleteRoute(ctx, name)
	if examplecloud.Code(err) == 404 {
		return nil
	}
	return mapError(err, false, "deleting route %s of cluster %s", name, clusterName)
}

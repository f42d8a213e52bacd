package provider_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/nephele-dev/nephele/cloud"

	"example.com/cloud-provider-example/examplecloud"
	"example.com/cloud-provider-example/provider"
)

// TestCreateRoute checks that CreateRoute creates with one API call, and looks at the
// existing routes only when the cloud answers that the route exists.
func TestCreateRoute(t *testing.T) {
	const cluster = "prod"
	dst := netip.MustParsePrefix("10.244.1.0/24")
	tests := []struct {
		name string
		// existing is created in the cloud before the call, when NextHop is set.
		existing examplecloud.Route
		route    cloud.Route
		// count creates that many routes (10.244.<i>.0/24 via the target) instead of
		// one.
		count int
		// wantErr is a substring of the error; wantInvalid says it must be Invalid.
		wantErr     string
		wantInvalid bool
		// wantCreates and wantLists are the API calls the provider makes.
		wantCreates, wantLists int
	}{
		{name: "new route", route: cloud.Route{TargetNode: "node-1", DestinationCIDR: dst}, wantCreates: 1},
		{name: "many new routes", route: cloud.Route{TargetNode: "node-1"}, count: 50, wantCreates: 50},
		{
			name:     "the same route exists",
			existing: examplecloud.Route{Name: "prod-10-244-1-0-24", Cluster: cluster, Destination: "10.244.1.0/24", NextHop: "node-1"},
			route:    cloud.Route{TargetNode: "node-1", DestinationCIDR: dst}, wantCreates: 1, wantLists: 1,
		},
		{
			name:     "the same route exists, asked unmasked",
			existing: examplecloud.Route{Name: "prod-10-244-1-0-24", Cluster: cluster, Destination: "10.244.1.0/24", NextHop: "node-1"},
			route:    cloud.Route{TargetNode: "node-1", DestinationCIDR: netip.MustParsePrefix("10.244.1.7/24")}, wantCreates: 1, wantLists: 1,
		},
		{
			name:     "the same route exists under another name",
			existing: examplecloud.Route{Name: "handmade", Cluster: cluster, Destination: "10.244.1.0/24", NextHop: "node-1"},
			route:    cloud.Route{TargetNode: "node-1", DestinationCIDR: dst}, wantCreates: 1, wantLists: 1,
		},
		{
			name:     "the destination goes to another node",
			existing: examplecloud.Route{Name: "prod-10-244-1-0-24", Cluster: cluster, Destination: "10.244.1.0/24", NextHop: "node-2"},
			route:    cloud.Route{TargetNode: "node-1", DestinationCIDR: dst}, wantCreates: 1, wantLists: 1,
			wantErr: "exists via node node-2",
		},
		{
			name:     "another cluster routes the destination",
			existing: examplecloud.Route{Name: "dev-10-244-1-0-24", Cluster: "dev", Destination: "10.244.1.0/24", NextHop: "node-2"},
			route:    cloud.Route{TargetNode: "node-1", DestinationCIDR: dst}, wantCreates: 1,
		},
		{name: "no target", route: cloud.Route{DestinationCIDR: dst}, wantErr: "target node", wantInvalid: true},
		{name: "no destination", route: cloud.Route{TargetNode: "node-1"}, wantErr: "destination CIDR", wantInvalid: true},
		{name: "target is no instance", route: cloud.Route{TargetNode: "ghost", DestinationCIDR: dst}, wantErr: "ghost", wantInvalid: true, wantCreates: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			c, err := examplecloud.Open("", "ex-1")
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"node-1", "node-2"} {
				if _, err := c.CreateInstance(ctx, examplecloud.InstanceSpec{Name: n}); err != nil {
					t.Fatal(err)
				}
			}
			if tt.existing.NextHop != "" {
				if err := c.CreateRoute(ctx, tt.existing); err != nil {
					t.Fatal(err)
				}
			}
			rs, _ := provider.NewForCloud(c).Routes()
			before := c.Calls()
			if tt.count > 0 {
				for i := range tt.count {
					r := tt.route
					r.DestinationCIDR = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i), 0}), 24)
					if err := rs.CreateRoute(ctx, cluster, "", r); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				err = rs.CreateRoute(ctx, cluster, "", tt.route)
			}
			after := c.Calls()
			if creates, lists := after["CreateRoute"]-before["CreateRoute"], after["ListRoutes"]-before["ListRoutes"]; creates != tt.wantCreates || lists != tt.wantLists {
				t.Errorf("API calls: %d CreateRoute and %d ListRoutes, want %d and %d", creates, lists, tt.wantCreates, tt.wantLists)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("CreateRoute: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("CreateRoute = %v, want an error containing %q", err, tt.wantErr)
			case err != nil && (cloud.IsInvalid(err) != tt.wantInvalid || cloud.IsNotFound(err)):
				t.Fatalf("CreateRoute = %v: Invalid %v, want %v, and never NotFound", err, cloud.IsInvalid(err), tt.wantInvalid)
			}
			if tt.wantErr != "" || tt.count > 0 {
				return
			}
			list, err := rs.ListRoutes(ctx, cluster)
			if err != nil || len(list) != 1 || list[0].DestinationCIDR != dst || list[0].TargetNode != "node-1" {
				t.Errorf("routes of %s after CreateRoute: %+v, %v; want the one route to %s via node-1", cluster, list, err, dst)
			}
		})
	}
}

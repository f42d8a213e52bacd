package fakecloud

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/nephele-dev/nephele/cloud"
)

func route(node, cidr string) cloud.Route {
	return cloud.Route{TargetNode: node, DestinationCIDR: netip.MustParsePrefix(cidr)}
}

// routeSummary renders routes as "node=cidr" pairs for comparison.
func routeSummary(routes []cloud.Route) []string {
	out := make([]string, len(routes))
	for i, r := range routes {
		out[i] = r.TargetNode + "=" + r.DestinationCIDR.String()
	}
	return out
}

func TestRoutes(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, Options{})

	steps := []struct {
		name       string
		do         func() error
		wantResult cloud.Result
		wantC1     []string
	}{
		{name: "create", do: func() error { return c.CreateRoute(ctx, "c1", "uid-1", route("n1", "10.244.1.0/24")) }, wantC1: []string{"n1=10.244.1.0/24"}},
		{name: "create again is a no-op", do: func() error { return c.CreateRoute(ctx, "c1", "uid-1", route("n1", "10.244.1.0/24")) }, wantC1: []string{"n1=10.244.1.0/24"}},
		{name: "create without hint", do: func() error { return c.CreateRoute(ctx, "c1", "", route("n0", "10.244.0.0/24")) }, wantC1: []string{"n0=10.244.0.0/24", "n1=10.244.1.0/24"}},
		{name: "conflicting target", do: func() error { return c.CreateRoute(ctx, "c1", "uid-2", route("n2", "10.244.1.0/24")) }, wantResult: cloud.ResultError, wantC1: []string{"n0=10.244.0.0/24", "n1=10.244.1.0/24"}},
		{name: "other cluster", do: func() error { return c.CreateRoute(ctx, "c2", "uid-1", route("n1", "10.244.1.0/24")) }, wantC1: []string{"n0=10.244.0.0/24", "n1=10.244.1.0/24"}},
		{name: "no destination", do: func() error { return c.CreateRoute(ctx, "c1", "x", cloud.Route{TargetNode: "n3"}) }, wantResult: cloud.ResultInvalid, wantC1: []string{"n0=10.244.0.0/24", "n1=10.244.1.0/24"}},
		{name: "no target", do: func() error { return c.CreateRoute(ctx, "c1", "x", route("", "10.244.3.0/24")) }, wantResult: cloud.ResultInvalid, wantC1: []string{"n0=10.244.0.0/24", "n1=10.244.1.0/24"}},
		{name: "delete", do: func() error { return c.DeleteRoute(ctx, "c1", route("n1", "10.244.1.0/24")) }, wantC1: []string{"n0=10.244.0.0/24"}},
		{name: "delete again is a no-op", do: func() error { return c.DeleteRoute(ctx, "c1", route("n1", "10.244.1.0/24")) }, wantC1: []string{"n0=10.244.0.0/24"}},
		{name: "delete by name", do: func() error { return c.DeleteRoute(ctx, "c1", cloud.Route{Name: "route-1"}) }, wantC1: []string{}},
		{name: "delete without identity", do: func() error { return c.DeleteRoute(ctx, "c1", cloud.Route{}) }, wantResult: cloud.ResultInvalid, wantC1: []string{}},
		{name: "delete in unknown cluster", do: func() error { return c.DeleteRoute(ctx, "nope", route("n1", "10.244.1.0/24")) }, wantC1: []string{}},
	}
	for _, s := range steps {
		err := s.do()
		want := s.wantResult
		if want == "" {
			want = cloud.ResultSuccess
		}
		if got := cloud.Classify(err); got != want {
			t.Fatalf("%s: error %v (%s), want %s", s.name, err, got, want)
		}
		listed, err := c.ListRoutes(ctx, "c1")
		if err != nil {
			t.Fatalf("%s: ListRoutes: %v", s.name, err)
		}
		if got := routeSummary(listed); !slices.Equal(got, s.wantC1) {
			t.Fatalf("%s: routes of c1 = %v, want %v", s.name, got, s.wantC1)
		}
	}
	if got := routeSummary(c.AllRoutes("c2")); !slices.Equal(got, []string{"n1=10.244.1.0/24"}) {
		t.Errorf("routes of c2 = %v", got)
	}
	if got := c.AllRoutes("c2")[0].Name; got != "uid-1" {
		t.Errorf("route name = %q, want the name hint uid-1", got)
	}
}

func TestRouteSeedingAndBlackhole(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, Options{})
	if err := c.AddRoute("c1", cloud.Route{Name: "old", TargetNode: "gone", DestinationCIDR: netip.MustParsePrefix("10.244.9.0/24"), Blackhole: true}); err != nil {
		t.Fatal(err)
	}
	if err := c.AddRoute("c1", cloud.Route{TargetNode: "n1"}); !cloud.IsInvalid(err) {
		t.Errorf("AddRoute without destination: %v, want Invalid", err)
	}
	if err := c.AddRoute("c1", route("n1", "10.244.1.0/24")); err != nil {
		t.Fatal(err)
	}
	if err := c.SetRouteBlackhole("c1", netip.MustParsePrefix("10.244.1.0/24"), true); err != nil {
		t.Fatal(err)
	}
	if err := c.SetRouteBlackhole("c1", netip.MustParsePrefix("10.244.2.0/24"), true); !cloud.IsNotFound(err) {
		t.Errorf("SetRouteBlackhole of a missing route: %v, want NotFound", err)
	}
	listed, err := c.ListRoutes(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 2 || !listed[0].Blackhole || listed[0].Name != "old" || !listed[1].Blackhole || listed[1].Name == "" {
		t.Errorf("ListRoutes = %+v, want two named blackhole routes", listed)
	}
	if c.Calls(AnyOp) != 1 {
		t.Errorf("seeding made logged calls: total %d, want 1", c.Calls(AnyOp))
	}
}

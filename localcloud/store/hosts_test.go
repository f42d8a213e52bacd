package store

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/localcloud/api"
)

func TestCreateInstanceInRange(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	pool := netip.MustParsePrefix("10.88.0.0/29") // .2 to .6 are host addresses
	reserved := func(a netip.Addr) bool { return a == netip.MustParseAddr("10.88.0.4") }
	create := func(name string) (api.Instance, error) {
		return s.CreateInstanceInRange(ctx, pool, reserved, func(seq uint64, addr netip.Addr) (api.Instance, error) {
			return api.Instance{Name: name, Addresses: []api.Address{{Type: api.AddressInternalIP, Address: addr.String()}}}, nil
		})
	}
	// An instance holding .3 already, given explicitly.
	if _, err := s.CreateInstance(ctx, func(uint64) (api.Instance, error) {
		return api.Instance{Name: "explicit", Addresses: []api.Address{{Type: api.AddressInternalIP, Address: "10.88.0.3"}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range []string{"a", "b", "c"} {
		inst, err := create(n)
		if err != nil {
			t.Fatalf("creating %s: %v", n, err)
		}
		got = append(got, inst.Addresses[0].Address)
	}
	if want := []string{"10.88.0.2", "10.88.0.5", "10.88.0.6"}; !slices.Equal(got, want) {
		t.Fatalf("addresses %v, want %v (skipping the gateway, a used and a reserved address)", got, want)
	}
	if _, err := create("d"); !errors.Is(err, ErrExhausted) {
		t.Fatalf("a full range: %v, want ErrExhausted", err)
	}
	// A deleted instance frees its address; a terminated one keeps it.
	a, _ := s.GetInstanceByName(ctx, "a")
	if _, err := s.DeleteInstance(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if inst, err := create("e"); err != nil || inst.Addresses[0].Address != "10.88.0.2" {
		t.Fatalf("after a delete: %+v, %v", inst, err)
	}
}

func TestListAllRoutes(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	createInstance(t, s, "n1")
	n2 := createInstance(t, s, "n2")
	for _, c := range []struct{ cluster, dest, node string }{
		{"b", "10.244.1.0/24", "n1"}, {"a", "10.244.2.0/24", "n2"}, {"a", "10.244.3.0/24", "n1"},
	} {
		if _, _, err := s.CreateRoute(ctx, c.cluster, api.RouteSpec{DestinationCIDR: c.dest, TargetNode: c.node}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.UpdateInstance(ctx, n2.ID, func(i *api.Instance) error { i.State = api.InstanceTerminated; return nil }); err != nil {
		t.Fatal(err)
	}
	routes, err := s.ListAllRoutes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range routes {
		got = append(got, r.ClusterName+" "+r.DestinationCIDR+" "+map[bool]string{true: "blackhole", false: "live"}[r.Blackhole])
	}
	if want := []string{"a 10.244.2.0/24 blackhole", "a 10.244.3.0/24 live", "b 10.244.1.0/24 live"}; !slices.Equal(got, want) {
		t.Fatalf("ListAllRoutes = %v, want %v", got, want)
	}
}

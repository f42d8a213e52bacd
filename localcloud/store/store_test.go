package store

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nephele-dev/nephele/localcloud/api"
)

func openStore(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return s
}

func newStore(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path)
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func createInstance(t *testing.T, s *Store, name string) api.Instance {
	t.Helper()
	inst, err := s.CreateInstance(context.Background(), func(seq uint64) (api.Instance, error) {
		return api.Instance{Name: name, Zone: fmt.Sprintf("z%d", seq), State: api.InstanceRunning, CreatedAt: time.Now().UTC()}, nil
	})
	if err != nil {
		t.Fatalf("creating %s: %v", name, err)
	}
	return inst
}

func lb(name, vip string) api.LoadBalancer {
	return api.LoadBalancer{
		Name: name,
		Spec: api.LoadBalancerSpec{
			Ports:    []api.Port{{Protocol: api.ProtocolTCP, Port: 80, NodePort: 30080}},
			Backends: []api.Backend{{NodeName: "n1", Address: "10.0.0.1"}},
		},
		Status: api.LoadBalancerStatus{VIP: vip},
	}
}

func TestInstances(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	a := createInstance(t, s, "a")
	b := createInstance(t, s, "b")
	if a.ID != "i-000000000001" || b.ID != "i-000000000002" || b.Zone != "z2" {
		t.Fatalf("IDs and sequence: %s %s %s", a.ID, b.ID, b.Zone)
	}
	if _, err := s.CreateInstance(ctx, func(uint64) (api.Instance, error) { return api.Instance{Name: "a"}, nil }); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("creating a second \"a\": %v, want ErrAlreadyExists", err)
	}
	boom := errors.New("boom")
	if _, err := s.CreateInstance(ctx, func(uint64) (api.Instance, error) { return api.Instance{}, boom }); !errors.Is(err, boom) {
		t.Fatalf("a failing build: %v", err)
	}
	if c := createInstance(t, s, "c"); c.ID != "i-000000000003" {
		t.Fatalf("failed creates consumed IDs: got %s, want i-000000000003", c.ID)
	}

	got, err := s.GetInstanceByName(ctx, "b")
	if err != nil || got.ID != b.ID {
		t.Fatalf("GetInstanceByName(b) = %v, %v", got.ID, err)
	}
	upd, err := s.UpdateInstance(ctx, a.ID, func(i *api.Instance) error { i.State = api.InstanceStopped; return nil })
	if err != nil || upd.State != api.InstanceStopped {
		t.Fatalf("UpdateInstance = %+v, %v", upd, err)
	}
	if _, err := s.UpdateInstance(ctx, a.ID, func(i *api.Instance) error { i.Name = "z"; return nil }); err == nil {
		t.Fatal("UpdateInstance renamed an instance")
	}
	if got, _ := s.GetInstance(ctx, a.ID); got.State != api.InstanceStopped || got.Name != "a" {
		t.Fatalf("after a refused update: %+v", got)
	}
	if _, err := s.DeleteInstance(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		func() error { _, err := s.GetInstance(ctx, a.ID); return err }(),
		func() error { _, err := s.GetInstanceByName(ctx, "a"); return err }(),
		func() error { _, err := s.DeleteInstance(ctx, a.ID); return err }(),
		func() error {
			_, err := s.UpdateInstance(ctx, a.ID, func(*api.Instance) error { return nil })
			return err
		}(),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("after delete: %v, want ErrNotFound", err)
		}
	}
	// The name is free again.
	createInstance(t, s, "a")
}

func TestListInstancesPages(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	for i := range 25 {
		createInstance(t, s, fmt.Sprintf("n%02d", i))
	}
	odd := func(i *api.Instance) bool { return i.Name[2]%2 == 1 }
	tests := []struct {
		name  string
		limit int
		keep  func(*api.Instance) bool
		want  int
	}{
		{name: "exact pages", limit: 5, want: 25},
		{name: "short last page", limit: 10, want: 25},
		{name: "one page", limit: 100, want: 25},
		{name: "filtered", limit: 4, keep: odd, want: 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := map[string]bool{}
			var last string
			after := ""
			for pages := 0; ; pages++ {
				if pages > 100 {
					t.Fatal("listing does not end")
				}
				items, next, err := s.ListInstances(ctx, after, tt.limit, tt.keep)
				if err != nil {
					t.Fatal(err)
				}
				if len(items) > tt.limit {
					t.Fatalf("page of %d items, limit %d", len(items), tt.limit)
				}
				for _, it := range items {
					if seen[it.ID] || it.ID <= last {
						t.Fatalf("%s out of order or twice", it.ID)
					}
					seen[it.ID], last = true, it.ID
				}
				if next == "" {
					break
				}
				after = next
			}
			if len(seen) != tt.want {
				t.Fatalf("listed %d instances, want %d", len(seen), tt.want)
			}
		})
	}
	if _, _, err := s.ListInstances(ctx, "", 0, nil); err == nil {
		t.Fatal("limit 0 accepted")
	}
}

func TestLoadBalancersAndVIPs(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	pool := netip.MustParsePrefix("127.100.0.0/30") // .1 and .2 usable

	vip, err := s.FreeVIP(ctx, pool, nil)
	if err != nil || vip.String() != "127.100.0.1" {
		t.Fatalf("first FreeVIP = %v, %v", vip, err)
	}
	if err := s.PutLoadBalancer(ctx, lb("a", vip.String())); err != nil {
		t.Fatal(err)
	}
	if vip, _ = s.FreeVIP(ctx, pool, nil); vip.String() != "127.100.0.2" {
		t.Fatalf("second FreeVIP = %v", vip)
	}
	if err := s.PutLoadBalancer(ctx, lb("b", "127.100.0.1")); !errors.Is(err, ErrConflict) {
		t.Fatalf("two load balancers on one VIP: %v, want ErrConflict", err)
	}
	if err := s.PutLoadBalancer(ctx, lb("b", "127.100.0.2")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FreeVIP(ctx, pool, nil); !errors.Is(err, ErrExhausted) {
		t.Fatalf("FreeVIP on a full pool: %v, want ErrExhausted", err)
	}
	// Moving a to another VIP releases its old one.
	if err := s.PutLoadBalancer(ctx, lb("a", "127.100.0.9")); err != nil {
		t.Fatal(err)
	}
	if owner, _ := s.VIPOwner(ctx, netip.MustParseAddr("127.100.0.1")); owner != "" {
		t.Fatalf("old VIP still owned by %q", owner)
	}
	if _, err := s.DeleteLoadBalancer(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if vip, _ = s.FreeVIP(ctx, pool, nil); vip.String() != "127.100.0.1" {
		t.Fatalf("FreeVIP after delete = %v", vip)
	}
	if _, err := s.DeleteLoadBalancer(ctx, "b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting twice: %v", err)
	}
	lbs, err := s.ListLoadBalancers(ctx)
	if err != nil || len(lbs) != 1 || lbs[0].Name != "a" {
		t.Fatalf("ListLoadBalancers = %v, %v", lbs, err)
	}
	if err := s.PutLoadBalancer(ctx, lb("c", "")); err == nil {
		t.Fatal("a load balancer without VIP was stored")
	}
}

func TestFreeVIPSmallPools(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	for pool, want := range map[string]string{
		"127.100.0.7/32": "127.100.0.7",
		"127.100.0.6/31": "127.100.0.6",
		"fd00::/120":     "fd00::1",
	} {
		got, err := s.FreeVIP(ctx, netip.MustParsePrefix(pool), nil)
		if err != nil || got.String() != want {
			t.Errorf("FreeVIP(%s) = %v, %v; want %s", pool, got, err, want)
		}
	}
}

func TestRoutes(t *testing.T) {
	ctx := context.Background()
	now := time.Now().UTC()
	s, _ := newStore(t)
	n1 := createInstance(t, s, "n1")
	n2 := createInstance(t, s, "n2")

	addrs := []api.Address{{Type: api.AddressInternalIP, Address: "10.0.0.1"}}
	r, created, err := s.CreateRoute(ctx, "k", api.RouteSpec{DestinationCIDR: "10.244.1.0/24", TargetNode: "n1", TargetNodeAddresses: addrs}, now)
	if err != nil || !created || r.Name != "r-10-244-1-0-24" || r.TargetInstance != n1.ID || !slices.Equal(r.TargetNodeAddresses, addrs) {
		t.Fatalf("CreateRoute = %+v, %v, %v", r, created, err)
	}
	if listed, err := s.ListRoutes(ctx, "k"); err != nil || len(listed) != 1 || !slices.Equal(listed[0].TargetNodeAddresses, addrs) {
		t.Fatalf("ListRoutes = %+v, %v; want the route with its node addresses", listed, err)
	}
	tests := []struct {
		name        string
		cluster     string
		spec        api.RouteSpec
		wantCreated bool
		wantErr     error
	}{
		{name: "same again", cluster: "k", spec: api.RouteSpec{DestinationCIDR: "10.244.1.0/24", TargetNode: "n1"}},
		{name: "same by instance and other name", cluster: "k", spec: api.RouteSpec{Name: "x", DestinationCIDR: "10.244.1.0/24", TargetInstance: n1.ID}},
		{name: "destination taken", cluster: "k", spec: api.RouteSpec{DestinationCIDR: "10.244.1.0/24", TargetNode: "n2"}, wantErr: ErrConflict},
		{name: "name taken", cluster: "k", spec: api.RouteSpec{Name: "r-10-244-1-0-24", DestinationCIDR: "10.244.2.0/24", TargetNode: "n2"}, wantErr: ErrConflict},
		{name: "unknown node", cluster: "k", spec: api.RouteSpec{DestinationCIDR: "10.244.3.0/24", TargetNode: "n9"}, wantErr: ErrConflict},
		{name: "node and instance disagree", cluster: "k", spec: api.RouteSpec{DestinationCIDR: "10.244.3.0/24", TargetNode: "n2", TargetInstance: n1.ID}, wantErr: ErrConflict},
		{name: "other cluster", cluster: "other", spec: api.RouteSpec{DestinationCIDR: "10.244.1.0/24", TargetNode: "n2"}, wantCreated: true},
		{name: "second route", cluster: "k", spec: api.RouteSpec{DestinationCIDR: "10.244.2.0/24", TargetNode: "n2"}, wantCreated: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, created, err := s.CreateRoute(ctx, tt.cluster, tt.spec, now)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("CreateRoute: %v, want %v", err, tt.wantErr)
			}
			if created != tt.wantCreated {
				t.Fatalf("created = %v, want %v", created, tt.wantCreated)
			}
		})
	}
	routes, err := s.ListRoutes(ctx, "k")
	if err != nil || len(routes) != 2 {
		t.Fatalf("ListRoutes = %v, %v", routes, err)
	}
	// A terminated or deleted target makes the route a blackhole.
	if _, err := s.UpdateInstance(ctx, n2.ID, func(i *api.Instance) error { i.State = api.InstanceTerminated; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteInstance(ctx, n1.ID); err != nil {
		t.Fatal(err)
	}
	routes, _ = s.ListRoutes(ctx, "k")
	for _, r := range routes {
		if !r.Blackhole {
			t.Errorf("route %s to a gone instance is not a blackhole", r.Name)
		}
	}
	if err := s.DeleteRoute(ctx, "k", "r-10-244-1-0-24"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRoute(ctx, "k", "r-10-244-1-0-24"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting twice: %v", err)
	}
	if err := s.DeleteRoute(ctx, "nobody", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting in an unknown cluster: %v", err)
	}
	if routes, err := s.ListRoutes(ctx, "nobody"); err != nil || len(routes) != 0 {
		t.Fatalf("routes of an unknown cluster: %v, %v", routes, err)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path)
	inst := createInstance(t, s, "n1")
	if err := s.PutLoadBalancer(ctx, lb("web", "127.100.0.1")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateRoute(ctx, "k", api.RouteSpec{DestinationCIDR: "10.244.1.0/24", TargetNode: "n1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, path)
	defer func() { _ = s.Close() }()
	if got, err := s.GetInstance(ctx, inst.ID); err != nil || got.Name != "n1" {
		t.Fatalf("instance after reopen: %+v, %v", got, err)
	}
	if got, err := s.GetLoadBalancer(ctx, "web"); err != nil || got.Status.VIP != "127.100.0.1" || len(got.Spec.Backends) != 1 {
		t.Fatalf("load balancer after reopen: %+v, %v", got, err)
	}
	if owner, _ := s.VIPOwner(ctx, netip.MustParseAddr("127.100.0.1")); owner != "web" {
		t.Fatalf("VIP index after reopen: owner %q", owner)
	}
	if routes, err := s.ListRoutes(ctx, "k"); err != nil || len(routes) != 1 {
		t.Fatalf("routes after reopen: %v, %v", routes, err)
	}
	if next := createInstance(t, s, "n2"); next.ID != "i-000000000002" {
		t.Fatalf("the ID sequence restarted: %s", next.ID)
	}
}

func TestCanceledContextWritesNothing(t *testing.T) {
	s, _ := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.PutLoadBalancer(ctx, lb("web", "127.100.0.1")); !errors.Is(err, context.Canceled) {
		t.Fatalf("PutLoadBalancer with a canceled context: %v", err)
	}
	if _, err := s.GetLoadBalancer(context.Background(), "web"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("load balancer written despite the canceled context: %v", err)
	}
}

func TestOpenRefusesLockedFile(t *testing.T) {
	_, path := newStore(t)
	if _, err := Open(path); err == nil {
		t.Fatal("a second Open of a held state file succeeded")
	}
}

func TestOpenMigratesSchemaOneToTheRouteIndex(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path)
	createInstance(t, s, "n1")
	createInstance(t, s, "n2")
	for _, dest := range []string{"10.244.1.0/24", "10.244.2.0/24"} {
		if _, _, err := s.CreateRoute(ctx, "k", api.RouteSpec{DestinationCIDR: dest, TargetNode: "n1"}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	// Make it a version 1 file, which had no destination index.
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketRouteDests); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchema, []byte("1"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, path)
	defer func() { _ = s.Close() }()
	var version string
	_ = s.db.View(func(tx *bolt.Tx) error {
		version = string(tx.Bucket(bucketMeta).Get(keySchema))
		return nil
	})
	if want := strconv.Itoa(schemaVersion); version != want {
		t.Errorf("schema version after migration = %q, want %s", version, want)
	}
	// The index knows the old routes: a second route to one of their destinations
	// conflicts, the same route again is found, and a deleted one frees its destination.
	if _, _, err := s.CreateRoute(ctx, "k", api.RouteSpec{Name: "other", DestinationCIDR: "10.244.1.0/24", TargetNode: "n2"}, time.Now()); !errors.Is(err, ErrConflict) {
		t.Errorf("a second route to a migrated route's destination: %v, want a conflict", err)
	}
	if r, created, err := s.CreateRoute(ctx, "k", api.RouteSpec{Name: "again", DestinationCIDR: "10.244.2.0/24", TargetNode: "n1"}, time.Now()); err != nil || created || r.Name != "r-10-244-2-0-24" {
		t.Errorf("the same route under another name = %+v, created %v, %v; want the migrated route", r, created, err)
	}
	if err := s.DeleteRoute(ctx, "k", "r-10-244-1-0-24"); err != nil {
		t.Fatal(err)
	}
	if _, created, err := s.CreateRoute(ctx, "k", api.RouteSpec{DestinationCIDR: "10.244.1.0/24", TargetNode: "n2"}, time.Now()); err != nil || !created {
		t.Errorf("a route to a freed destination: created %v, %v", created, err)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path)
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySchema, []byte("99")) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(path); err == nil {
		_ = s.Close()
		t.Fatal("Open of a file with a newer schema succeeded")
	}
}

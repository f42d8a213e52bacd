package cloudtap

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/servertest"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/dataplane"
	"github.com/nephele-dev/nephele/localcloud/server"
)

// startCloud starts a local cloud and a tap in front of it, and returns a client that
// talks through the tap.
func startCloud(t *testing.T) (*Tap, *client.Client) {
	t.Helper()
	srv, _ := servertest.Start(t, server.Config{
		VIPPool:   netip.MustParsePrefix("127.113.0.0/24"),
		DataPlane: dataplane.Config{DisableHealthChecks: true},
	})
	tap, err := Start(srv.URL())
	if err != nil {
		t.Fatalf("starting the tap: %v", err)
	}
	t.Cleanup(func() {
		if err := tap.Close(); err != nil {
			t.Errorf("closing the tap: %v", err)
		}
	})
	c, err := client.New(tap.URL(), servertest.Token)
	if err != nil {
		t.Fatal(err)
	}
	return tap, c
}

func spec(service string, port int32, backends ...api.Backend) api.LoadBalancerSpec {
	return api.LoadBalancerSpec{
		Service:  service,
		Ports:    []api.Port{{Protocol: api.ProtocolTCP, Port: port, NodePort: 30000 + port%1000}},
		Backends: backends,
	}
}

func TestRecordsIssuedCallsAndConfirmedBackends(t *testing.T) {
	tap, c := startCloud(t)
	ctx := t.Context()
	b1 := api.Backend{NodeName: "n1", Address: "127.200.0.1"}
	b2 := api.Backend{NodeName: "n2", Address: "127.200.0.2"}

	if _, err := c.EnsureLoadBalancer(ctx, "lb1", spec("ns/a", 18081, b1)); err != nil {
		t.Fatalf("ensure: %v", err)
	}
	lb := tap.LoadBalancers()["lb1"]
	if lb.Ensures != 1 || lb.Updates != 0 || lb.Service != "ns/a" {
		t.Fatalf("after an ensure: %+v", lb)
	}
	if len(lb.Backends) != 1 || lb.Backends["n1"] != b1.Address || lb.Changed.IsZero() {
		t.Fatalf("backends after an ensure: %+v", lb)
	}
	firstChange := lb.Changed

	if _, err := c.UpdateLoadBalancerBackends(ctx, "lb1", []api.Backend{b1, b2}); err != nil {
		t.Fatalf("update: %v", err)
	}
	lb = tap.LoadBalancers()["lb1"]
	if lb.Updates != 1 || len(lb.Backends) != 2 || lb.Backends["n2"] != b2.Address || lb.Changed.Before(firstChange) {
		t.Fatalf("after an update: %+v", lb)
	}

	// The same backends again is an update issued, but no change.
	changed := lb.Changed
	if _, err := c.UpdateLoadBalancerBackends(ctx, "lb1", []api.Backend{b1, b2}); err != nil {
		t.Fatalf("update: %v", err)
	}
	if lb = tap.LoadBalancers()["lb1"]; lb.Updates != 2 || !lb.Changed.Equal(changed) || lb.Unchanged != 1 {
		t.Fatalf("after an update that changes nothing: %+v, want it counted as unchanged", lb)
	}

	// A refused update is issued but confirms nothing.
	_, err := c.UpdateLoadBalancerBackends(ctx, "missing", []api.Backend{b1})
	if !cloud.IsNotFound(err) {
		t.Fatalf("update of a missing load balancer: %v, want NotFound", err)
	}
	if lb := tap.LoadBalancers()["missing"]; lb.Updates != 1 || len(lb.Backends) != 0 {
		t.Fatalf("after a refused update: %+v", lb)
	}

	// The cheap accessors agree with the full copy.
	if c := tap.Counts()["lb1"]; c.Ensures != 1 || c.Updates != 2 || c.Held != 0 || c.Unchanged != 1 {
		t.Fatalf("Counts = %+v", c)
	}
	// lb1's ensure and two updates, and the refused update of "missing".
	if n := tap.Issued(); n != 4 {
		t.Fatalf("Issued = %d, want 4", n)
	}
	if at, ok := tap.HasBackends("lb1", map[string]string{"n2": b2.Address}); !ok || !at.Equal(lb.Changed) {
		t.Fatalf("HasBackends(n2) = %v, %v; want true, %v", at, ok, lb.Changed)
	}
	for _, want := range []map[string]string{{"n2": "127.0.0.9"}, {"n3": "127.200.0.3"}} {
		if _, ok := tap.HasBackends("lb1", want); ok {
			t.Fatalf("HasBackends(%v) = true", want)
		}
	}
	if _, ok := tap.HasBackends("nope", nil); ok {
		t.Fatal("HasBackends of an unknown load balancer = true")
	}

	// Reads pass through and are not counted as updates.
	if _, err := c.GetLoadBalancer(ctx, "lb1"); err != nil {
		t.Fatalf("get: %v", err)
	}
	if lb := tap.LoadBalancers()["lb1"]; lb.Updates != 2 || lb.Ensures != 1 {
		t.Fatalf("after a get: %+v", lb)
	}
	// Everything else passes through untouched.
	if _, err := c.CreateInstance(ctx, api.InstanceSpec{Name: "n1"}); err != nil {
		t.Fatalf("creating an instance through the tap: %v", err)
	}

	// Route creates are recorded by destination, once confirmed.
	if len(tap.Routes()) != 0 {
		t.Fatalf("routes before any create: %v", tap.Routes())
	}
	if _, err := c.CreateRoute(ctx, "c1", api.RouteSpec{DestinationCIDR: "100.64.1.0/24", TargetNode: "missing"}); err == nil {
		t.Fatal("a route to a missing node was created")
	}
	if len(tap.Routes()) != 0 {
		t.Fatalf("a refused route create was recorded: %v", tap.Routes())
	}
	if _, err := c.CreateRoute(ctx, "c1", api.RouteSpec{DestinationCIDR: "100.64.1.0/24", TargetNode: "n1"}); err != nil {
		t.Fatalf("creating a route through the tap: %v", err)
	}
	first := tap.Routes()["100.64.1.0/24"]
	if first.IsZero() {
		t.Fatalf("the route create was not recorded: %v", tap.Routes())
	}
	if _, err := c.CreateRoute(ctx, "c1", api.RouteSpec{DestinationCIDR: "100.64.1.0/24", TargetNode: "n1"}); err != nil {
		t.Fatalf("creating the route again: %v", err)
	}
	if again := tap.Routes()["100.64.1.0/24"]; !again.Equal(first) {
		t.Fatalf("a repeated create moved the first confirmation from %v to %v", first, again)
	}

	// So are the creations of a batch (routes.apply), and a refused batch records none.
	if _, err := c.CreateInstance(ctx, api.InstanceSpec{Name: "n2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ApplyRoutes(ctx, "c1", api.RouteChanges{Create: []api.RouteSpec{
		{DestinationCIDR: "100.64.2.0/24", TargetNode: "n2"}, {DestinationCIDR: "100.64.3.0/24", TargetNode: "missing"}}}); err == nil {
		t.Fatal("a batch with a route to a missing node was applied")
	}
	if _, ok := tap.Routes()["100.64.2.0/24"]; ok {
		t.Fatalf("a refused batch was recorded: %v", tap.Routes())
	}
	if _, err := c.ApplyRoutes(ctx, "c1", api.RouteChanges{Create: []api.RouteSpec{
		{DestinationCIDR: "100.64.1.0/24", TargetNode: "n1"}, {DestinationCIDR: "100.64.2.0/24", TargetNode: "n2"}}}); err != nil {
		t.Fatalf("applying a batch through the tap: %v", err)
	}
	if got := tap.Routes(); got["100.64.2.0/24"].IsZero() || !got["100.64.1.0/24"].Equal(first) {
		t.Fatalf("after a batch: %v, want 100.64.2.0/24 recorded and 100.64.1.0/24 as first confirmed", got)
	}
}

func TestWatchKeepsOnlyWatchedNodes(t *testing.T) {
	tap, c := startCloud(t)
	ctx := t.Context()
	tap.Watch([]string{"n2"})
	b1 := api.Backend{NodeName: "n1", Address: "127.200.0.1"}
	b2 := api.Backend{NodeName: "n2", Address: "127.200.0.2"}
	if _, err := c.EnsureLoadBalancer(ctx, "lb", spec("ns/a", 18084, b1, b2)); err != nil {
		t.Fatal(err)
	}
	lb := tap.LoadBalancers()["lb"]
	if len(lb.Backends) != 1 || lb.Backends["n2"] != b2.Address || lb.Changed.IsZero() {
		t.Fatalf("watching n2: %+v", lb)
	}
	// A change to an unwatched node still counts as a change.
	b1.Address = "127.200.0.9"
	time.Sleep(time.Millisecond)
	if _, err := c.UpdateLoadBalancerBackends(ctx, "lb", []api.Backend{b2, b1}); err != nil {
		t.Fatal(err)
	}
	next := tap.LoadBalancers()["lb"]
	if !next.Changed.After(lb.Changed) || len(next.Backends) != 1 {
		t.Fatalf("after an unwatched node changed: %+v (before %+v)", next, lb)
	}
	// The same set in another order is no change.
	if _, err := c.UpdateLoadBalancerBackends(ctx, "lb", []api.Backend{b1, b2}); err != nil {
		t.Fatal(err)
	}
	if again := tap.LoadBalancers()["lb"]; !again.Changed.Equal(next.Changed) {
		t.Fatalf("reordering the same backends counted as a change")
	}
}

func TestHangHoldsUntilTheClientGivesUpOrRelease(t *testing.T) {
	tap, c := startCloud(t)
	ctx := t.Context()
	tap.Hang("ns/slow")

	// Each held call is given up only once the tap has counted it: a deadline could
	// pass before the tap read the request, and then nothing would be held.
	if err := heldUntilCancelled(t, tap, "slow", 1, func(ctx context.Context) error {
		_, err := c.EnsureLoadBalancer(ctx, "slow", spec("ns/slow", 18082))
		return err
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("ensure of a held load balancer: %v, want the client's cancellation", err)
	}
	// Calls by name only (no Service in the body) are held too, once the tap knows
	// the load balancer's Service.
	if err := heldUntilCancelled(t, tap, "slow", 2, func(ctx context.Context) error {
		_, err := c.GetLoadBalancer(ctx, "slow")
		return err
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("get of a held load balancer: %v, want the client's cancellation", err)
	}
	// Other load balancers are not held.
	if _, err := c.EnsureLoadBalancer(ctx, "fast", spec("ns/fast", 18083)); err != nil {
		t.Fatalf("ensure of another load balancer: %v", err)
	}
	if held := tap.LoadBalancers()["slow"].Held; held != 2 {
		t.Fatalf("held %d calls, want 2", held)
	}

	// A held call goes through once released.
	done := make(chan error, 1)
	go func() {
		_, err := c.EnsureLoadBalancer(ctx, "slow", spec("ns/slow", 18082))
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for tap.LoadBalancers()["slow"].Held < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the third call was never held")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("the held call returned before the release: %v", err)
	default:
	}
	tap.Release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the released call failed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the released call did not return")
	}
	if lb := tap.LoadBalancers()["slow"]; lb.Ensures != 2 {
		t.Fatalf("after the release: %+v", lb)
	}

	// Hanging again works after a release.
	tap.Hang("ns/fast")
	if err := heldUntilCancelled(t, tap, "fast", 1, func(ctx context.Context) error {
		_, err := c.EnsureLoadBalancer(ctx, "fast", spec("ns/fast", 18083))
		return err
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("ensure after a second Hang: %v, want the client's cancellation", err)
	}
}

func TestStartRefusesBadTargets(t *testing.T) {
	for _, target := range []string{"", "127.0.0.1:80", "https://x", "http://"} {
		if tap, err := Start(target); err == nil {
			tap.Close()
			t.Errorf("Start(%q) succeeded", target)
		}
	}
}

// heldUntilCancelled runs call, waits until the tap has held load balancer name's calls
// n times in all, then cancels call's context and returns its error.
func heldUntilCancelled(t *testing.T, tap *Tap, name string, n int, call func(context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	poll.Eventually(t, fmt.Sprintf("%d held calls", n), func() error {
		if held := tap.LoadBalancers()[name].Held; held < n {
			return fmt.Errorf("held %d", held)
		}
		return nil
	})
	select {
	case err := <-done:
		t.Fatalf("the held call returned before it was given up: %v", err)
	default:
	}
	cancel()
	return <-done
}

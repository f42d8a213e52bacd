package route

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/manager"
)

// staticRoutes answers ListRoutes with a fixed slice, so the benchmarks measure the
// controller and not a fake cloud's bookkeeping.
type staticRoutes struct{ routes []cloud.Route }

func (s *staticRoutes) ListRoutes(context.Context, string) ([]cloud.Route, error) {
	return s.routes, nil
}

func (s *staticRoutes) CreateRoute(context.Context, string, string, cloud.Route) error {
	return nil
}

func (s *staticRoutes) DeleteRoute(context.Context, string, cloud.Route) error { return nil }

// benchController returns a controller whose node lister holds n dual-stack-free nodes
// with their NetworkUnavailable condition already set, and whose cloud lists a route for
// each node except every missingEvery-th one (0: none missing).
func benchController(b *testing.B, n, missingEvery int) *Controller {
	b.Helper()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	routes := &staticRoutes{}
	c, err := New(Config{
		ControllerDeps: manager.ControllerDeps{Client: client, Informers: factory, Recorder: record.NewFakeRecorder(1)},
		Routes:         routes,
		ClusterName:    "bench", ClusterCIDRs: prefixes("10.0.0.0/8"),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.worker.ShutDown)
	indexer := factory.Core().V1().Nodes().Informer().GetIndexer()
	for i := range n {
		cidr := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)
		node := nodeWith(fmt.Sprintf("node-%05d", i), cidr.String())
		node.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: reasonRouteCreated,
		}}
		if err := indexer.Add(node); err != nil {
			b.Fatal(err)
		}
		if missingEvery > 0 && i%missingEvery == 0 {
			continue
		}
		routes.routes = append(routes.routes, cloud.Route{Name: fmt.Sprintf("r-%d", i), TargetNode: node.Name, DestinationCIDR: cidr})
	}
	return c
}

// BenchmarkDriftCheck is one periodic reconcile of 5,000 nodes against 5,000 routes,
// all in place: list, index, plan every node, queue nothing.
func BenchmarkDriftCheck(b *testing.B) {
	c := benchController(b, 5000, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := c.reconcileAll(b.Context(), c.now()); err != nil {
			b.Fatal(err)
		}
	}
	if c.worker.Len() != 0 {
		b.Fatalf("queued %d nodes, want none", c.worker.Len())
	}
}

// BenchmarkDriftCheckWithDrift is the same with one route in ten missing.
func BenchmarkDriftCheckWithDrift(b *testing.B) {
	c := benchController(b, 5000, 10)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := c.reconcileAll(b.Context(), c.now()); err != nil {
			b.Fatal(err)
		}
	}
	if c.worker.Len() != 500 {
		b.Fatalf("queued %d nodes, want 500", c.worker.Len())
	}
}

// BenchmarkPlanAll is the in-memory part of a drift check: planning 5,000 nodes against
// an index of 5,000 routes, without the listing.
func BenchmarkPlanAll(b *testing.B) {
	c := benchController(b, 5000, 0)
	if err := c.table.refresh(b.Context(), c.now()); err != nil {
		b.Fatal(err)
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if keys := c.driftKeys(nodes); len(keys) != 0 {
			b.Fatalf("keys = %d, want 0", len(keys))
		}
	}
}

// BenchmarkSyncNodeInPlace is the event path for one node whose route exists: no cloud
// call, no API write.
func BenchmarkSyncNodeInPlace(b *testing.B) {
	c := benchController(b, 5000, 0)
	if err := c.table.refresh(b.Context(), c.now()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.syncNode(b.Context(), "node-02500"); err != nil {
			b.Fatal(err)
		}
	}
}

package nodeinit

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/internal/testkit/eventlog"
	"github.com/nephele-dev/nephele/manager"
	"github.com/nephele-dev/nephele/manager/inventory"
)

func TestRefresh(t *testing.T) {
	current := []corev1.NodeAddress{internal("10.0.0.1"), external("203.0.113.1"), hostname("n1")}
	tests := []struct {
		name       string
		node       *corev1.Node
		cloud      []corev1.NodeAddress
		noInstance bool
		fault      func(*fakecloud.Cloud)
		want       []corev1.NodeAddress // nil: unchanged
		wantEvent  string
		wantReason string
	}{
		{name: "unchanged", cloud: current},
		{name: "the kubelet's hostname is not a change", cloud: current[:2]},
		{
			name:  "new internal IP",
			cloud: []corev1.NodeAddress{internal("10.0.0.5"), external("203.0.113.1"), hostname("n1")},
			want:  []corev1.NodeAddress{internal("10.0.0.5"), external("203.0.113.1"), hostname("n1")},
		},
		{
			name:  "an extra address",
			cloud: []corev1.NodeAddress{internal("10.0.0.1"), internal("fd00::1"), external("203.0.113.1"), hostname("n1")},
			want:  []corev1.NodeAddress{internal("10.0.0.1"), internal("fd00::1"), external("203.0.113.1"), hostname("n1")},
		},
		{name: "empty answer", cloud: []corev1.NodeAddress{}, wantEvent: EventAddressesNotUpdated, wantReason: reasonNoAddresses},
		{
			name:       "internal IP gone",
			cloud:      []corev1.NodeAddress{external("203.0.113.1"), hostname("n1")},
			wantEvent:  EventAddressesNotUpdated,
			wantReason: reasonPartialAddresses,
		},
		{
			name:       "provided IP gone",
			node:       withAnn(initializedNode("n1", current...), AnnotationProvidedNodeIP, "10.0.0.1"),
			cloud:      []corev1.NodeAddress{internal("10.0.0.7"), external("203.0.113.1"), hostname("n1")},
			wantEvent:  EventProvidedNodeIPInvalid,
			wantReason: reasonProvidedNodeIP,
		},
		{name: "instance gone: the lifecycle controller's business", noInstance: true},
		{
			name:  "tainted nodes are left to initialization",
			node:  taintedNode("n1", func(n *corev1.Node) { n.Status.Addresses = current }),
			cloud: []corev1.NodeAddress{internal("10.0.0.9")},
		},
	}
	for _, mode := range []struct {
		name      string
		inventory bool
	}{{"inventory", true}, {"per node", false}} {
		for _, tt := range tests {
			t.Run(mode.name+"/"+tt.name, func(t *testing.T) {
				node := tt.node
				if node == nil {
					node = initializedNode("n1", current...)
				}
				var insts []cloud.Instance
				if !tt.noInstance {
					insts = append(insts, instance("n1", tt.cloud...))
				}
				f := newFixture(t, fixtureOptions{inventory: mode.inventory}, insts, node)
				f.Client.ClearActions()
				f.ctrl.refresh(t.Context())
				got := f.Node(t, "n1").Status.Addresses
				want := tt.want
				if want == nil {
					want = node.Status.Addresses
					if w := writes(f.Client.Actions()); len(w) != 0 {
						t.Errorf("API writes = %v, want none", w)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("addresses = %v, want %v", formatAddresses(got), formatAddresses(want))
				}
				if tt.wantEvent != "" {
					evs := f.Events.Find("n1", tt.wantEvent)
					if len(evs) != 1 || evs[0].Type != corev1.EventTypeWarning {
						t.Errorf("want one Warning %s event, got:\n%s", tt.wantEvent, f.Events)
					}
				} else if s := f.Events.String(); s != "" {
					t.Errorf("unexpected events:\n%s", s)
				}
				if tt.wantReason != "" {
					if n := f.Metric(t, "nephele_cloud_node_errors_total", map[string]string{"reason": tt.wantReason}); n != 1 {
						t.Errorf("errors{reason=%s} = %v, want 1", tt.wantReason, n)
					}
				}
			})
		}
	}
}

func withAnn(n *corev1.Node, k, v string) *corev1.Node {
	withAnnotation(k, v)(n)
	return n
}

func TestRefreshCloudFailures(t *testing.T) {
	current := []corev1.NodeAddress{internal("10.0.0.1")}
	t.Run("listing fails", func(t *testing.T) {
		f := newFixture(t, fixtureOptions{inventory: true}, []cloud.Instance{instance("n1", internal("10.0.0.2"))}, initializedNode("n1", current...))
		f.Cloud.SetError(cloud.OpListInstances, errors.New("HTTP 500"))
		f.Client.ClearActions()
		f.ctrl.refresh(t.Context())
		if w := writes(f.Client.Actions()); len(w) != 0 {
			t.Errorf("API writes = %v, want none", w)
		}
		if n := f.Metric(t, "nephele_cloud_node_errors_total", map[string]string{"reason": reasonInventoryError}); n != 1 {
			t.Errorf("inventory errors = %v, want 1", n)
		}
		if n := f.Cloud.Calls(cloud.OpInstanceMetadata); n != 0 {
			t.Errorf("InstanceMetadata calls = %d: a failed listing must not turn into per-node calls", n)
		}
	})
	t.Run("lookups fail", func(t *testing.T) {
		f := newFixture(t, fixtureOptions{}, []cloud.Instance{instance("n1", internal("10.0.0.2"))}, initializedNode("n1", current...))
		f.Cloud.SetError(cloud.OpInstanceMetadata, cloud.Throttled(0, nil))
		f.Client.ClearActions()
		f.ctrl.refresh(t.Context())
		if w := writes(f.Client.Actions()); len(w) != 0 {
			t.Errorf("API writes = %v, want none", w)
		}
	})
}

func TestRefreshCostsOneListing(t *testing.T) {
	const n = 200
	var insts []cloud.Instance
	var nodes []*corev1.Node
	for i := range n {
		name := fmt.Sprintf("n%03d", i)
		insts = append(insts, instance(name, internal(fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)), hostname(name)))
		nodes = append(nodes, initializedNode(name, internal("192.168.0.1"), hostname(name)))
	}
	f := newFixture(t, fixtureOptions{inventory: true, workers: 4}, insts, nodes...)
	f.ctrl.refresh(t.Context())
	if got := f.Cloud.TotalCalls(); got != 1 {
		t.Errorf("cloud calls = %d, want 1 listing", got)
	}
	if got := f.Metric(t, "nephele_node_address_updates_total", nil); got != n {
		t.Errorf("address updates = %v, want %d", got, n)
	}
	if got := f.Node(t, "n007").Status.Addresses; !slices.Equal(got, insts[7].Addresses) {
		t.Errorf("n007 addresses = %v, want %v", got, insts[7].Addresses)
	}
}

// BenchmarkRefreshFromInventory measures a steady-state address refresh of 5,000 nodes
// from the inventory: the nodes listed from the cache, each looked up in the listing
// and compared, nothing to write. The listing is fresh, so the refresh asks the cloud
// nothing.
func BenchmarkRefreshFromInventory(b *testing.B) {
	const n = 5000
	fc, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		b.Fatal(err)
	}
	client := fake.NewClientset()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for i := range n {
		name := fmt.Sprintf("node-%05d", i)
		addrs := []corev1.NodeAddress{
			internal(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)),
			external(fmt.Sprintf("198.51.%d.%d", (i>>8)&255, i&255)),
			hostname(name),
		}
		if err := fc.AddInstance(instance(name, addrs...)); err != nil {
			b.Fatal(err)
		}
		if err := indexer.Add(initializedNode(name, addrs...)); err != nil {
			b.Fatal(err)
		}
	}
	inv := inventory.New(fc)
	go inv.Run(b.Context())
	c, err := New(Config{
		ControllerDeps: manager.ControllerDeps{
			Client:    client,
			Informers: informers.NewSharedInformerFactory(client, 0),
			Recorder:  &eventlog.Log{},
		},
		Instances: fc,
		Inventory: inv,
	})
	if err != nil {
		b.Fatal(err)
	}
	c.nodes = corelisters.NewNodeLister(indexer)
	if err := inv.Sync(b.Context(), 0); err != nil {
		b.Fatal(err)
	}
	fc.ResetCalls()
	b.ReportAllocs()
	for b.Loop() {
		c.refresh(b.Context())
	}
	if calls, w := fc.TotalCalls(), len(writes(client.Actions())); calls != 0 || w != 0 {
		b.Fatalf("refresh made %d cloud calls and %d API writes, want none", calls, w)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/node")
}

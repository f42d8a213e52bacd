package nodelifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/internal/eventlog"
	"github.com/nephele-dev/nephele/manager/inventory"
)

// fixture is a controller on a fake clientset, a fake cloud and a fake clock.
type fixture struct {
	ctrl   *Controller
	client *fake.Clientset
	cloud  *fakecloud.Cloud
	clock  *clocktesting.FakePassiveClock
	events *eventlog.Log
	reg    *prometheus.Registry
}

type fixtureOptions struct {
	inventory bool
	// lister replaces the fake cloud as the inventory's source, when set.
	lister    cloud.InstanceLister
	threshold float64
	workers   int
}

const testGrace = 40 * time.Second

func newFixture(t *testing.T, opts fixtureOptions, instances []cloud.Instance, nodes ...*corev1.Node) *fixture {
	t.Helper()
	fc, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range instances {
		if err := fc.AddInstance(inst); err != nil {
			t.Fatal(err)
		}
	}
	objs := make([]runtime.Object, len(nodes))
	for i, n := range nodes {
		objs[i] = n
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := Config{
		Client:              client,
		Informers:           factory,
		Instances:           fc,
		Recorder:            &eventlog.Log{},
		Metrics:             prometheus.NewRegistry(),
		MonitorPeriod:       time.Second,
		DeletionGracePeriod: testGrace,
		SafeModeThreshold:   opts.threshold,
		Workers:             opts.workers,
		Clock:               clk,
	}
	if opts.inventory || opts.lister != nil {
		var lister cloud.InstanceLister = fc
		if opts.lister != nil {
			lister = opts.lister
		}
		inv := inventory.New(lister)
		go inv.Run(t.Context())
		cfg.Inventory = inv
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	for typ, ok := range factory.WaitForCacheSync(t.Context().Done()) {
		if !ok {
			t.Fatalf("the %v informer did not sync", typ)
		}
	}
	return &fixture{ctrl: c, client: client, cloud: fc, clock: clk, events: cfg.Recorder.(*eventlog.Log), reg: cfg.Metrics.(*prometheus.Registry)}
}

// round advances the clock by d and runs one round.
func (f *fixture) round(t *testing.T, d time.Duration) {
	t.Helper()
	f.clock.SetTime(f.clock.Now().Add(d))
	f.ctrl.monitor(t.Context())
}

// exists reports whether node name is in the fake apiserver.
func (f *fixture) exists(t *testing.T, name string) bool {
	t.Helper()
	_, err := f.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// get reads node name from the fake apiserver.
func (f *fixture) get(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := f.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitCached waits until the informer's view of node name satisfies ok; a nil node
// means the informer no longer has it.
func (f *fixture) waitCached(t *testing.T, name string, ok func(*corev1.Node) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := f.ctrl.nodes.Get(name)
		if apierrors.IsNotFound(err) {
			n, err = nil, nil
		}
		if err == nil && ok(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s never reached the expected state in the cache (last: %v, %v)", name, n, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// update writes node to the fake apiserver and waits until the cache's copy satisfies
// ok (the fake apiserver keeps no resource versions to wait for).
func (f *fixture) update(t *testing.T, node *corev1.Node, ok func(*corev1.Node) bool) {
	t.Helper()
	if _, err := f.client.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitCached(t, node.Name, func(n *corev1.Node) bool { return n != nil && ok(n) })
}

func (f *fixture) metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	series:
		for _, m := range fam.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue series
				}
			}
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	return 0
}

// newNode returns a node with a provider ID; ready selects its Ready condition
// ("" leaves it without one).
func newNode(name string, ready corev1.ConditionStatus) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.Now()},
		Spec:       corev1.NodeSpec{ProviderID: "fake://" + name},
	}
	if ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
	}
	return n
}

func instance(name string, state cloud.InstanceState) cloud.Instance {
	return cloud.Instance{NodeName: name, ProviderID: "fake://" + name, State: state,
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}}
}

// emptyLister is a broken cloud whose listing comes back empty.
type emptyLister struct{}

func (emptyLister) ListInstances(context.Context) ([]cloud.Instance, error) { return nil, nil }

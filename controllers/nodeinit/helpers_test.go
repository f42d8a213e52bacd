package nodeinit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/internal/eventlog"
	"github.com/nephele-dev/nephele/manager/inventory"
)

// fixture is a controller on a fake clientset and a fake cloud, informers synced.
type fixture struct {
	ctrl    *Controller
	client  *fake.Clientset
	cloud   *fakecloud.Cloud
	events  *eventlog.Log
	reg     *prometheus.Registry
	factory informers.SharedInformerFactory
}

type fixtureOptions struct {
	inventory bool
	workers   int
	refresh   time.Duration
}

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
	ctx := t.Context()
	cfg := Config{
		Client:                client,
		Informers:             factory,
		Instances:             fc,
		Recorder:              &eventlog.Log{},
		Metrics:               prometheus.NewRegistry(),
		Workers:               opts.workers,
		StatusUpdateFrequency: opts.refresh,
	}
	if opts.inventory {
		inv := inventory.New(fc)
		go inv.Run(ctx)
		cfg.Inventory = inv
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown)
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("the %v informer did not sync", typ)
		}
	}
	return &fixture{ctrl: c, client: client, cloud: fc, events: cfg.Recorder.(*eventlog.Log), reg: cfg.Metrics.(*prometheus.Registry), factory: factory}
}

// run runs the controller until the test ends.
func (f *fixture) run(t *testing.T) {
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := f.ctrl.Run(t.Context()); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(wg.Wait)
}

// node reads a node back from the fake apiserver.
func (f *fixture) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := f.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitCached waits until the informer's copy of node name satisfies ok.
func (f *fixture) waitCached(t *testing.T, name string, ok func(*corev1.Node) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := f.ctrl.nodes.Get(name)
		if err == nil && ok(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s never reached the expected state in the cache (last: %v, %v)", name, n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// counter reads a counter or gauge series from the fixture's registry.
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
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

// waitMetric waits until the unlabelled series name reaches want.
func (f *fixture) waitMetric(t *testing.T, name string, want float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := f.metric(t, name, nil)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want %v", name, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func taintedNode(name string, mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Now()},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		}},
	}
	for _, m := range mods {
		m(n)
	}
	return n
}

func initializedNode(name string, addrs ...corev1.NodeAddress) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Now()},
		Spec:       corev1.NodeSpec{ProviderID: "fake://" + name},
		Status:     corev1.NodeStatus{Addresses: addrs},
	}
}

func instance(name string, addrs ...corev1.NodeAddress) cloud.Instance {
	return cloud.Instance{
		NodeName:     name,
		ProviderID:   "fake://" + name,
		InstanceType: "m.large",
		Zone:         "zone-a",
		Region:       "region-1",
		Addresses:    addrs,
	}
}

package nodetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/internal/testkit/eventlog"
	"github.com/nephele-dev/nephele/internal/testkit/metrictest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/manager/inventory"
)

// Fake is a node controller's world in a unit test: a fake API server and a fake cloud.
type Fake struct {
	// Client is a fake clientset holding the Nodes given to NewFake.
	Client *fake.Clientset
	// Informers is a factory on Client; Start starts it.
	Informers informers.SharedInformerFactory
	// Cloud is a fake cloud holding the instances given to NewFake.
	Cloud *fakecloud.Cloud
	// Events records the Events the controller emits.
	Events *eventlog.Log
	// Metrics is the registry the controller registers its metrics with.
	Metrics *prometheus.Registry

	// watching is closed when the Node informer's watch began.
	watching chan struct{}
}

// NewFake returns a fake API server holding nodes and a fake cloud holding instances.
func NewFake(t testing.TB, instances []cloud.Instance, nodes ...*corev1.Node) *Fake {
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
	f := &Fake{
		Client:    client,
		Informers: informers.NewSharedInformerFactory(client, 0),
		Cloud:     fc,
		Events:    &eventlog.Log{},
		Metrics:   prometheus.NewRegistry(),
		watching:  make(chan struct{}),
	}
	// The fake API server sends a watch only what happens after the watch began: a Node
	// deleted between the informer's list and its watch would stay in the cache for good.
	// Start waits for the watch, seen here.
	var once sync.Once
	client.PrependWatchReactor("nodes", func(action clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(clienttesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		once.Do(func() { close(f.watching) })
		return true, w, nil
	})
	return f
}

// Inventory returns an inventory of lister, or of the fake cloud when lister is nil,
// running until the test ends.
func (f *Fake) Inventory(t testing.TB, lister cloud.InstanceLister) *inventory.Inventory {
	if lister == nil {
		lister = f.Cloud
	}
	inv := inventory.New(lister)
	var wg sync.WaitGroup
	wg.Go(func() { inv.Run(t.Context()) })
	t.Cleanup(wg.Wait)
	return inv
}

// Start starts the informers the controller registered and waits until they have
// synced and the Node informer watches; they stop when the test ends.
func (f *Fake) Start(t testing.TB) {
	t.Helper()
	f.Informers.Start(t.Context().Done())
	t.Cleanup(f.Informers.Shutdown)
	for typ, ok := range f.Informers.WaitForCacheSync(t.Context().Done()) {
		if !ok {
			t.Fatalf("the %v informer did not sync", typ)
		}
	}
	select {
	case <-f.watching:
	case <-time.After(poll.Timeout):
		t.Fatalf("the Node informer did not start watching within %s", poll.Timeout)
	}
}

// Node reads node name from the fake API server, failing the test when there is none.
func (f *Fake) Node(t testing.TB, name string) *corev1.Node {
	t.Helper()
	n, err := f.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading node %s: %v", name, err)
	}
	return n
}

// Exists reports whether the fake API server holds node name.
func (f *Fake) Exists(t testing.TB, name string) bool {
	t.Helper()
	_, err := f.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatalf("reading node %s: %v", name, err)
	}
	return true
}

// WaitCached waits until the informers' copy of node name satisfies ok, which is
// called with nil while the informers have no such node: the fake API server keeps no
// resource versions to wait for.
func (f *Fake) WaitCached(t testing.TB, name string, ok func(*corev1.Node) bool) {
	t.Helper()
	lister := f.Informers.Core().V1().Nodes().Lister()
	poll.Eventually(t, "the cached node "+name, func() error {
		n, err := lister.Get(name)
		if apierrors.IsNotFound(err) {
			n, err = nil, nil
		}
		if err != nil {
			return err
		}
		if !ok(n) {
			return fmt.Errorf("in the cache: %v", n)
		}
		return nil
	})
}

// Metric returns the value of metric name with labels in Metrics (see metrictest.Value).
func (f *Fake) Metric(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	return metrictest.Value(t, f.Metrics, name, labels)
}

// WaitMetric waits until metric name (all its series) reaches want.
func (f *Fake) WaitMetric(t testing.TB, name string, want float64) {
	t.Helper()
	waitMetric(t, f.Metrics, name, want)
}

func waitMetric(t testing.TB, g prometheus.Gatherer, name string, want float64) {
	t.Helper()
	poll.Eventually(t, fmt.Sprintf("%s to reach %v", name, want), func() error {
		if got := metrictest.Value(t, g, name, nil); got != want {
			return fmt.Errorf("%s = %v", name, got)
		}
		return nil
	})
}

// Run runs run (a controller's Run) until the test ends, and fails the test if it
// returns an error.
func Run(t testing.TB, run func(context.Context) error) {
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := run(t.Context()); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(wg.Wait)
}

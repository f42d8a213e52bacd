package nodelifecycle

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/nodetest"
	"github.com/nephele-dev/nephele/manager"
)

// fixture is a controller on nodetest's fake API server and fake cloud, and a fake
// clock.
type fixture struct {
	*nodetest.Fake
	ctrl  *Controller
	clock *clocktesting.FakePassiveClock
}

type fixtureOptions struct {
	inventory bool
	// lister replaces the fake cloud as the inventory's source, when set.
	lister    cloud.InstanceLister
	threshold float64
	workers   int
	ownership cloud.NodeOwnership
}

const testGrace = 40 * time.Second

func newFixture(t *testing.T, opts fixtureOptions, instances []cloud.Instance, nodes ...*corev1.Node) *fixture {
	t.Helper()
	f := nodetest.NewFake(t, instances, nodes...)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := Config{
		ControllerDeps: manager.ControllerDeps{
			Client:    f.Client,
			Informers: f.Informers,
			Recorder:  f.Events,
			Metrics:   f.Metrics,
		},
		Instances:           f.Cloud,
		MonitorPeriod:       time.Second,
		DeletionGracePeriod: testGrace,
		SafeModeThreshold:   opts.threshold,
		Workers:             opts.workers,
		Clock:               clk,
		Ownership:           opts.ownership,
	}
	if opts.inventory || opts.lister != nil {
		cfg.Inventory = f.Inventory(t, opts.lister)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(t)
	return &fixture{Fake: f, ctrl: c, clock: clk}
}

// round advances the clock by d and runs one round.
func (f *fixture) round(t *testing.T, d time.Duration) {
	t.Helper()
	f.clock.SetTime(f.clock.Now().Add(d))
	f.ctrl.monitor(t.Context())
}

// update writes node to the fake apiserver and waits until the cache's copy satisfies
// ok (the fake apiserver keeps no resource versions to wait for).
func (f *fixture) update(t *testing.T, node *corev1.Node, ok func(*corev1.Node) bool) {
	t.Helper()
	if _, err := f.Client.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitCached(t, node.Name, func(n *corev1.Node) bool { return n != nil && ok(n) })
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

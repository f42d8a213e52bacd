package nodeinit

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/nodetest"
	"github.com/nephele-dev/nephele/manager"
)

// fixture is a controller on nodetest's fake API server and fake cloud, informers
// synced.
type fixture struct {
	*nodetest.Fake
	ctrl *Controller
}

type fixtureOptions struct {
	inventory bool
	workers   int
	refresh   time.Duration
}

func newFixture(t *testing.T, opts fixtureOptions, instances []cloud.Instance, nodes ...*corev1.Node) *fixture {
	t.Helper()
	f := nodetest.NewFake(t, instances, nodes...)
	cfg := Config{
		ControllerDeps: manager.ControllerDeps{
			Client:    f.Client,
			Informers: f.Informers,
			Recorder:  f.Events,
			Metrics:   f.Metrics,
		},
		Instances:             f.Cloud,
		Workers:               opts.workers,
		StatusUpdateFrequency: opts.refresh,
	}
	if opts.inventory {
		cfg.Inventory = f.Inventory(t, nil)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(t)
	return &fixture{Fake: f, ctrl: c}
}

// run runs the controller until the test ends.
func (f *fixture) run(t *testing.T) { nodetest.Run(t, f.ctrl.Run) }

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

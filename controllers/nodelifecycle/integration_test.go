package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/controllers/taints"
	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/testkit/nodetest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/manager"
)

// The integration tests run the controller against a real kube-apiserver and a fake
// cloud. kwok manages only the Nodes labelled kwokLabel: those turn Ready and
// heartbeat like nodes with a kubelet; the others keep the status the test gives them,
// which is how a test makes a node NotReady. One control plane serves the package.
var shared = testenv.Shared{
	// kwok manages only the nodes labelled kwokLabel; the others keep the status a test
	// gives them, which is how a test makes a node NotReady.
	Setup: func(ctx context.Context, env *controlplane.Env) error {
		_, err := env.StartKwok(ctx, "--manage-all-nodes=false", "--manage-nodes-with-label-selector="+kwokLabel+"=managed")
		return err
	},
}

const (
	testLabel = "nephele.dev/nodelifecycle-test"
	kwokLabel = "nephele.dev/kwok"
	period    = 200 * time.Millisecond
	grace     = time.Second
)

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// controlPlane returns the shared control plane with kwok managing the labelled nodes.
// A missing binary fails the test: integration tests never skip.
func controlPlane(t *testing.T) *controlplane.Env { return shared.Env(t) }

// harness is a controller running against the real control plane with its own fake
// cloud (a nodetest.Cluster), seeing only the Nodes it created.
type harness struct {
	*nodetest.Cluster
	t       *testing.T
	started time.Time
	start   func()
}

// newHarness prepares a controller; call start once the cloud and nodes are seeded.
func newHarness(t *testing.T, withInventory bool) *harness {
	t.Helper()
	c := nodetest.NewCluster(t, controlPlane(t).Client, testLabel)
	h := &harness{Cluster: c, t: t}
	cfg := Config{
		ControllerDeps: manager.ControllerDeps{
			Client:    c.Client,
			Informers: c.Scope.Informers,
			Recorder:  c.Scope.Recorder(manager.CloudNodeLifecycleController),
			Logger:    testlog.New(t, 2),
			Metrics:   c.Metrics,
		},
		Instances:           c.Cloud,
		MonitorPeriod:       period,
		DeletionGracePeriod: grace,
		Workers:             4,
	}
	if withInventory {
		cfg.Inventory = c.Inventory()
	}
	ctrl, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.start = func() {
		h.started = time.Now()
		c.Start(ctrl.Run)
	}
	return h
}

func (h *harness) providerID(short string) string { return "fake://" + h.Name(short) }

// addInstance adds the instance behind node short.
func (h *harness) addInstance(short string, state cloud.InstanceState) {
	h.t.Helper()
	if err := h.Cloud.AddInstance(instance(h.Name(short), state)); err != nil {
		h.t.Fatal(err)
	}
}

// createNode creates an initialized node. A managed node is kwok's: it turns Ready and
// heartbeats. Any other keeps the Ready condition given (False), as a node whose kubelet
// stopped reporting.
func (h *harness) createNode(short string, managed bool) {
	h.t.Helper()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: h.Name(short), Labels: h.Labels()},
		Spec:       corev1.NodeSpec{ProviderID: h.providerID(short)},
	}
	if managed {
		n.Labels[kwokLabel] = "managed"
	} else {
		n.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletStopped",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}}
	}
	if _, err := h.Client.CoreV1().Nodes().Create(h.t.Context(), n, metav1.CreateOptions{}); err != nil {
		h.t.Fatalf("creating node %s: %v", n.Name, err)
	}
}

// waitRounds waits until the controller has run n more rounds.
func (h *harness) waitRounds(n int) {
	h.t.Helper()
	target := h.Metric("nephele_node_lifecycle_rounds_total", nil) + float64(n)
	poll.Eventually(h.t, fmt.Sprintf("%d more rounds", n), func() error {
		if got := h.Metric("nephele_node_lifecycle_rounds_total", nil); got < target {
			return fmt.Errorf("rounds = %v, want %v", got, target)
		}
		return nil
	})
}

// waitMetricAtLeast waits until metric name with labels reaches want. The rounds
// counter waitRounds reads counts rounds as they start, so what a round records may
// come a moment after.
func (h *harness) waitMetricAtLeast(name string, labels map[string]string, want float64) {
	h.t.Helper()
	poll.Eventually(h.t, fmt.Sprintf("%s%v >= %v", name, labels, want), func() error {
		if got := h.Metric(name, labels); got < want {
			return fmt.Errorf("%s%v = %v", name, labels, got)
		}
		return nil
	})
}

func (h *harness) waitReady(short string) {
	h.t.Helper()
	poll.Eventually(h.t, "node "+short+" Ready", func() error {
		n, ok := h.Get(short)
		if !ok || !isReady(n) {
			return fmt.Errorf("not Ready")
		}
		return nil
	})
}

func TestIntegrationNoDeletionWhileTheCloudFails(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			h := newHarness(t, mode.inventory)
			const n = 30
			for i := range n {
				// No instance: the moment the cloud answers, every one of them is gone.
				h.createNode(fmt.Sprintf("n%02d", i), false)
			}
			h.Cloud.SetError(fakecloud.AnyOp, errors.New("HTTP 503 Service Unavailable"))
			h.start()

			// Several grace periods of failures of every kind.
			for _, fault := range []func(){
				func() { h.Cloud.SetError(fakecloud.AnyOp, errors.New("HTTP 503 Service Unavailable")) },
				func() { h.Cloud.Throttle(fakecloud.AnyOp, time.Second) },
				func() { h.Cloud.SetError(fakecloud.AnyOp, context.DeadlineExceeded) },
			} {
				fault()
				h.waitRounds(8) // 8 periods: more than a grace period
				if got := h.Count(); got != n {
					t.Fatalf("%d of %d nodes left while every cloud call failed", got, n)
				}
			}
			if got := h.Metric("nephele_node_lifecycle_safe_mode", nil); got != 1 {
				t.Errorf("safe mode gauge = %v, want 1", got)
			}
			h.waitMetricAtLeast("nephele_node_lifecycle_safe_mode_rounds_total", map[string]string{"reason": SafeModeCloudErrors}, 24)
			poll.Eventually(h.t, "safe-mode events", func() error {
				if got := len(h.EventNodes(EventNodeDeletionSafeMode)); got != maxSafeModeEvents {
					return fmt.Errorf("safe-mode events on %d nodes, want %d", got, maxSafeModeEvents)
				}
				return nil
			})
			if got := h.EventNodes(EventDeletingNode); len(got) != 0 {
				t.Errorf("deletion events on %v", got)
			}

			// The cloud recovers and says every instance is gone: deleting all 30 nodes at
			// once is still refused.
			h.Cloud.ClearFaults()
			h.waitRounds(10)
			if got := h.Count(); got != n {
				t.Fatalf("%d of %d nodes left after the cloud reported them all gone at once", got, n)
			}
			h.waitMetricAtLeast("nephele_node_lifecycle_safe_mode_rounds_total", map[string]string{"reason": SafeModeTooManyDeletions}, 1)
		})
	}
}

func TestIntegrationDeletionAfterConfirmedNotFound(t *testing.T) {
	h := newHarness(t, true)
	for i := range 10 {
		short := fmt.Sprintf("ready%d", i)
		h.addInstance(short, cloud.InstanceRunning)
		h.createNode(short, true)
	}
	h.addInstance("stopped", cloud.InstanceStopped)
	h.createNode("stopped", false)
	h.createNode("gone", false)
	h.start()

	poll.Eventually(h.t, "the node without an instance deleted", func() error {
		if _, ok := h.Get("gone"); ok {
			return fmt.Errorf("still there")
		}
		return nil
	})
	if elapsed := time.Since(h.started); elapsed < grace {
		t.Errorf("deleted %v after start, before the grace period %v", elapsed, grace)
	}
	poll.Eventually(h.t, "a deletion event", func() error {
		if got := h.EventNodes(EventDeletingNode); !slices.Equal(got, []string{"gone"}) {
			return fmt.Errorf("deletion events on %v", got)
		}
		return nil
	})
	// Counted once the Delete call has returned, a moment after the node is gone.
	h.waitMetricAtLeast("nephele_node_lifecycle_deletions_total", nil, 1)
	h.waitRounds(5)
	if got := h.Metric("nephele_node_lifecycle_deletions_total", nil); got != 1 {
		t.Errorf("deletions = %v, want 1", got)
	}
	if got := h.Count(); got != 11 {
		t.Errorf("%d nodes left, want 11: only the gone one deleted", got)
	}
	// Two answers confirmed the deletion; the node itself was asked about once per round.
	for _, c := range h.Cloud.CallLog() {
		if c.Op == cloud.OpInstanceMetadata && strings.Contains(c.Subject, "ready") {
			t.Errorf("a Ready node was looked up: %s", c.Subject)
		}
	}
}

func TestIntegrationShutdownTaint(t *testing.T) {
	h := newHarness(t, true)
	h.addInstance("s", cloud.InstanceStopped)
	h.createNode("s", false)
	// A Ready node is never tainted, even if the cloud says it is stopped.
	h.addInstance("ready", cloud.InstanceStopped)
	h.createNode("ready", true)
	h.waitReady("ready")
	h.start()

	tainted := func(want bool) {
		t.Helper()
		poll.Eventually(h.t, fmt.Sprintf("shutdown taint %v", want), func() error {
			n, ok := h.Get("s")
			if !ok {
				return fmt.Errorf("node gone")
			}
			if taints.Has(n, cloudproviderapi.TaintNodeShutdown) != want {
				return fmt.Errorf("taints %v", n.Spec.Taints)
			}
			return nil
		})
	}
	tainted(true)
	if err := h.Cloud.SetInstanceState(h.providerID("s"), cloud.InstanceRunning); err != nil {
		t.Fatal(err)
	}
	tainted(false)
	if err := h.Cloud.SetInstanceState(h.providerID("s"), cloud.InstanceStopped); err != nil {
		t.Fatal(err)
	}
	tainted(true)

	// kwok takes the node over, as a kubelet coming back: Ready again, untainted.
	n, _ := h.Get("s")
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"managed"}}}`, kwokLabel)
	if _, err := h.Client.CoreV1().Nodes().Patch(t.Context(), n.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitReady("s")
	tainted(false)

	if n, _ := h.Get("ready"); taints.Has(n, cloudproviderapi.TaintNodeShutdown) {
		t.Error("a Ready node got the shutdown taint")
	}
	if got := h.EventNodes(EventDeletingNode); len(got) != 0 {
		t.Errorf("deletion events on %v", got)
	}
}

func TestIntegrationSafeModeWhenTooManyWouldBeDeleted(t *testing.T) {
	h := newHarness(t, true)
	for i := range 17 {
		short := fmt.Sprintf("ready%02d", i)
		h.addInstance(short, cloud.InstanceRunning)
		h.createNode(short, true)
	}
	// 3 of 20 nodes gone: more than 10% (2 nodes) at once.
	for _, short := range []string{"gone0", "gone1", "gone2"} {
		h.createNode(short, false)
	}
	h.start()

	poll.Eventually(h.t, "safe mode", func() error {
		if got := h.Metric("nephele_node_lifecycle_safe_mode_rounds_total", map[string]string{"reason": SafeModeTooManyDeletions}); got < 1 {
			return fmt.Errorf("too-many-deletions rounds = %v", got)
		}
		return nil
	})
	h.waitRounds(3 * int(grace/period))
	if got := h.Count(); got != 20 {
		t.Fatalf("%d nodes left in safe mode, want 20", got)
	}
	if got := h.Metric("nephele_node_lifecycle_safe_mode", nil); got != 1 {
		t.Errorf("safe mode gauge = %v, want 1", got)
	}
	poll.Eventually(h.t, "safe-mode events on the three nodes", func() error {
		if got := h.EventNodes(EventNodeDeletionSafeMode); !slices.Equal(got, []string{"gone0", "gone1", "gone2"}) {
			return fmt.Errorf("safe-mode events on %v", got)
		}
		return nil
	})

	// One instance comes back: two deletions are within the threshold.
	h.addInstance("gone0", cloud.InstanceRunning)
	poll.Eventually(h.t, "the two gone nodes deleted", func() error {
		_, ok1 := h.Get("gone1")
		_, ok2 := h.Get("gone2")
		if ok1 || ok2 {
			return fmt.Errorf("gone1 exists=%v gone2 exists=%v", ok1, ok2)
		}
		return nil
	})
	if _, ok := h.Get("gone0"); !ok {
		t.Error("the node whose instance came back was deleted")
	}
	poll.Eventually(h.t, "safe mode left", func() error {
		if got := h.Metric("nephele_node_lifecycle_safe_mode", nil); got != 0 {
			return fmt.Errorf("safe mode gauge = %v", got)
		}
		return nil
	})
}

package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/controllers/taints"
	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/testenv"
	"github.com/nephele-dev/nephele/manager"
	"github.com/nephele-dev/nephele/manager/inventory"
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
	testLabel    = "nephele.dev/nodelifecycle-test"
	kwokLabel    = "nephele.dev/kwok"
	pollTimeout  = 60 * time.Second
	pollInterval = 50 * time.Millisecond
	period       = 200 * time.Millisecond
	grace        = time.Second
)

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// controlPlane returns the shared control plane with kwok managing the labelled nodes.
// A missing binary fails the test: integration tests never skip.
func controlPlane(t *testing.T) *controlplane.Env { return shared.Env(t) }

// harness is a controller running against the real control plane with its own fake
// cloud, seeing only the Nodes it created.
type harness struct {
	t        *testing.T
	id       string
	client   kubernetes.Interface
	cloud    *fakecloud.Cloud
	registry *prometheus.Registry
	started  time.Time
	start    func()
}

// newHarness prepares a controller; call start once the cloud and nodes are seeded.
func newHarness(t *testing.T, withInventory bool) *harness {
	t.Helper()
	e := controlPlane(t)
	scope := testenv.NewScope(t, e.Client, testLabel)
	fc, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, id: scope.ID, client: e.Client, cloud: fc, registry: prometheus.NewRegistry()}
	factory := scope.Informers
	ctx, cancel := context.WithCancel(context.Background())
	cfg := Config{
		Client:              e.Client,
		Informers:           factory,
		Instances:           fc,
		Recorder:            scope.Recorder(manager.CloudNodeLifecycleController),
		Logger:              testr.NewWithOptions(t, testr.Options{Verbosity: 2}),
		Metrics:             h.registry,
		MonitorPeriod:       period,
		DeletionGracePeriod: grace,
		Workers:             4,
	}
	var wg sync.WaitGroup
	if withInventory {
		inv := inventory.New(fc)
		wg.Go(func() { inv.Run(ctx) })
		cfg.Inventory = inv
	}
	ctrl, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.start = func() {
		h.started = time.Now()
		factory.Start(ctx.Done())
		wg.Go(func() {
			if err := ctrl.Run(ctx); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	// Runs before the scope's cleanup, which stops the informers and deletes the nodes.
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return h
}

func (h *harness) name(short string) string { return h.id + "-" + short }

func (h *harness) providerID(short string) string { return "fake://" + h.name(short) }

// addInstance adds the instance behind node short.
func (h *harness) addInstance(short string, state cloud.InstanceState) {
	h.t.Helper()
	if err := h.cloud.AddInstance(instance(h.name(short), state)); err != nil {
		h.t.Fatal(err)
	}
}

// createNode creates an initialized node. A managed node is kwok's: it turns Ready and
// heartbeats. Any other keeps the Ready condition given (False), as a node whose kubelet
// stopped reporting.
func (h *harness) createNode(short string, managed bool) {
	h.t.Helper()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: h.name(short), Labels: map[string]string{testLabel: h.id}},
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
	if _, err := h.client.CoreV1().Nodes().Create(h.t.Context(), n, metav1.CreateOptions{}); err != nil {
		h.t.Fatalf("creating node %s: %v", n.Name, err)
	}
}

func (h *harness) get(short string) (*corev1.Node, bool) {
	h.t.Helper()
	n, err := h.client.CoreV1().Nodes().Get(h.t.Context(), h.name(short), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return n, true
}

func (h *harness) count() int {
	h.t.Helper()
	list, err := h.client.CoreV1().Nodes().List(h.t.Context(), metav1.ListOptions{LabelSelector: testLabel + "=" + h.id})
	if err != nil {
		h.t.Fatal(err)
	}
	return len(list.Items)
}

func (h *harness) eventually(what string, cond func() error) {
	h.t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(h.t.Context(), pollInterval, pollTimeout, true, func(context.Context) (bool, error) {
		last = cond()
		return last == nil, nil
	})
	if err != nil {
		h.t.Fatalf("%s: %v (last: %v)", what, err, last)
	}
}

// events returns the names of this harness's nodes with an event of reason.
func (h *harness) events(reason string) []string {
	h.t.Helper()
	list, err := h.client.CoreV1().Events(metav1.NamespaceDefault).List(h.t.Context(), metav1.ListOptions{
		FieldSelector: fields.Set{"reason": reason}.String(),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if short, ok := strings.CutPrefix(e.InvolvedObject.Name, h.id+"-"); ok && !slices.Contains(out, short) {
			out = append(out, short)
		}
	}
	slices.Sort(out)
	return out
}

func (h *harness) metric(name string, labels map[string]string) float64 {
	h.t.Helper()
	families, err := h.registry.Gather()
	if err != nil {
		h.t.Fatal(err)
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

// waitRounds waits until the controller has run n more rounds.
func (h *harness) waitRounds(n int) {
	h.t.Helper()
	target := h.metric("nephele_node_lifecycle_rounds_total", nil) + float64(n)
	h.eventually(fmt.Sprintf("%d more rounds", n), func() error {
		if got := h.metric("nephele_node_lifecycle_rounds_total", nil); got < target {
			return fmt.Errorf("rounds = %v, want %v", got, target)
		}
		return nil
	})
}

func (h *harness) waitReady(short string) {
	h.t.Helper()
	h.eventually("node "+short+" Ready", func() error {
		n, ok := h.get(short)
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
			h.cloud.SetError(fakecloud.AnyOp, errors.New("HTTP 503 Service Unavailable"))
			h.start()

			// Several grace periods of failures of every kind.
			for _, fault := range []func(){
				func() { h.cloud.SetError(fakecloud.AnyOp, errors.New("HTTP 503 Service Unavailable")) },
				func() { h.cloud.Throttle(fakecloud.AnyOp, time.Second) },
				func() { h.cloud.SetError(fakecloud.AnyOp, context.DeadlineExceeded) },
			} {
				fault()
				h.waitRounds(8) // 8 periods: more than a grace period
				if got := h.count(); got != n {
					t.Fatalf("%d of %d nodes left while every cloud call failed", got, n)
				}
			}
			if got := h.metric("nephele_node_lifecycle_safe_mode", nil); got != 1 {
				t.Errorf("safe mode gauge = %v, want 1", got)
			}
			if got := h.metric("nephele_node_lifecycle_safe_mode_rounds_total", map[string]string{"reason": SafeModeCloudErrors}); got < 24 {
				t.Errorf("safe-mode rounds = %v, want >= 24", got)
			}
			h.eventually("safe-mode events", func() error {
				if got := len(h.events(EventNodeDeletionSafeMode)); got != maxSafeModeEvents {
					return fmt.Errorf("safe-mode events on %d nodes, want %d", got, maxSafeModeEvents)
				}
				return nil
			})
			if got := h.events(EventDeletingNode); len(got) != 0 {
				t.Errorf("deletion events on %v", got)
			}

			// The cloud recovers and says every instance is gone: deleting all 30 nodes at
			// once is still refused.
			h.cloud.ClearFaults()
			h.waitRounds(10)
			if got := h.count(); got != n {
				t.Fatalf("%d of %d nodes left after the cloud reported them all gone at once", got, n)
			}
			if got := h.metric("nephele_node_lifecycle_safe_mode_rounds_total", map[string]string{"reason": SafeModeTooManyDeletions}); got < 1 {
				t.Errorf("too-many-deletions rounds = %v, want >= 1", got)
			}
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

	h.eventually("the node without an instance deleted", func() error {
		if _, ok := h.get("gone"); ok {
			return fmt.Errorf("still there")
		}
		return nil
	})
	if elapsed := time.Since(h.started); elapsed < grace {
		t.Errorf("deleted %v after start, before the grace period %v", elapsed, grace)
	}
	h.eventually("a deletion event", func() error {
		if got := h.events(EventDeletingNode); !slices.Equal(got, []string{"gone"}) {
			return fmt.Errorf("deletion events on %v", got)
		}
		return nil
	})
	if got := h.metric("nephele_node_lifecycle_deletions_total", nil); got != 1 {
		t.Errorf("deletions = %v, want 1", got)
	}
	h.waitRounds(5)
	if got := h.count(); got != 11 {
		t.Errorf("%d nodes left, want 11: only the gone one deleted", got)
	}
	// Two answers confirmed the deletion; the node itself was asked about once per round.
	for _, c := range h.cloud.CallLog() {
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
		h.eventually(fmt.Sprintf("shutdown taint %v", want), func() error {
			n, ok := h.get("s")
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
	if err := h.cloud.SetInstanceState(h.providerID("s"), cloud.InstanceRunning); err != nil {
		t.Fatal(err)
	}
	tainted(false)
	if err := h.cloud.SetInstanceState(h.providerID("s"), cloud.InstanceStopped); err != nil {
		t.Fatal(err)
	}
	tainted(true)

	// kwok takes the node over, as a kubelet coming back: Ready again, untainted.
	n, _ := h.get("s")
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"managed"}}}`, kwokLabel)
	if _, err := h.client.CoreV1().Nodes().Patch(t.Context(), n.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitReady("s")
	tainted(false)

	if n, _ := h.get("ready"); taints.Has(n, cloudproviderapi.TaintNodeShutdown) {
		t.Error("a Ready node got the shutdown taint")
	}
	if got := h.events(EventDeletingNode); len(got) != 0 {
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

	h.eventually("safe mode", func() error {
		if got := h.metric("nephele_node_lifecycle_safe_mode_rounds_total", map[string]string{"reason": SafeModeTooManyDeletions}); got < 1 {
			return fmt.Errorf("too-many-deletions rounds = %v", got)
		}
		return nil
	})
	h.waitRounds(3 * int(grace/period))
	if got := h.count(); got != 20 {
		t.Fatalf("%d nodes left in safe mode, want 20", got)
	}
	if got := h.metric("nephele_node_lifecycle_safe_mode", nil); got != 1 {
		t.Errorf("safe mode gauge = %v, want 1", got)
	}
	h.eventually("safe-mode events on the three nodes", func() error {
		if got := h.events(EventNodeDeletionSafeMode); !slices.Equal(got, []string{"gone0", "gone1", "gone2"}) {
			return fmt.Errorf("safe-mode events on %v", got)
		}
		return nil
	})

	// One instance comes back: two deletions are within the threshold.
	h.addInstance("gone0", cloud.InstanceRunning)
	h.eventually("the two gone nodes deleted", func() error {
		_, ok1 := h.get("gone1")
		_, ok2 := h.get("gone2")
		if ok1 || ok2 {
			return fmt.Errorf("gone1 exists=%v gone2 exists=%v", ok1, ok2)
		}
		return nil
	})
	if _, ok := h.get("gone0"); !ok {
		t.Error("the node whose instance came back was deleted")
	}
	h.eventually("safe mode left", func() error {
		if got := h.metric("nephele_node_lifecycle_safe_mode", nil); got != 0 {
			return fmt.Errorf("safe mode gauge = %v", got)
		}
		return nil
	})
}

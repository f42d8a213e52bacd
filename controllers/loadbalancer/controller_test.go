package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/internal/testkit/controllertest"
	"github.com/nephele-dev/nephele/internal/testkit/metrictest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/manager"
	"github.com/nephele-dev/nephele/manager/instrumented"
)

func TestLifecycle(t *testing.T) {
	h := newHarness(t, nil, newNode("n2"), newNode("n1"))
	// The finalizer must be on the Service before anything exists in the cloud.
	var mu sync.Mutex
	var violations []string
	h.cloud.SetHook(func(ctx context.Context, op cloud.Operation, subject string) error {
		if op != cloud.OpEnsureLoadBalancer {
			return nil
		}
		svc, err := h.client.CoreV1().Services("ns").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || !hasFinalizer(svc) {
			mu.Lock()
			violations = append(violations, fmt.Sprintf("ensure of %s without the finalizer (err %v)", subject, err))
			mu.Unlock()
		}
		return nil
	})

	svc := h.waitIngress("ns", h.createService(newService("ns", "web")).Name)
	if !hasFinalizer(svc) {
		t.Fatalf("finalizers %v, want %s", svc.Finalizers, Finalizer)
	}
	mu.Lock()
	if len(violations) > 0 {
		t.Fatal(violations)
	}
	mu.Unlock()
	name := LoadBalancerName(svc)
	h.waitBackends(name, "n1", "n2")
	lb, _ := h.cloud.LoadBalancer(name)
	if lb.Spec.ClusterName != "unit" || lb.Spec.Service.Name != "web" || lb.Spec.Ports[0].NodePort != 30080 {
		t.Errorf("spec given to the cloud: %+v", lb.Spec)
	}
	poll.Eventually(t, "events", func() error {
		if got := h.events.Reasons("ns/web"); !slices.Contains(got, EventEnsuredLoadBalancer) || got[0] != EventEnsuringLoadBalancer {
			return fmt.Errorf("events %v", got)
		}
		return nil
	})

	// Deleting: the apiserver keeps a Service with finalizers and sets its deletion
	// timestamp; the fake clientset needs that done by hand.
	svc = h.getService("ns", "web")
	svc.DeletionTimestamp = deletedAt()
	h.updateService(svc)
	poll.Eventually(t, "cleanup", func() error {
		svc := h.getService("ns", "web")
		if _, ok := h.cloud.LoadBalancer(name); ok {
			return errors.New("load balancer still in the cloud")
		}
		if hasFinalizer(svc) {
			return errors.New("finalizer still there")
		}
		return nil
	})
	got := h.events.Reasons("ns/web")
	if i, j := slices.Index(got, EventDeletingLoadBalancer), slices.Index(got, EventDeletedLoadBalancer); i < 0 || j < i {
		t.Errorf("events %v, want %s then %s", got, EventDeletingLoadBalancer, EventDeletedLoadBalancer)
	}
	// The cloud delete came before the finalizer went: the finalizer went only after
	// a successful delete call, which the call log shows finished.
	if h.cloud.CallsWithResult(cloud.OpEnsureLoadBalancerDeleted, cloud.ResultSuccess) != 1 {
		t.Errorf("delete calls: %v", h.cloud.CallLog())
	}
	poll.Eventually(t, "state dropped", func() error {
		if h.ctrl.hasState("ns/web") {
			return errors.New("state for ns/web kept")
		}
		return nil
	})
}

func TestTypeChangeCleansUp(t *testing.T) {
	tests := []struct {
		name   string
		change func(*corev1.Service)
		// theirs is whether the finalizer and status belong to someone else afterwards.
		theirs bool
	}{
		{name: "to ClusterIP", change: func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }},
		// What the apiserver shows of LoadBalancer -> ClusterIP -> LoadBalancer of
		// another class when the controller sees only the last: the finalizer and the
		// status are the other class's now (see movedAway).
		{name: "to another class", change: func(s *corev1.Service) { c := "example.com/other"; s.Spec.LoadBalancerClass = &c }, theirs: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil, newNode("n1"))
			svc := h.waitIngress("ns", h.createService(newService("ns", "web")).Name)
			if !annotatedFor(svc, "") {
				t.Fatalf("annotations %v, want %s naming the default class", svc.Annotations, ClassAnnotation)
			}
			tt.change(svc)
			h.updateService(svc)
			poll.Eventually(t, "cleanup", func() error {
				svc := h.getService("ns", "web")
				_, annotated := svc.Annotations[ClassAnnotation]
				switch {
				case h.cloud.Calls(cloud.OpEnsureLoadBalancerDeleted) == 0:
					return errors.New("no delete call")
				case len(h.cloud.AllLoadBalancers()) != 0:
					return errors.New("load balancer still in the cloud")
				case annotated:
					return errors.New("annotation still there")
				case hasFinalizer(svc) != tt.theirs:
					return fmt.Errorf("finalizers %v", svc.Finalizers)
				case (len(svc.Status.LoadBalancer.Ingress) != 0) != tt.theirs:
					return fmt.Errorf("status %+v", svc.Status.LoadBalancer)
				case h.ctrl.hasState("ns/web"):
					return errors.New("state kept")
				}
				return nil
			})
		})
	}
}

func TestClassFiltering(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.LoadBalancerClass = "example.com/ours" }, newNode("n1"))
	h.createService(newService("ns", "plain"))
	h.createService(newService("ns", "other", withClass("example.com/other")))
	ours := h.waitIngress("ns", h.createService(newService("ns", "ours", withClass("example.com/ours"))).Name)
	h.quiesce()
	if lbs := h.cloud.AllLoadBalancers(); len(lbs) != 1 || lbs[0].Name != LoadBalancerName(ours) {
		t.Fatalf("load balancers %v, want only the one for ns/ours", lbs)
	}
	for _, n := range []string{"plain", "other"} {
		if svc := h.getService("ns", n); hasFinalizer(svc) || len(svc.Status.LoadBalancer.Ingress) > 0 {
			t.Errorf("ns/%s was touched: %+v", n, svc)
		}
	}
}

func TestNewLoadBalancersGoBeforeBackendUpdates(t *testing.T) {
	// One worker, so that the order of the cloud calls is the queue's order.
	h := newHarness(t, func(c *Config) { c.Workers = 1 }, newNode("n1"))
	for i := range 4 {
		h.waitIngress("ns", h.createService(newService("ns", fmt.Sprintf("old-%d", i))).Name)
	}
	h.quiesce()
	h.cloud.ResetCalls()

	// A node joins: four backend updates are queued; the first one hangs and holds the
	// worker while a new Service arrives behind the other three.
	h.cloud.Hang(cloud.OpUpdateLoadBalancerBackends, "")
	h.createNode(newNode("n2"))
	poll.Eventually(t, "the first backend update in flight", func() error {
		if h.cloud.InFlight() == 0 {
			return errors.New("no call in flight")
		}
		return nil
	})
	h.createService(newService("ns", "new"))
	poll.Eventually(t, "the new Service queued", func() error {
		if h.ctrl.worker.Len() < 4 {
			return fmt.Errorf("%d keys queued, want the three other updates and the new Service", h.ctrl.worker.Len())
		}
		return nil
	})
	h.cloud.Unhang(cloud.OpUpdateLoadBalancerBackends, "")
	h.waitIngress("ns", "new")
	h.quiesce()

	var order []cloud.Operation
	for _, c := range h.cloud.CallLog() {
		if c.Op == cloud.OpEnsureLoadBalancer || c.Op == cloud.OpUpdateLoadBalancerBackends {
			order = append(order, c.Op)
		}
	}
	want := []cloud.Operation{cloud.OpUpdateLoadBalancerBackends, cloud.OpEnsureLoadBalancer,
		cloud.OpUpdateLoadBalancerBackends, cloud.OpUpdateLoadBalancerBackends, cloud.OpUpdateLoadBalancerBackends}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("cloud calls in order %v, want the new load balancer's ensure right after the update in flight: %v", order, want)
	}
}

func TestNodeChangesUpdateBackendsOnly(t *testing.T) {
	// The production window: the burst below is seven creates, which on a loaded
	// machine may pause for longer than the harness's 100ms between two of them, and
	// would then count as two bursts.
	h := newHarness(t, func(c *Config) { c.NodeBatchWindow = time.Second }, newNode("n1"))
	var names []string
	for i := range 3 {
		svc := h.waitIngress("ns", h.createService(newService("ns", fmt.Sprintf("web-%d", i))).Name)
		names = append(names, LoadBalancerName(svc))
	}
	h.quiesce()
	h.cloud.ResetCalls()

	// A burst of joins, an uninitialized node and an excluded node.
	for i := 2; i <= 6; i++ {
		h.createNode(newNode(fmt.Sprintf("n%d", i)))
	}
	h.createNode(newNode("new-uninit", withTaint(cloudproviderapi.TaintExternalCloudProvider)))
	h.createNode(newNode("new-excluded", withLabel(corev1.LabelNodeExcludeBalancers, "")))
	for _, n := range names {
		h.waitBackends(n, "n1", "n2", "n3", "n4", "n5", "n6")
	}
	h.quiesce()
	if n := h.cloud.Calls(cloud.OpEnsureLoadBalancer); n != 0 {
		t.Errorf("node joins cost %d EnsureLoadBalancer calls, want backend updates only", n)
	}
	for _, n := range names {
		lb, _ := h.cloud.LoadBalancer(n)
		if lb.BackendUpdates > 1 {
			t.Errorf("load balancer %s got %d backend updates for one burst, want 1: the batcher holds while the burst goes on", n, lb.BackendUpdates)
		}
	}
	if got := testutil.ToFloat64(h.ctrl.metrics.backendUpdates); got < 3 {
		t.Errorf("backend updates metric = %v, want >= 3", got)
	}
	// Upstream's names count the same backend updates, and time the batch as one node sync.
	for name, least := range map[string]float64{
		"service_controller_loadbalancer_sync_total":                  3,
		"service_controller_update_loadbalancer_host_latency_seconds": 3,
		"service_controller_nodesync_latency_seconds":                 1,
	} {
		if got := metrictest.Value(t, h.metrics, name, nil); got < least {
			t.Errorf("%s = %v, want at least %v", name, got, least)
		}
	}
	if got := metrictest.Value(t, h.metrics, "service_controller_nodesync_error_total", nil); got != 0 {
		t.Errorf("service_controller_nodesync_error_total = %v, want 0", got)
	}

	// Heartbeats and changes that do not matter cost nothing.
	h.cloud.ResetCalls()
	for i := 1; i <= 6; i++ {
		n, err := h.client.CoreV1().Nodes().Get(context.Background(), fmt.Sprintf("n%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
		n.Labels = map[string]string{"example.com/touched": "yes"}
		h.updateNode(n)
	}
	h.quiesce()
	if n := h.cloud.TotalCalls(); n != 0 {
		t.Errorf("heartbeats caused %d cloud calls: %v", n, h.cloud.CallLog())
	}

	// Initializing a node, excluding one, tainting one for the autoscaler (which keeps
	// it, KEP-3458) and deleting one.
	h.updateNode(newNode("new-uninit"))
	h.updateNode(newNode("n2", withLabel(corev1.LabelNodeExcludeBalancers, "")))
	h.updateNode(newNode("n3", withTaint(TaintToBeDeleted)))
	if err := h.client.CoreV1().Nodes().Delete(context.Background(), "n4", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		h.waitBackends(n, "n1", "n3", "n5", "n6", "new-uninit")
	}
	h.quiesce()
	if n := h.cloud.Calls(cloud.OpEnsureLoadBalancer); n != 0 {
		t.Errorf("node changes cost %d EnsureLoadBalancer calls", n)
	}
	poll.Eventually(t, "UpdatedLoadBalancer events", func() error {
		if len(h.events.Find("ns/web-0", EventUpdatedLoadBalancer)) == 0 {
			return errors.New("none")
		}
		return nil
	})
}

// TestAutoscalerTaintKeepsBackend follows KEP-3458 (StableLoadBalancerNodeSet): a node
// the cluster autoscaler is about to remove stays behind every load balancer until the
// Node is deleted, so its connections drain through the failing kube-proxy health check
// (KEP-3836) instead of being cut.
func TestAutoscalerTaintKeepsBackend(t *testing.T) {
	h := newHarness(t, nil, newNode("n1"), newNode("n2"))
	name := LoadBalancerName(h.waitIngress("ns", h.createService(newService("ns", "web")).Name))
	h.waitBackends(name, "n1", "n2")
	h.quiesce()
	h.cloud.ResetCalls()
	h.updateNode(newNode("n2", withTaint(TaintToBeDeleted)))
	h.quiesce()
	h.waitBackends(name, "n1", "n2")
	if n := h.cloud.TotalCalls(); n != 0 {
		t.Errorf("the taint cost %d cloud calls: %v", n, h.cloud.CallLog())
	}
	if err := h.client.CoreV1().Nodes().Delete(t.Context(), "n2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitBackends(name, "n1")
}

// TestBackendsOnlyOwnedNodes: this cloud's load balancers cannot reach another cloud's
// nodes (KEP-5778), so a node of another provider-ID scheme is never a backend, and
// becomes one no more than a heartbeat costs.
func TestBackendsOnlyOwnedNodes(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Ownership = cloud.NodeOwnership{Platforms: []string{"fake"}} },
		newNode("mine"), newNode("theirs", func(n *corev1.Node) { n.Spec.ProviderID = "aws:///eu-west-1a/i-0123" }))
	name := LoadBalancerName(h.waitIngress("ns", h.createService(newService("ns", "web")).Name))
	h.waitBackends(name, "mine")
	h.quiesce()
	h.cloud.ResetCalls()
	// A change a backend's hash sees (its address): for an owned node it would cost a
	// backend update.
	h.updateNode(newNode("theirs", withIP("10.9.9.9"), func(n *corev1.Node) { n.Spec.ProviderID = "aws:///eu-west-1a/i-0123" }))
	h.quiesce()
	if n := h.cloud.TotalCalls(); n != 0 {
		t.Errorf("a change to another cloud's node cost %d cloud calls: %v", n, h.cloud.CallLog())
	}
	h.waitBackends(name, "mine")
	if got := metrictest.Value(t, h.metrics, "nephele_node_ownership_skipped_total",
		map[string]string{"controller": manager.ServiceLBController, "reason": cloud.NotOwnedSchemeMismatch}); got != 1 {
		t.Errorf("skipped{scheme_mismatch} = %v, want 1", got)
	}
}

func TestNoBackendsWarns(t *testing.T) {
	h := newHarness(t, nil, newNode("uninit", withTaint(cloudproviderapi.TaintExternalCloudProvider)))
	h.waitIngress("ns", h.createService(newService("ns", "web")).Name)
	poll.Eventually(t, "warning", func() error {
		if len(h.events.Find("ns/web", EventUnAvailableLoadBalancer)) == 0 {
			return fmt.Errorf("no %s event: %v", EventUnAvailableLoadBalancer, h.events.Reasons("ns/web"))
		}
		return nil
	})
}

func TestBadSourceRange(t *testing.T) {
	h := newHarness(t, nil, newNode("n1"))
	bad := h.createService(newService("ns", "bad", withSourceRanges("10.0.0.0/8", "10.0.0.300/32")))
	h.waitIngress("ns", h.createService(newService("ns", "good")).Name)
	poll.Eventually(t, "warning", func() error {
		ev := h.events.Find("ns/bad", EventSyncLoadBalancerFailed)
		if len(ev) == 0 || ev[0].Type != corev1.EventTypeWarning {
			return fmt.Errorf("events %v", h.events.Reasons("ns/bad"))
		}
		return nil
	})
	h.quiesce()
	for _, c := range h.cloud.CallLog() {
		if c.Subject == LoadBalancerName(bad) {
			t.Errorf("cloud called for a Service with a bad source range: %+v", c)
		}
	}
	if got := h.syncErrors(reasonInvalidSpec); got < 1 {
		t.Errorf("invalid_spec errors = %v", got)
	}
	// Fixing the range gets it a load balancer.
	fixed := h.getService("ns", "bad")
	fixed.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"}
	h.updateService(fixed)
	h.waitIngress("ns", "bad")
}

func TestProviderInvalidIsRetriedAndIsolated(t *testing.T) {
	h := newHarness(t, nil, newNode("n1"))
	bad := newService("ns", "bad", withAnnotation("example.com/lb-size", "huge"))
	badName := LoadBalancerName(bad)
	h.cloud.SetHook(func(_ context.Context, op cloud.Operation, subject string) error {
		if subject == badName {
			return cloud.Invalidf(`annotation example.com/lb-size: "huge" is not one of small, large`)
		}
		return nil
	})
	h.createService(bad)
	h.waitIngress("ns", h.createService(newService("ns", "good")).Name)
	poll.Eventually(t, "warning and retries", func() error {
		ev := h.events.Find("ns/bad", EventSyncLoadBalancerFailed)
		if len(ev) == 0 || ev[0].Type != corev1.EventTypeWarning {
			return fmt.Errorf("events %v", h.events.Reasons("ns/bad"))
		}
		if !strings.Contains(ev[0].Message, "lb-size") {
			return errors.New("event does not name the problem: " + ev[0].Message)
		}
		if n := h.cloud.CallsWithResult(cloud.OpEnsureLoadBalancer, cloud.ResultInvalid); n < 3 {
			return fmt.Errorf("%d attempts, want retries with backoff", n)
		}
		return nil
	})
	if got := h.syncErrors(string(cloud.ResultInvalid)); got < 1 {
		t.Errorf("invalid errors = %v", got)
	}
	// Once the provider accepts it, it gets its load balancer.
	h.cloud.SetHook(nil)
	h.waitIngress("ns", "bad")
}

func TestThrottledUsesRetryAfter(t *testing.T) {
	// With a backoff of a minute, only Retry-After can bring the retry in time.
	h := newHarness(t, func(c *Config) { c.Retry.MinDelay, c.Retry.MaxDelay = time.Minute, time.Minute }, newNode("n1"))
	h.cloud.ThrottleNext(cloud.OpEnsureLoadBalancer, 1, 200*time.Millisecond)
	h.waitIngress("ns", h.createService(newService("ns", "web")).Name)
	if n := h.cloud.CallsWithResult(cloud.OpEnsureLoadBalancer, cloud.ResultThrottled); n != 1 {
		t.Errorf("throttled calls = %d, want 1", n)
	}
	if got := h.syncErrors(string(cloud.ResultThrottled)); got != 1 {
		t.Errorf("throttled errors = %v, want 1", got)
	}
}

func TestHungLoadBalancerDoesNotBlockOthers(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Workers = 2 }, newNode("n1"))
	slow := newService("ns", "slow")
	h.cloud.Hang(cloud.OpEnsureLoadBalancer, LoadBalancerName(slow))
	h.createService(slow)
	poll.Eventually(t, "hung call", func() error {
		if h.cloud.InFlight() == 0 {
			return errors.New("not in flight")
		}
		return nil
	})
	for i := range 5 {
		h.waitIngress("ns", h.createService(newService("ns", fmt.Sprintf("fast-%d", i))).Name)
	}
	// Node changes keep flowing to the others too.
	h.createNode(newNode("n2"))
	h.waitBackends(LoadBalancerName(h.getService("ns", "fast-0")), "n1", "n2")
	h.cloud.Unhang(cloud.OpEnsureLoadBalancer, LoadBalancerName(slow))
	h.waitIngress("ns", "slow")
}

func TestOrphanedLoadBalancerIsDeleted(t *testing.T) {
	h := newHarness(t, nil, newNode("n1"))
	svc := h.waitIngress("ns", h.createService(newService("ns", "web")).Name)
	poll.Eventually(t, "state", func() error {
		if !h.ctrl.hasState("ns/web") {
			return errors.New("no state")
		}
		return nil
	})
	// The fake clientset deletes at once, as if someone had removed the finalizer.
	if err := h.client.CoreV1().Services("ns").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "orphan deleted", func() error {
		if _, ok := h.cloud.LoadBalancer(LoadBalancerName(svc)); ok {
			return errors.New("load balancer still there")
		}
		if h.ctrl.hasState("ns/web") {
			return errors.New("state kept")
		}
		return nil
	})
}

func TestNoStateForGoneServices(t *testing.T) {
	h := newHarness(t, nil, newNode("n1"))
	const n = 10
	for i := range n {
		h.waitIngress("ns", h.createService(newService("ns", fmt.Sprintf("web-%d", i))).Name)
	}
	// One Service fails for a while so that the rate limiter tracks it too.
	h.cloud.FailNext(cloud.OpEnsureLoadBalancerDeleted, 2, errors.New("cloud API unavailable"))
	poll.Eventually(t, "managed gauge", func() error {
		if got := testutil.ToFloat64(h.ctrl.metrics.managed); got != n {
			return fmt.Errorf("gauge %v", got)
		}
		return nil
	})
	for i := range n {
		svc := h.getService("ns", fmt.Sprintf("web-%d", i))
		svc.DeletionTimestamp = deletedAt()
		h.updateService(svc)
	}
	poll.Eventually(t, "finalizers removed", func() error {
		for i := range n {
			if hasFinalizer(h.getService("ns", fmt.Sprintf("web-%d", i))) {
				return fmt.Errorf("web-%d keeps its finalizer", i)
			}
		}
		return nil
	})
	// The apiserver deletes the Services once their finalizers are gone.
	for i := range n {
		if err := h.client.CoreV1().Services("ns").Delete(context.Background(), fmt.Sprintf("web-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.quiesce()
	h.ctrl.mu.Lock()
	states := len(h.ctrl.states)
	h.ctrl.mu.Unlock()
	if states != 0 {
		t.Errorf("%d load balancer states kept for deleted Services", states)
	}
	for i := range n {
		if r := h.ctrl.worker.NumRequeues(fmt.Sprintf("ns/web-%d", i)); r != 0 {
			t.Errorf("rate limiter still tracks ns/web-%d (%d requeues)", i, r)
		}
	}
	if got := testutil.ToFloat64(h.ctrl.metrics.managed); got != 0 {
		t.Errorf("managed gauge = %v, want 0", got)
	}
	if len(h.cloud.AllLoadBalancers()) != 0 {
		t.Errorf("load balancers left: %v", h.cloud.AllLoadBalancers())
	}
}

func TestStatusRestoredWithoutCloudCall(t *testing.T) {
	h := newHarness(t, nil, newNode("n1"))
	h.waitIngress("ns", h.createService(newService("ns", "web")).Name)
	h.quiesce()
	h.cloud.ResetCalls()
	svc := h.getService("ns", "web")
	svc.Status.LoadBalancer = corev1.LoadBalancerStatus{}
	if _, err := h.client.CoreV1().Services("ns").UpdateStatus(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitIngress("ns", "web")
	if n := h.cloud.TotalCalls(); n != 0 {
		t.Errorf("restoring the status took %d cloud calls", n)
	}
}

func TestSpecChangeEnsuresAgain(t *testing.T) {
	h := newHarness(t, nil, newNode("n1"))
	svc := h.waitIngress("ns", h.createService(newService("ns", "web")).Name)
	h.quiesce()
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, NodePort: 30443})
	h.updateService(svc)
	poll.Eventually(t, "second port", func() error {
		lb, _ := h.cloud.LoadBalancer(LoadBalancerName(svc))
		if len(lb.Spec.Ports) != 2 {
			return fmt.Errorf("ports %+v", lb.Spec.Ports)
		}
		return nil
	})
}

// TestPortFieldChangesEnsureAgain changes what upstream's portEqualForLB compares beside
// the port numbers: each change must reach the provider in a new EnsureLoadBalancer.
func TestPortFieldChangesEnsureAgain(t *testing.T) {
	tests := []struct {
		name   string
		change svcOpt
		want   func(cloud.LoadBalancerPort) bool
	}{
		{"target port", withTargetPort(intstr.FromString("http-alt")),
			func(p cloud.LoadBalancerPort) bool { return p.TargetPort == intstr.FromString("http-alt") }},
		{"app protocol", withAppProtocol("kubernetes.io/h2c"),
			func(p cloud.LoadBalancerPort) bool { return p.AppProtocol == "kubernetes.io/h2c" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil, newNode("n1"))
			svc := h.waitIngress("ns", h.createService(newService("ns", "web")).Name)
			h.quiesce()
			lb, _ := h.cloud.LoadBalancer(LoadBalancerName(svc))
			before := lb.Ensures
			tt.change(svc)
			h.updateService(svc)
			poll.Eventually(t, "an ensure with the changed port", func() error {
				lb, _ := h.cloud.LoadBalancer(LoadBalancerName(svc))
				switch {
				case lb.Ensures == before:
					return fmt.Errorf("still %d ensures", lb.Ensures)
				case !tt.want(lb.Spec.Ports[0]):
					return fmt.Errorf("the provider got port %+v", lb.Spec.Ports[0])
				}
				return nil
			})
		})
	}
}

func TestUpdateBackendsNotFoundRecreates(t *testing.T) {
	h := newHarness(t, nil, newNode("n1"))
	svc := h.waitIngress("ns", h.createService(newService("ns", "web")).Name)
	h.quiesce()
	h.cloud.RemoveLoadBalancer(LoadBalancerName(svc))
	h.createNode(newNode("n2"))
	h.waitBackends(LoadBalancerName(svc), "n1", "n2")
	h.waitIngress("ns", "web")
}

func TestSpecDisabledWithoutLoadBalancers(t *testing.T) {
	fc, err := fakecloud.New(fakecloud.Options{Disabled: []fakecloud.Capability{fakecloud.CapLoadBalancers}})
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec()
	if spec.Name != "service-lb-controller" || !slices.Contains(spec.Aliases, "service") {
		t.Errorf("spec names %q %v", spec.Name, spec.Aliases)
	}
	_, err = spec.New(context.Background(), &manager.ControllerContext{Cloud: fc})
	if !errors.Is(err, manager.ErrControllerDisabled) {
		t.Errorf("New without load balancers: %v, want a disabled error", err)
	}
}

func TestSpecBuildsController(t *testing.T) {
	fc, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cc := controllertest.Context(manager.ServiceLBController, fc, manager.ControllerConfig{
		ClusterName:            "prod",
		ConcurrentServiceSyncs: 3,
		NodeBatchWindow:        5 * time.Second,
		LoadBalancerClass:      "example.com/x",
	})
	got, err := Spec().New(context.Background(), cc)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := got.(*Controller)
	if !ok {
		t.Fatalf("Spec().New returned %T", got)
	}
	if c.worker.Workers() != 3 || c.window != 5*time.Second || c.clusterName != "prod" || c.classes != newClasses("example.com/x", false) || c.health != cc.Health {
		t.Errorf("settings not taken from the context: workers %d, window %s, cluster %q, classes %+v", c.worker.Workers(), c.window, c.clusterName, c.classes)
	}
	c.worker.ShutDown()
	if _, err := Spec().New(context.Background(), &manager.ControllerContext{}); !errors.Is(err, manager.ErrControllerDisabled) {
		t.Errorf("New without a cloud: %v, want a disabled error", err)
	}
}

// fixedStatus is a provider that reports a status set by the test for every load
// balancer.
type fixedStatus struct {
	cloud.LoadBalancers
	mu     sync.Mutex
	status corev1.LoadBalancerStatus
}

func (f *fixedStatus) set(status corev1.LoadBalancerStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = status
}

func (f *fixedStatus) EnsureLoadBalancer(ctx context.Context, spec *cloud.LoadBalancerSpec, svc *corev1.Service) (*corev1.LoadBalancerStatus, error) {
	if _, err := f.LoadBalancers.EnsureLoadBalancer(ctx, spec, svc); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status.DeepCopy(), nil
}

func TestStatusIsWhatTheProviderReports(t *testing.T) {
	proxy := corev1.LoadBalancerIPModeProxy
	first := corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
		{IP: "198.51.100.7", IPMode: &proxy, Ports: []corev1.PortStatus{{Port: 80, Protocol: corev1.ProtocolTCP}}},
		{Hostname: "web.lb.example.com"},
	}}
	provider := &fixedStatus{status: first}
	h := newHarness(t, func(c *Config) {
		provider.LoadBalancers = c.LoadBalancers
		c.LoadBalancers = provider
	}, newNode("n1"))
	waitStatus := func(want corev1.LoadBalancerStatus) {
		t.Helper()
		poll.Eventually(t, "status", func() error {
			if got := h.getService("ns", "web").Status.LoadBalancer; !reflect.DeepEqual(got, want) {
				return fmt.Errorf("status %+v, want %+v", got, want)
			}
			return nil
		})
	}
	h.createService(newService("ns", "web"))
	waitStatus(first)

	// A provider that shrinks its answer shrinks the status: the ingress list is
	// replaced, not merged.
	second := corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{Hostname: "other.lb.example.com"}}}
	provider.set(second)
	svc := h.getService("ns", "web")
	svc.Annotations = map[string]string{"example.com/changed": "yes"}
	h.updateService(svc)
	waitStatus(second)
}

func TestOneOperationAtATimePerLoadBalancer(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.NodeBatchWindow = 10 * time.Millisecond }, newNode("n0"))
	var mu sync.Mutex
	inFlight, most := map[string]int{}, 0
	h.cloud.SetHook(func(ctx context.Context, op cloud.Operation, subject string) error {
		mu.Lock()
		inFlight[subject]++
		most = max(most, inFlight[subject])
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight[subject]--
			mu.Unlock()
		}()
		select { // long enough for node changes and Service edits to pile up
		case <-time.After(30 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	for i := range 3 {
		h.createService(newService("ns", fmt.Sprintf("web-%d", i)))
	}
	for i := 1; i <= 15; i++ {
		h.createNode(newNode(fmt.Sprintf("n%d", i)))
		svc := h.getService("ns", fmt.Sprintf("web-%d", i%3))
		svc.Annotations = map[string]string{"example.com/rev": fmt.Sprint(i)}
		h.updateService(svc)
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 3 {
		h.waitIngress("ns", fmt.Sprintf("web-%d", i))
	}
	h.quiesce()
	mu.Lock()
	defer mu.Unlock()
	if most != 1 {
		t.Errorf("up to %d cloud calls at once for one load balancer, want 1", most)
	}
}

// A provider answering "implemented elsewhere" (upstream's ImplementedElsewhere, which
// providers/upstream maps to cloud.ErrNotImplemented) owns nothing of the Service's load
// balancer: the controller leaves the Service alone quietly, as upstream's does, and
// lets its deletion through.
func TestImplementedElsewhere(t *testing.T) {
	h := newHarness(t, nil, newNode("n1"))
	elsewhere := fmt.Errorf("load balancer of ns/other is implemented by another controller: %w", cloud.ErrNotImplemented)
	otherLB := LoadBalancerName(newService("ns", "other"))
	h.cloud.SetHook(func(_ context.Context, op cloud.Operation, subject string) error {
		switch op {
		case cloud.OpEnsureLoadBalancer, cloud.OpUpdateLoadBalancerBackends, cloud.OpEnsureLoadBalancerDeleted:
			if subject == otherLB {
				return elsewhere
			}
		}
		return nil
	})
	// A Service served here beside it shows the controller at work meanwhile.
	h.waitIngress("ns", h.createService(newService("ns", "mine")).Name)
	h.createService(newService("ns", "other"))
	calls := func(op cloud.Operation) int { return h.cloud.CallsWithResult(op, cloud.ResultNotImplemented) }
	quiet := func(t *testing.T, wantEnsures int) {
		t.Helper()
		h.quiesce()
		if n := calls(cloud.OpEnsureLoadBalancer); n != wantEnsures {
			t.Errorf("EnsureLoadBalancer answered 'elsewhere' %d times, want %d (no retries)", n, wantEnsures)
		}
		if n := h.cloud.Calls(cloud.OpUpdateLoadBalancerBackends); n != 0 {
			t.Errorf("%d backend updates for load balancers, want none", n)
		}
		for _, reason := range []string{EventSyncLoadBalancerFailed, EventUpdateLoadBalancerFailed, EventDeleteLoadBalancerFailed} {
			if evs := h.events.Find("ns/other", reason); len(evs) > 0 {
				t.Errorf("%d %s events for a Service implemented elsewhere: %v", len(evs), reason, evs)
			}
		}
		if got := h.syncErrors(string(cloud.ResultNotImplemented)); got != 0 {
			t.Errorf("sync errors counted for 'elsewhere': %v", got)
		}
	}

	t.Run("ensure", func(t *testing.T) {
		quiet(t, 1)
		svc := h.getService("ns", "other")
		if !hasFinalizer(svc) {
			t.Errorf("finalizers %v: the finalizer must go on before the provider is asked", svc.Finalizers)
		}
		if len(svc.Status.LoadBalancer.Ingress) > 0 {
			t.Errorf("status %+v written for a load balancer this controller does not own", svc.Status.LoadBalancer)
		}
	})

	t.Run("update", func(t *testing.T) {
		// Node changes update backends of the controller's own load balancers only.
		h.createNode(newNode("n2"))
		h.waitBackends(LoadBalancerName(h.getService("ns", "mine")), "n1", "n2")
		h.cloud.ResetCalls()
		quiet(t, 0)
		// A spec change asks the provider again; it still says elsewhere, once.
		svc := h.getService("ns", "other")
		svc.Spec.Ports[0].Port = 8080
		h.updateService(svc)
		poll.Eventually(t, "ensure after the spec change", func() error {
			if n := calls(cloud.OpEnsureLoadBalancer); n != 1 {
				return fmt.Errorf("%d ensures", n)
			}
			return nil
		})
		quiet(t, 1)
		h.cloud.ResetCalls()
	})

	t.Run("delete", func(t *testing.T) {
		svc := h.getService("ns", "other")
		svc.DeletionTimestamp = deletedAt()
		h.updateService(svc)
		poll.Eventually(t, "finalizer removed", func() error {
			if hasFinalizer(h.getService("ns", "other")) {
				return errors.New("finalizer still there")
			}
			return nil
		})
		if n := calls(cloud.OpEnsureLoadBalancerDeleted); n != 1 {
			t.Errorf("EnsureLoadBalancerDeleted answered 'elsewhere' %d times, want 1", n)
		}
		quiet(t, 0)
		poll.Eventually(t, "state dropped", func() error {
			if h.ctrl.hasState("ns/other") {
				return errors.New("state kept")
			}
			return nil
		})
	})
}

// A cloud asking to wait a day holds load balancer work only for the call path's cap.
func TestRetryAfterOfADayIsCapped(t *testing.T) {
	const limit = 300 * time.Millisecond
	var fc *fakecloud.Cloud
	h := newHarness(t, func(c *Config) {
		// With a backoff of an hour, only the capped Retry-After brings the retry in time.
		c.Retry.MinDelay, c.Retry.MaxDelay = time.Hour, time.Hour
		fc = c.LoadBalancers.(*fakecloud.Cloud)
		ic, err := instrumented.New(fc, instrumented.Options{MaxRetryAfter: limit})
		if err != nil {
			t.Fatal(err)
		}
		c.LoadBalancers, _ = ic.For(manager.ServiceLBController).LoadBalancers()
	}, newNode("n1"))
	fc.ThrottleNext(cloud.OpEnsureLoadBalancer, 1, 24*time.Hour)
	start := time.Now()
	h.waitIngress("ns", h.createService(newService("ns", "web")).Name)
	if d := time.Since(start); d < limit {
		t.Errorf("served after %v, before the %v cap: the throttled answer was not waited out", d, limit)
	}
	if n := fc.CallsWithResult(cloud.OpEnsureLoadBalancer, cloud.ResultThrottled); n != 1 {
		t.Errorf("throttled calls = %d, want 1", n)
	}
}

// TestBatcherHoldsWhileChangesGoOn: node changes that keep coming less than a window
// apart are held together, up to holdMax; then the load balancers are queued once.
func TestBatcherHoldsWhileChangesGoOn(t *testing.T) {
	const window, gap = time.Second, 100 * time.Millisecond
	tests := []struct {
		name    string
		changes int  // after the first, gap apart
		endsIn  bool // the hold ends while the changes still come
	}{
		{"a burst with short pauses is one batch", 5, false},
		{"a trickle ends the hold at holdMax", 50, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Controller{window: window, holdMax: 3 * window, nodesChanged: make(chan struct{}, 1)}
			done := make(chan struct{})
			go func() {
				defer close(done)
				c.hold(t.Context())
			}()
			tick := time.NewTicker(gap)
			defer tick.Stop()
			endedEarly := false
			for range tt.changes {
				select {
				case <-done:
					endedEarly = true
				case <-tick.C:
					c.signalNodes()
				}
				if endedEarly {
					break
				}
			}
			// The hold's own timers bound it; the test's timeout catches one that does not.
			<-done
			if endedEarly != tt.endsIn {
				t.Errorf("the hold ended while changes came: %t, want %t", endedEarly, tt.endsIn)
			}
		})
	}
}

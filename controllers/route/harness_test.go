package route

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/controllers/worker"
	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/testkit/metrictest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/manager"
	"github.com/nephele-dev/nephele/manager/instrumented"
)

// One control plane serves every integration test of the package; it starts on first use.
var shared = testenv.Shared{}

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// controlPlane returns the shared control plane, starting it on first use. A missing
// binary fails the test: integration tests never skip.
func controlPlane(t *testing.T) *controlplane.Env { return shared.Env(t) }

const (
	testLabel   = "nephele.dev/route-test"
	testCluster = "kubernetes"
)

var testClusterCIDRs = prefixes("10.244.0.0/16", "fd00:10:244::/56")

// harness is one controller running against a client (the real control plane or a
// fake) and its own fake cloud. It sees only the Nodes it created, through a label, so
// tests sharing a control plane do not see each other's nodes.
type harness struct {
	t        *testing.T
	id       string
	client   kubernetes.Interface
	cloud    *fakecloud.Cloud
	ctrl     *Controller
	registry *prometheus.Registry
}

type harnessOptions struct {
	period  time.Duration
	workers int
	// maxRetryAfter caps the cloud's Retry-After; zero is the call path's default.
	maxRetryAfter time.Duration
	// seed prepares the cloud before the controller starts.
	seed func(c *fakecloud.Cloud)
	// ownership decides the nodes the controller routes; zero owns every node.
	ownership cloud.NodeOwnership
}

func startHarness(t *testing.T, client kubernetes.Interface, opts harnessOptions) *harness {
	t.Helper()
	scope := testenv.NewScope(t, client, testLabel)
	fc, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if opts.seed != nil {
		opts.seed(fc)
	}
	factory := scope.Informers
	recorder := scope.Recorder("node-route-controller")

	h := &harness{t: t, id: scope.ID, client: client, cloud: fc, registry: prometheus.NewRegistry()}
	// The controller calls the cloud through the manager's call path, as in production:
	// it alone waits out Retry-After (capped), counts and times the calls.
	ic, err := instrumented.New(fc, instrumented.Options{MaxRetryAfter: opts.maxRetryAfter, Registerer: h.registry})
	if err != nil {
		t.Fatal(err)
	}
	routes, _ := ic.For(manager.NodeRouteController).Routes()
	h.ctrl, err = New(Config{
		ControllerDeps: manager.ControllerDeps{
			Client:    client,
			Informers: factory,
			Recorder:  recorder,
			Logger:    testlog.New(t, 2),
			Metrics:   h.registry,
		},
		Routes:               routes,
		ClusterName:          testCluster,
		ClusterCIDRs:         testClusterCIDRs,
		ConcurrentRouteSyncs: opts.workers,
		ReconcilePeriod:      opts.period,
		Retry:                worker.Retry{MinDelay: 20 * time.Millisecond, MaxDelay: time.Second},
		ErrorRelistInterval:  100 * time.Millisecond,
		Ownership:            opts.ownership,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- h.ctrl.Run(ctx) }()
	// Runs before the scope's cleanup, which stops the informers and deletes the nodes.
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return h
}

// node returns a Node of this harness with the given pod CIDRs.
func (h *harness) node(name string, cidrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: h.id + "-" + name, Labels: map[string]string{testLabel: h.id}}}
	n.Spec.PodCIDRs = cidrs
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
	}
	return n
}

func (h *harness) createNode(name string, cidrs ...string) *corev1.Node {
	h.t.Helper()
	n, err := h.client.CoreV1().Nodes().Create(h.t.Context(), h.node(name, cidrs...), metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("creating node %s: %v", name, err)
	}
	return n
}

// createNumbered creates n nodes, "n000" with pod CIDR 10.244.0.0/24 and so on, and
// returns them with the routes they should get.
func (h *harness) createNumbered(n int) (nodes []*corev1.Node, routes []string) {
	h.t.Helper()
	for i := range n {
		cidr := fmt.Sprintf("10.244.%d.0/24", i)
		node := h.createNode(fmt.Sprintf("n%03d", i), cidr)
		nodes = append(nodes, node)
		routes = append(routes, routeOf(node, cidr))
	}
	return nodes, routes
}

// createNodeWithAddresses creates a node with the given pod CIDRs and InternalIPs, as a
// kubelet registers it: status included.
func (h *harness) createNodeWithAddresses(name string, ips []string, cidrs ...string) *corev1.Node {
	h.t.Helper()
	n := h.node(name, cidrs...)
	n.Status.Addresses = internalIPs(ips...)
	n, err := h.client.CoreV1().Nodes().Create(h.t.Context(), n, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("creating node %s: %v", name, err)
	}
	return n
}

// setAddresses replaces the node's status addresses with InternalIPs.
func (h *harness) setAddresses(node *corev1.Node, ips ...string) {
	h.t.Helper()
	n, err := h.client.CoreV1().Nodes().Get(h.t.Context(), node.Name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	n.Status.Addresses = internalIPs(ips...)
	if _, err := h.client.CoreV1().Nodes().UpdateStatus(h.t.Context(), n, metav1.UpdateOptions{}); err != nil {
		h.t.Fatalf("setting the addresses of node %s: %v", node.Name, err)
	}
}

func internalIPs(ips ...string) []corev1.NodeAddress {
	out := make([]corev1.NodeAddress, 0, len(ips))
	for _, ip := range ips {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return out
}

func (h *harness) deleteNode(node *corev1.Node) {
	h.t.Helper()
	if err := h.client.CoreV1().Nodes().Delete(h.t.Context(), node.Name, metav1.DeleteOptions{}); err != nil {
		h.t.Fatalf("deleting node %s: %v", node.Name, err)
	}
}

// routes returns the cloud's routes as "target cidr" strings, blackholes marked.
func (h *harness) routes() []string {
	var out []string
	for _, r := range h.cloud.AllRoutes(testCluster) {
		s := r.TargetNode + " " + r.DestinationCIDR.String()
		if r.Blackhole {
			s += " blackhole"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// want returns the route strings for a node's CIDRs.
func want(pairs ...string) []string {
	out := slices.Clone(pairs)
	slices.Sort(out)
	return out
}

func routeOf(n *corev1.Node, cidr string) string { return n.Name + " " + cidr }

func (h *harness) waitRoutes(wantRoutes []string) {
	h.t.Helper()
	poll.Eventually(h.t, "routes "+strings.Join(wantRoutes, ", "), func() error {
		if got := h.routes(); !slices.Equal(got, wantRoutes) {
			return fmt.Errorf("routes = %q", got)
		}
		return nil
	})
}

// waitCondition waits until the node's NetworkUnavailable condition has status and reason.
func (h *harness) waitCondition(node *corev1.Node, status corev1.ConditionStatus, reason string) corev1.NodeCondition {
	h.t.Helper()
	var got corev1.NodeCondition
	poll.Eventually(h.t, fmt.Sprintf("node %s NetworkUnavailable=%s/%s", node.Name, status, reason), func() error {
		n, err := h.client.CoreV1().Nodes().Get(h.t.Context(), node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := networkCondition(n)
		if c == nil {
			return errors.New("no NetworkUnavailable condition")
		}
		got = *c
		if c.Status != status || c.Reason != reason {
			return fmt.Errorf("condition = %s/%s %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	return got
}

// waitEvent waits for an Event with reason on the node.
func (h *harness) waitEvent(node *corev1.Node, reason string) corev1.Event {
	h.t.Helper()
	var ev corev1.Event
	poll.Eventually(h.t, fmt.Sprintf("event %s on node %s", reason, node.Name), func() error {
		list, err := h.client.CoreV1().Events(metav1.NamespaceAll).List(h.t.Context(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node.Name,
		})
		if err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == reason {
				ev = e
				return nil
			}
		}
		return fmt.Errorf("%d events, none with reason %s", len(list.Items), reason)
	})
	return ev
}

// counter returns the value of a counter of the harness's registry with the labels.
func (h *harness) counter(name string, labels map[string]string) float64 {
	h.t.Helper()
	return metrictest.Value(h.t, h.registry, name, labels)
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// equalOrEmpty reports whether a and b are deeply equal or both empty: routes hold
// slices, so they compare with reflect rather than ==.
func equalOrEmpty[T any](a, b []T) bool {
	return (len(a) == 0 && len(b) == 0) || reflect.DeepEqual(a, b)
}

// errInjected is a cloud failure that is neither NotFound nor throttling.
var errInjected = fmt.Errorf("HTTP 500 from the cloud API: %w", fakecloud.ErrInjected)

var _ cloud.Routes = (*fakecloud.Cloud)(nil)

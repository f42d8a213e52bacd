package nodeinit

import (
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
	"github.com/nephele-dev/nephele/controllers/ownership"
	"github.com/nephele-dev/nephele/controllers/taints"
	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/testkit/nodetest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/manager"
)

// The integration tests run the controller against a real kube-apiserver with kwok
// managing every Node (so nodes turn Ready and heartbeat, as with real kubelets), and a
// fake cloud. One control plane serves the package; it starts on first use.
var shared = testenv.Shared{Options: controlplane.Options{Kwok: true}}

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// controlPlane returns the shared control plane. A missing binary fails the test:
// integration tests never skip.
func controlPlane(t *testing.T) *controlplane.Env { return shared.Env(t) }

const testLabel = "nephele.dev/nodeinit-test"

// harness is a controller running against the real control plane with its own fake
// cloud (a nodetest.Cluster). Its informer sees only the Nodes it created (by label), so
// tests sharing the control plane do not see each other's nodes.
type harness struct {
	*nodetest.Cluster
	t *testing.T
}

type harnessOptions struct {
	inventory bool
	workers   int
	refresh   time.Duration
	ownership cloud.NodeOwnership
}

func startHarness(t *testing.T, opts harnessOptions) *harness {
	t.Helper()
	c := nodetest.NewCluster(t, controlPlane(t).Client, testLabel)
	cfg := Config{
		ControllerDeps: manager.ControllerDeps{
			Client:    c.Client,
			Informers: c.Scope.Informers,
			Recorder:  c.Scope.Recorder(manager.CloudNodeController),
			Logger:    testlog.New(t, 2),
			Metrics:   c.Metrics,
		},
		Instances:             c.Cloud,
		Workers:               opts.workers,
		StatusUpdateFrequency: opts.refresh,
		Ownership:             opts.ownership,
	}
	if opts.inventory {
		cfg.Inventory = c.Inventory()
	}
	ctrl, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	c.Start(ctrl.Run)
	return &harness{Cluster: c, t: t}
}

// addInstance adds the instance behind node short to the fake cloud.
func (h *harness) addInstance(short string, addrs ...corev1.NodeAddress) cloud.Instance {
	h.t.Helper()
	inst := instance(h.Name(short), addrs...)
	inst.Labels = map[string]string{"example.com/pool": "blue", "kubernetes.io/evil": "x"}
	if err := h.Cloud.AddInstance(inst); err != nil {
		h.t.Fatal(err)
	}
	return inst
}

// register creates node short the way a kubelet with --cloud-provider=external does:
// tainted, no provider ID, and its own view of its addresses (which kwok then leaves
// alone).
func (h *harness) register(short string, mods ...func(*corev1.Node)) {
	h.t.Helper()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: h.Name(short), Labels: h.Labels()},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{internal("192.168.0.10"), hostname(h.Name(short))}},
	}
	for _, m := range mods {
		m(n)
	}
	if _, err := h.Client.CoreV1().Nodes().Create(h.t.Context(), n, metav1.CreateOptions{}); err != nil {
		h.t.Fatalf("registering node %s: %v", n.Name, err)
	}
}

func (h *harness) waitEvent(short, reason, contains string) {
	h.t.Helper()
	poll.Eventually(h.t, fmt.Sprintf("a %s event on %s naming %q", reason, short, contains), func() error {
		msgs := h.Events(reason)[short]
		for _, m := range msgs {
			if strings.Contains(m, contains) {
				return nil
			}
		}
		return fmt.Errorf("events: %v", msgs)
	})
}

func (h *harness) waitInitialized(short string) *corev1.Node {
	h.t.Helper()
	var n *corev1.Node
	poll.Eventually(h.t, "node "+short+" initialized", func() error {
		var err error
		n, err = h.Client.CoreV1().Nodes().Get(h.t.Context(), h.Name(short), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if taints.Has(n, cloudproviderapi.TaintExternalCloudProvider) {
			return fmt.Errorf("still tainted")
		}
		return nil
	})
	return n
}

func TestIntegrationInitialization(t *testing.T) {
	h := startHarness(t, harnessOptions{inventory: true})
	cloudAddrs := func(i int) []corev1.NodeAddress {
		return []corev1.NodeAddress{internal(fmt.Sprintf("10.1.%d.1", i)), internal(fmt.Sprintf("10.1.%d.2", i)), external(fmt.Sprintf("203.0.113.%d", i))}
	}
	h.addInstance("plain", cloudAddrs(1)...)
	h.addInstance("nodeip", cloudAddrs(2)...)
	h.addInstance("badip", cloudAddrs(3)...)
	h.register("plain")
	h.register("nodeip", withAnnotation(AnnotationProvidedNodeIP, "10.1.2.2"))
	h.register("badip", withAnnotation(AnnotationProvidedNodeIP, "10.1.3.9"))
	h.register("noinstance")

	check := func(short string, wantAddrs []corev1.NodeAddress) {
		t.Helper()
		n := h.waitInitialized(short)
		if n.Spec.ProviderID != "fake://"+n.Name {
			t.Errorf("%s: providerID = %q", short, n.Spec.ProviderID)
		}
		if !slices.Equal(n.Status.Addresses, wantAddrs) {
			t.Errorf("%s: addresses = %s, want %s", short, formatAddresses(n.Status.Addresses), formatAddresses(wantAddrs))
		}
		for k, v := range map[string]string{
			corev1.LabelTopologyZone: "zone-a", corev1.LabelTopologyRegion: "region-1", corev1.LabelInstanceTypeStable: "m.large",
			corev1.LabelFailureDomainBetaZone: "zone-a", corev1.LabelFailureDomainBetaRegion: "region-1", corev1.LabelInstanceType: "m.large",
			"example.com/pool": "blue",
		} {
			if n.Labels[k] != v {
				t.Errorf("%s: label %s = %q, want %q", short, k, n.Labels[k], v)
			}
		}
		if _, ok := n.Labels["kubernetes.io/evil"]; ok {
			t.Errorf("%s: a provider label in the kubernetes.io domain was set", short)
		}
		h.waitEvent(short, EventLabelRefused, "kubernetes.io/evil")
		h.waitEvent(short, EventSynced, "")
	}
	// The cloud has no hostname, so the kubelet's is kept.
	check("plain", append(cloudAddrs(1), hostname(h.Name("plain"))))
	check("nodeip", []corev1.NodeAddress{internal("10.1.2.2"), external("203.0.113.2"), hostname(h.Name("nodeip"))})

	h.waitEvent("badip", EventProvidedNodeIPInvalid, "10.1.3.9")
	h.waitEvent("noinstance", EventInstanceNotFound, "")
	// Retried, but as long as the cloud does not change they stay uninitialized.
	time.Sleep(2 * time.Second)
	for _, short := range []string{"badip", "noinstance"} {
		n := h.Node(short)
		if !taints.Has(n, cloudproviderapi.TaintExternalCloudProvider) || n.Spec.ProviderID != "" {
			t.Errorf("%s: taints %v providerID %q, want it left uninitialized", short, n.Spec.Taints, n.Spec.ProviderID)
		}
		if !slices.Equal(n.Status.Addresses, []corev1.NodeAddress{internal("192.168.0.10"), hostname(n.Name)}) {
			t.Errorf("%s: addresses changed to %s", short, formatAddresses(n.Status.Addresses))
		}
	}
	if got := h.Metric("nephele_node_initialization_pending", nil); got != 2 {
		t.Errorf("pending gauge = %v, want 2", got)
	}

	// The instance shows up: the retry initializes the node.
	h.addInstance("noinstance", cloudAddrs(4)...)
	check("noinstance", append(cloudAddrs(4), hostname(h.Name("noinstance"))))
	h.WaitMetric("nephele_node_initialization_duration_seconds", 3)
}

// TestIntegrationOwnership: in a hybrid cluster (--undeclared-nodes=ignore) the
// controller initializes only the nodes that declare its platform; another platform's
// node, one with another scheme's provider ID and an undeclared one keep their taint and
// get a NotOwned Event, even though the cloud has an instance of each name; a node
// declared later is initialized then.
func TestIntegrationOwnership(t *testing.T) {
	h := startHarness(t, harnessOptions{inventory: true, ownership: cloud.NodeOwnership{
		Platforms: []string{"fake"}, Undeclared: cloud.UndeclaredIgnore,
	}})
	for i, short := range []string{"mine", "theirs", "theirsid", "undeclared"} {
		h.addInstance(short, internal(fmt.Sprintf("10.2.%d.1", i)))
	}
	h.register("mine", withLabel(cloud.LabelNodePlatform, "fake"))
	h.register("theirs", withLabel(cloud.LabelPlatform, "aws"))
	h.register("theirsid", func(n *corev1.Node) { n.Spec.ProviderID = "aws:///eu-west-1a/i-0123" })
	h.register("undeclared")

	h.waitInitialized("mine")
	h.waitEvent("theirs", ownership.EventNotOwned, `declares platform "aws"`)
	h.waitEvent("theirsid", ownership.EventNotOwned, `scheme "aws"`)
	h.waitEvent("undeclared", ownership.EventNotOwned, "--undeclared-nodes=ignore")
	for _, short := range []string{"theirs", "theirsid", "undeclared"} {
		n := h.Node(short)
		if !taints.Has(n, cloudproviderapi.TaintExternalCloudProvider) || n.Labels[corev1.LabelTopologyZone] != "" {
			t.Errorf("%s: taints %v labels %v: a node the CCM does not own was touched", short, n.Spec.Taints, n.Labels)
		}
		if short != "theirsid" && n.Spec.ProviderID != "" {
			t.Errorf("%s: provider ID set to %q", short, n.Spec.ProviderID)
		}
	}
	if got := h.Metric("nephele_node_initialization_pending", nil); got != 0 {
		t.Errorf("pending gauge = %v, want 0: nodes the CCM does not own wait for another", got)
	}
	for reason, want := range map[string]float64{cloud.NotOwnedDeclared: 1, cloud.NotOwnedSchemeMismatch: 1, cloud.NotOwnedUndeclared: 1} {
		if got := h.Metric("nephele_node_ownership_skipped_total", map[string]string{"controller": manager.CloudNodeController, "reason": reason}); got != want {
			t.Errorf("skipped{%s} = %v, want %v", reason, got, want)
		}
	}

	// Declared later (an administrator labels it): initialized then.
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"fake"}}}`, cloud.LabelNodePlatform)
	if _, err := h.Client.CoreV1().Nodes().Patch(t.Context(), h.Name("undeclared"), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := h.waitInitialized("undeclared"); n.Spec.ProviderID != "fake://"+n.Name {
		t.Errorf("undeclared, once declared: provider ID %q", n.Spec.ProviderID)
	}
}

func TestIntegrationBurstOf50Nodes(t *testing.T) {
	h := startHarness(t, harnessOptions{inventory: true, workers: 4})
	const n = 50
	start := time.Now()
	for i := range n {
		short := fmt.Sprintf("n%02d", i)
		h.addInstance(short, internal(fmt.Sprintf("10.2.0.%d", i+1)))
		h.register(short)
	}
	// Listings are shared: at most one per listing gap (1s) while nodes keep joining, so
	// their number follows how long the burst took to register (about 2s idle, longer on
	// a loaded machine), never the number of nodes.
	spread := time.Since(start)
	maxLists := 3 + int(spread/DefaultListingGap)
	poll.Eventually(h.t, "every node initialized", func() error {
		list, err := h.Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{LabelSelector: h.Scope.Selector()})
		if err != nil {
			return err
		}
		pending := 0
		for _, node := range list.Items {
			if taints.Has(&node, cloudproviderapi.TaintExternalCloudProvider) {
				pending++
			}
		}
		if len(list.Items) != n || pending > 0 {
			return fmt.Errorf("%d nodes, %d still tainted", len(list.Items), pending)
		}
		return nil
	})
	lists, gets := h.Cloud.Calls(cloud.OpListInstances), h.Cloud.Calls(cloud.OpInstanceMetadata)
	t.Logf("a burst of %d nodes cost %d ListInstances and %d InstanceMetadata calls", n, lists, gets)
	if lists > maxLists || gets != 0 {
		t.Errorf("ListInstances = %d, InstanceMetadata = %d; want <= %d (the burst took %s to register) and 0", lists, gets, maxLists, spread.Round(time.Millisecond))
	}
	h.WaitMetric("nephele_node_initialization_duration_seconds", n)
}

func TestIntegrationAddressRefresh(t *testing.T) {
	h := startHarness(t, harnessOptions{inventory: true, refresh: 300 * time.Millisecond})
	h.addInstance("n1", internal("10.3.0.1"), external("203.0.113.30"))
	h.register("n1")
	h.waitInitialized("n1")

	// The cloud moves the node to a new internal IP: the refresh follows.
	if err := h.Cloud.UpdateInstance("fake://"+h.Name("n1"), func(i *cloud.Instance) {
		i.Addresses = []corev1.NodeAddress{internal("10.3.0.2"), external("203.0.113.30")}
	}); err != nil {
		t.Fatal(err)
	}
	want := []corev1.NodeAddress{internal("10.3.0.2"), external("203.0.113.30"), hostname(h.Name("n1"))}
	poll.Eventually(h.t, "addresses refreshed", func() error {
		if got := h.Node("n1").Status.Addresses; !slices.Equal(got, want) {
			return fmt.Errorf("addresses %s", formatAddresses(got))
		}
		return nil
	})

	// The cloud answers without the internal IP, then with nothing: both are refused.
	for _, bad := range [][]corev1.NodeAddress{{external("203.0.113.30")}, nil} {
		if err := h.Cloud.UpdateInstance("fake://"+h.Name("n1"), func(i *cloud.Instance) { i.Addresses = bad }); err != nil {
			t.Fatal(err)
		}
		before := h.Metric("nephele_cloud_node_errors_total", map[string]string{"reason": reasonPartialAddresses}) +
			h.Metric("nephele_cloud_node_errors_total", map[string]string{"reason": reasonNoAddresses})
		poll.Eventually(h.t, "the bad answer seen by a refresh", func() error {
			after := h.Metric("nephele_cloud_node_errors_total", map[string]string{"reason": reasonPartialAddresses}) +
				h.Metric("nephele_cloud_node_errors_total", map[string]string{"reason": reasonNoAddresses})
			if after < before+2 {
				return fmt.Errorf("refused answers: %v, want >= %v", after, before+2)
			}
			return nil
		})
		if got := h.Node("n1").Status.Addresses; !slices.Equal(got, want) {
			t.Errorf("after a bad answer %v, addresses = %s, want %s kept", bad, formatAddresses(got), formatAddresses(want))
		}
	}
	h.waitEvent("n1", EventAddressesNotUpdated, "lack the type(s) [InternalIP]")
	h.waitEvent("n1", EventAddressesNotUpdated, "no addresses")
}

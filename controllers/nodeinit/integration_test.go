package nodeinit

import (
	"context"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
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

// The integration tests run the controller against a real kube-apiserver with kwok
// managing every Node (so nodes turn Ready and heartbeat, as with real kubelets), and a
// fake cloud. One control plane serves the package; it starts on first use.
var shared = testenv.Shared{Options: controlplane.Options{Kwok: true}}

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// controlPlane returns the shared control plane. A missing binary fails the test:
// integration tests never skip.
func controlPlane(t *testing.T) *controlplane.Env { return shared.Env(t) }

const (
	testLabel    = "nephele.dev/nodeinit-test"
	pollTimeout  = 60 * time.Second
	pollInterval = 50 * time.Millisecond
)

// harness is a controller running against the real control plane with its own fake
// cloud. Its informer sees only the Nodes it created (by label), so tests sharing the
// control plane do not see each other's nodes.
type harness struct {
	t        *testing.T
	id       string
	client   kubernetes.Interface
	cloud    *fakecloud.Cloud
	registry *prometheus.Registry
}

type harnessOptions struct {
	inventory bool
	workers   int
	refresh   time.Duration
}

func startHarness(t *testing.T, opts harnessOptions) *harness {
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
		Client:                e.Client,
		Informers:             factory,
		Instances:             fc,
		Recorder:              scope.Recorder(manager.CloudNodeController),
		Logger:                testr.NewWithOptions(t, testr.Options{Verbosity: 2}),
		Metrics:               h.registry,
		Workers:               opts.workers,
		StatusUpdateFrequency: opts.refresh,
	}
	var wg sync.WaitGroup
	if opts.inventory {
		inv := inventory.New(fc)
		wg.Go(func() { inv.Run(ctx) })
		cfg.Inventory = inv
	}
	ctrl, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	factory.Start(ctx.Done())
	wg.Go(func() {
		if err := ctrl.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	// Runs before the scope's cleanup, which stops the informers and deletes the nodes.
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return h
}

// name returns the harness's name for a node.
func (h *harness) name(short string) string { return h.id + "-" + short }

// addInstance adds the instance behind node short to the fake cloud.
func (h *harness) addInstance(short string, addrs ...corev1.NodeAddress) cloud.Instance {
	h.t.Helper()
	inst := instance(h.name(short), addrs...)
	inst.Labels = map[string]string{"example.com/pool": "blue", "kubernetes.io/evil": "x"}
	if err := h.cloud.AddInstance(inst); err != nil {
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
		ObjectMeta: metav1.ObjectMeta{Name: h.name(short), Labels: map[string]string{testLabel: h.id}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{internal("192.168.0.10"), hostname(h.name(short))}},
	}
	for _, m := range mods {
		m(n)
	}
	if _, err := h.client.CoreV1().Nodes().Create(h.t.Context(), n, metav1.CreateOptions{}); err != nil {
		h.t.Fatalf("registering node %s: %v", n.Name, err)
	}
}

func (h *harness) get(short string) *corev1.Node {
	h.t.Helper()
	n, err := h.client.CoreV1().Nodes().Get(h.t.Context(), h.name(short), metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// eventually polls cond until it returns nil, failing the test with its last error.
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

// events returns the messages of the events with reason on node short.
func (h *harness) events(short, reason string) []string {
	h.t.Helper()
	list, err := h.client.CoreV1().Events(metav1.NamespaceDefault).List(h.t.Context(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": h.name(short), "reason": reason}.String(),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Message)
	}
	return out
}

func (h *harness) waitEvent(short, reason, contains string) {
	h.t.Helper()
	h.eventually(fmt.Sprintf("a %s event on %s naming %q", reason, short, contains), func() error {
		for _, m := range h.events(short, reason) {
			if strings.Contains(m, contains) {
				return nil
			}
		}
		return fmt.Errorf("events: %v", h.events(short, reason))
	})
}

func (h *harness) waitInitialized(short string) *corev1.Node {
	h.t.Helper()
	var n *corev1.Node
	h.eventually("node "+short+" initialized", func() error {
		var err error
		n, err = h.client.CoreV1().Nodes().Get(h.t.Context(), h.name(short), metav1.GetOptions{})
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

// waitMetric waits until the unlabelled series name reaches want: the API shows a node
// initialized a moment before its worker counts it.
func (h *harness) waitMetric(name string, want float64) {
	h.t.Helper()
	h.eventually(name, func() error {
		if got := h.metric(name, nil); got != want {
			return fmt.Errorf("%s = %v, want %v", name, got, want)
		}
		return nil
	})
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
	check("plain", append(cloudAddrs(1), hostname(h.name("plain"))))
	check("nodeip", []corev1.NodeAddress{internal("10.1.2.2"), external("203.0.113.2"), hostname(h.name("nodeip"))})

	h.waitEvent("badip", EventProvidedNodeIPInvalid, "10.1.3.9")
	h.waitEvent("noinstance", EventInstanceNotFound, "")
	// Retried, but as long as the cloud does not change they stay uninitialized.
	time.Sleep(2 * time.Second)
	for _, short := range []string{"badip", "noinstance"} {
		n := h.get(short)
		if !taints.Has(n, cloudproviderapi.TaintExternalCloudProvider) || n.Spec.ProviderID != "" {
			t.Errorf("%s: taints %v providerID %q, want it left uninitialized", short, n.Spec.Taints, n.Spec.ProviderID)
		}
		if !slices.Equal(n.Status.Addresses, []corev1.NodeAddress{internal("192.168.0.10"), hostname(n.Name)}) {
			t.Errorf("%s: addresses changed to %s", short, formatAddresses(n.Status.Addresses))
		}
	}
	if got := h.metric("nephele_node_initialization_pending", nil); got != 2 {
		t.Errorf("pending gauge = %v, want 2", got)
	}

	// The instance shows up: the retry initializes the node.
	h.addInstance("noinstance", cloudAddrs(4)...)
	check("noinstance", append(cloudAddrs(4), hostname(h.name("noinstance"))))
	h.waitMetric("nephele_node_initialization_duration_seconds", 3)
}

func TestIntegrationBurstOf50Nodes(t *testing.T) {
	h := startHarness(t, harnessOptions{inventory: true, workers: 4})
	const n = 50
	for i := range n {
		short := fmt.Sprintf("n%02d", i)
		h.addInstance(short, internal(fmt.Sprintf("10.2.0.%d", i+1)))
		h.register(short)
	}
	h.eventually("every node initialized", func() error {
		list, err := h.client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{LabelSelector: testLabel + "=" + h.id})
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
	lists, gets := h.cloud.Calls(cloud.OpListInstances), h.cloud.Calls(cloud.OpInstanceMetadata)
	t.Logf("a burst of %d nodes cost %d ListInstances and %d InstanceMetadata calls", n, lists, gets)
	if lists > 5 || gets != 0 {
		t.Errorf("ListInstances = %d, InstanceMetadata = %d; want <= 5 and 0", lists, gets)
	}
	h.waitMetric("nephele_node_initialization_duration_seconds", n)
}

func TestIntegrationAddressRefresh(t *testing.T) {
	h := startHarness(t, harnessOptions{inventory: true, refresh: 300 * time.Millisecond})
	h.addInstance("n1", internal("10.3.0.1"), external("203.0.113.30"))
	h.register("n1")
	h.waitInitialized("n1")

	// The cloud moves the node to a new internal IP: the refresh follows.
	if err := h.cloud.UpdateInstance("fake://"+h.name("n1"), func(i *cloud.Instance) {
		i.Addresses = []corev1.NodeAddress{internal("10.3.0.2"), external("203.0.113.30")}
	}); err != nil {
		t.Fatal(err)
	}
	want := []corev1.NodeAddress{internal("10.3.0.2"), external("203.0.113.30"), hostname(h.name("n1"))}
	h.eventually("addresses refreshed", func() error {
		if got := h.get("n1").Status.Addresses; !slices.Equal(got, want) {
			return fmt.Errorf("addresses %s", formatAddresses(got))
		}
		return nil
	})

	// The cloud answers without the internal IP, then with nothing: both are refused.
	for _, bad := range [][]corev1.NodeAddress{{external("203.0.113.30")}, nil} {
		if err := h.cloud.UpdateInstance("fake://"+h.name("n1"), func(i *cloud.Instance) { i.Addresses = bad }); err != nil {
			t.Fatal(err)
		}
		before := h.metric("nephele_cloud_node_errors_total", map[string]string{"reason": reasonPartialAddresses}) +
			h.metric("nephele_cloud_node_errors_total", map[string]string{"reason": reasonNoAddresses})
		h.eventually("the bad answer seen by a refresh", func() error {
			after := h.metric("nephele_cloud_node_errors_total", map[string]string{"reason": reasonPartialAddresses}) +
				h.metric("nephele_cloud_node_errors_total", map[string]string{"reason": reasonNoAddresses})
			if after < before+2 {
				return fmt.Errorf("refused answers: %v, want >= %v", after, before+2)
			}
			return nil
		})
		if got := h.get("n1").Status.Addresses; !slices.Equal(got, want) {
			t.Errorf("after a bad answer %v, addresses = %s, want %s kept", bad, formatAddresses(got), formatAddresses(want))
		}
	}
	h.waitEvent("n1", EventAddressesNotUpdated, "lack the type(s) [InternalIP]")
	h.waitEvent("n1", EventAddressesNotUpdated, "no addresses")
}

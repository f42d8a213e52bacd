package nodeinit

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/controllers/taints"
	"github.com/nephele-dev/nephele/internal/testkit/controllertest"
	"github.com/nephele-dev/nephele/internal/testkit/nodetest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/manager"
)

func TestInitialize(t *testing.T) {
	addrs := []corev1.NodeAddress{internal("10.0.0.1"), internal("10.0.0.2"), external("203.0.113.1"), hostname("vm-1")}
	otherTaint := corev1.Taint{Key: "example.com/dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name      string
		inventory bool
		node      *corev1.Node
		inst      *cloud.Instance // nil: the cloud has no instance
		fault     func(*fakecloud.Cloud)

		wantInit     bool
		wantAddrs    []corev1.NodeAddress
		wantLabels   map[string]string
		wantEvent    string // a Warning event reason expected on the node
		wantEventMsg string
		wantErr      string // metric reason counted
	}{
		{
			name:      "per-node lookup",
			node:      taintedNode("n1", func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, otherTaint) }),
			inst:      ptr(instance("n1", addrs...)),
			wantInit:  true,
			wantAddrs: addrs,
		},
		{
			name:      "from the inventory",
			inventory: true,
			node:      taintedNode("n1", func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, otherTaint) }),
			inst:      ptr(instance("n1", addrs...)),
			wantInit:  true,
			wantAddrs: addrs,
		},
		{
			name:      "provided node IP honoured",
			inventory: true,
			node:      taintedNode("n1", withAnnotation(AnnotationProvidedNodeIP, "10.0.0.2")),
			inst:      ptr(instance("n1", addrs...)),
			wantInit:  true,
			wantAddrs: []corev1.NodeAddress{internal("10.0.0.2"), external("203.0.113.1"), hostname("vm-1")},
		},
		{
			name:         "provided node IP missing from the cloud",
			inventory:    true,
			node:         taintedNode("n1", withAnnotation(AnnotationProvidedNodeIP, "10.0.0.9")),
			inst:         ptr(instance("n1", addrs...)),
			wantEvent:    EventProvidedNodeIPInvalid,
			wantEventMsg: "10.0.0.9",
			wantErr:      reasonProvidedNodeIP,
		},
		{
			name:      "provided dual-stack pair, one missing",
			node:      taintedNode("n1", withAnnotation(AnnotationProvidedNodeIP, "10.0.0.1,fd00::1")),
			inst:      ptr(instance("n1", addrs...)),
			wantEvent: EventProvidedNodeIPInvalid, wantEventMsg: "fd00::1",
			wantErr: reasonProvidedNodeIP,
		},
		{
			name:      "instance not found",
			node:      taintedNode("n1"),
			wantEvent: EventInstanceNotFound,
			wantErr:   reasonInstanceNotFound,
		},
		{
			name:      "instance not found with an inventory",
			inventory: true,
			node:      taintedNode("n1"),
			wantEvent: EventInstanceNotFound,
			wantErr:   reasonInstanceNotFound,
		},
		{
			name:      "cloud error",
			node:      taintedNode("n1"),
			inst:      ptr(instance("n1", addrs...)),
			fault:     func(c *fakecloud.Cloud) { c.SetError(cloud.OpInstanceMetadata, errors.New("HTTP 503")) },
			wantEvent: EventInitializationFailed,
			wantErr:   reasonCloudError,
		},
		{
			name:      "listing fails",
			inventory: true,
			node:      taintedNode("n1"),
			inst:      ptr(instance("n1", addrs...)),
			fault:     func(c *fakecloud.Cloud) { c.SetError(cloud.OpListInstances, errors.New("HTTP 500")) },
			wantEvent: EventInitializationFailed,
			wantErr:   reasonCloudError,
		},
		{
			name:      "no addresses",
			node:      taintedNode("n1"),
			inst:      ptr(instance("n1")),
			wantEvent: EventNoAddresses,
			wantErr:   reasonNoAddresses,
		},
		{
			name:         "refused provider labels",
			node:         taintedNode("n1"),
			inst:         ptr(withLabels(instance("n1", addrs...), "example.com/pool", "blue", "node-role.kubernetes.io/control-plane", "")),
			wantInit:     true,
			wantAddrs:    addrs,
			wantLabels:   map[string]string{"example.com/pool": "blue"},
			wantEvent:    EventLabelRefused,
			wantEventMsg: "node-role.kubernetes.io/control-plane",
			wantErr:      reasonLabelRefused,
		},
		{
			name:      "provider ID already set by the kubelet",
			node:      taintedNode("n1", func(n *corev1.Node) { n.Spec.ProviderID = "fake://n1" }),
			inst:      ptr(instance("n1", addrs...)),
			wantInit:  true,
			wantAddrs: addrs,
		},
		{
			name:      "the kubelet's hostname kept",
			node:      taintedNode("n1", func(n *corev1.Node) { n.Status.Addresses = []corev1.NodeAddress{hostname("n1.local")} }),
			inst:      ptr(instance("n1", internal("10.0.0.1"))),
			wantInit:  true,
			wantAddrs: []corev1.NodeAddress{internal("10.0.0.1"), hostname("n1.local")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var insts []cloud.Instance
			if tt.inst != nil {
				insts = append(insts, *tt.inst)
			}
			f := newFixture(t, fixtureOptions{inventory: tt.inventory}, insts, tt.node)
			if tt.fault != nil {
				tt.fault(f.Cloud)
			}
			f.Client.ClearActions()
			_, err := f.ctrl.initialize(t.Context(), "n1")
			got := f.Node(t, "n1")
			if tt.wantInit {
				if err != nil {
					t.Fatalf("initialize: %v", err)
				}
				assertInitialized(t, got, tt.node, tt.wantAddrs)
				for k, v := range tt.wantLabels {
					if got.Labels[k] != v {
						t.Errorf("label %s = %q, want %q", k, got.Labels[k], v)
					}
				}
				if len(f.Events.Find("n1", EventSynced)) != 1 {
					t.Errorf("want one %s event, got events:\n%s", EventSynced, f.Events)
				}
				if n := f.Metric(t, "nephele_node_initialization_duration_seconds", nil); n != 1 {
					t.Errorf("initialization duration observations = %v, want 1", n)
				}
				assertWriteOrder(t, f.Client.Actions(), !slices.Equal(tt.node.Status.Addresses, tt.wantAddrs))
			} else {
				if err == nil {
					t.Fatal("initialize succeeded, want an error")
				}
				if !taints.Has(got, cloudproviderapi.TaintExternalCloudProvider) {
					t.Error("the node lost its uninitialized taint")
				}
				if !slices.Equal(got.Status.Addresses, tt.node.Status.Addresses) {
					t.Errorf("addresses = %v, want them untouched", got.Status.Addresses)
				}
				if got.Spec.ProviderID != tt.node.Spec.ProviderID {
					t.Errorf("providerID = %q, want it untouched", got.Spec.ProviderID)
				}
			}
			if tt.wantEvent != "" {
				evs := f.Events.Find("n1", tt.wantEvent)
				if len(evs) == 0 {
					t.Fatalf("no %s event; events:\n%s", tt.wantEvent, f.Events)
				}
				if evs[0].Type != corev1.EventTypeWarning || !strings.Contains(evs[0].Message, tt.wantEventMsg) {
					t.Errorf("event %+v: want a Warning naming %q", evs[0], tt.wantEventMsg)
				}
			}
			if tt.wantErr != "" {
				if n := f.Metric(t, "nephele_cloud_node_errors_total", map[string]string{"reason": tt.wantErr}); n < 1 {
					t.Errorf("errors{reason=%s} = %v, want >= 1", tt.wantErr, n)
				}
			}
		})
	}
}

// assertInitialized checks what initialization writes.
func assertInitialized(t *testing.T, got, before *corev1.Node, wantAddrs []corev1.NodeAddress) {
	t.Helper()
	if taints.Has(got, cloudproviderapi.TaintExternalCloudProvider) {
		t.Error("the uninitialized taint is still there")
	}
	for _, taint := range before.Spec.Taints {
		if taint.Key != cloudproviderapi.TaintExternalCloudProvider && !taints.Has(got, taint.Key) {
			t.Errorf("taint %s was removed too", taint.Key)
		}
	}
	if got.Spec.ProviderID != "fake://"+got.Name {
		t.Errorf("providerID = %q, want fake://%s", got.Spec.ProviderID, got.Name)
	}
	if !slices.Equal(got.Status.Addresses, wantAddrs) {
		t.Errorf("addresses = %v, want %v", formatAddresses(got.Status.Addresses), formatAddresses(wantAddrs))
	}
	for k, v := range map[string]string{
		corev1.LabelTopologyZone:            "zone-a",
		corev1.LabelTopologyRegion:          "region-1",
		corev1.LabelInstanceTypeStable:      "m.large",
		corev1.LabelFailureDomainBetaZone:   "zone-a",
		corev1.LabelFailureDomainBetaRegion: "region-1",
		corev1.LabelInstanceType:            "m.large",
	} {
		if got.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, got.Labels[k], v)
		}
	}
}

// assertWriteOrder checks that initialization wrote the addresses (status) first and
// then removed the taint with one patch of the node.
func assertWriteOrder(t *testing.T, actions []clienttesting.Action, wantStatus bool) {
	t.Helper()
	want := []string{"patch:"}
	if wantStatus {
		want = []string{"patch:status", "patch:"}
	}
	if got := writes(actions); !slices.Equal(got, want) {
		t.Errorf("writes = %v, want %v", got, want)
	}
}

func TestInitializeSkipsInitializedAndMissingNodes(t *testing.T) {
	f := newFixture(t, fixtureOptions{}, []cloud.Instance{instance("n1", internal("10.0.0.1"))}, initializedNode("n1", internal("10.0.0.1")))
	f.Client.ClearActions()
	for _, name := range []string{"n1", "gone"} {
		if _, err := f.ctrl.initialize(t.Context(), name); err != nil {
			t.Errorf("initialize(%s): %v", name, err)
		}
	}
	if n := f.Cloud.TotalCalls(); n != 0 {
		t.Errorf("cloud calls = %d, want 0", n)
	}
	if w := writes(f.Client.Actions()); len(w) != 0 {
		t.Errorf("API writes = %v, want none", w)
	}
}

func TestInventoryMissFallsBackToOneLookup(t *testing.T) {
	// The node is older than the last listing, which lacks its instance: the
	// controller asks for it directly instead of trusting the absence.
	node := taintedNode("n1", func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Minute)) })
	f := newFixture(t, fixtureOptions{inventory: true}, nil, node)
	if err := f.ctrl.inventory.Sync(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Cloud.AddInstance(instance("n1", internal("10.0.0.1"))); err != nil {
		t.Fatal(err)
	}
	f.Cloud.ResetCalls()
	if _, err := f.ctrl.initialize(t.Context(), "n1"); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if got := f.Cloud.Calls(cloud.OpInstanceMetadata); got != 1 {
		t.Errorf("InstanceMetadata calls = %d, want 1", got)
	}
	if got := f.Cloud.Calls(cloud.OpListInstances); got != 0 {
		t.Errorf("ListInstances calls = %d, want 0 (the listing was newer than the node)", got)
	}
	assertInitialized(t, f.Node(t, "n1"), node, []corev1.NodeAddress{internal("10.0.0.1")})
}

func TestRunInitializesABurstWithFewListings(t *testing.T) {
	for _, tt := range []struct {
		name      string
		inventory bool
	}{{"inventory", true}, {"per node", false}} {
		t.Run(tt.name, func(t *testing.T) {
			const n = 50
			f := newFixture(t, fixtureOptions{inventory: tt.inventory, workers: 4}, nil)
			ctx := t.Context()
			f.run(t)
			// Machines boot and their kubelets register one after another, so early
			// listings lack the later instances.
			for i := range n {
				if err := f.Cloud.AddInstance(instance(fmt.Sprintf("n%02d", i), internal(fmt.Sprintf("10.0.1.%d", i)))); err != nil {
					t.Fatal(err)
				}
				if _, err := f.Client.CoreV1().Nodes().Create(ctx, taintedNode(fmt.Sprintf("n%02d", i)), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(2 * time.Millisecond)
			}
			for i := range n {
				f.WaitCached(t, fmt.Sprintf("n%02d", i), func(n *corev1.Node) bool {
					return n != nil && !taints.Has(n, cloudproviderapi.TaintExternalCloudProvider)
				})
			}
			lists, gets := f.Cloud.Calls(cloud.OpListInstances), f.Cloud.Calls(cloud.OpInstanceMetadata)
			t.Logf("ListInstances=%d InstanceMetadata=%d", lists, gets)
			if tt.inventory {
				if lists > 5 || gets != 0 {
					t.Errorf("a burst of %d nodes cost %d listings and %d lookups, want <= 5 and 0", n, lists, gets)
				}
			} else if lists != 0 || gets != n {
				t.Errorf("without an inventory: %d listings and %d lookups, want 0 and %d", lists, gets, n)
			}
			// The cache may show the last node untainted before its worker counts it.
			f.WaitMetric(t, "nephele_node_initialization_duration_seconds", n)
			if got := f.Metric(t, "nephele_node_initialization_pending", nil); got != 0 {
				t.Errorf("pending gauge = %v, want 0", got)
			}
		})
	}
}

func TestRunRetriesUntilTheInstanceAppears(t *testing.T) {
	f := newFixture(t, fixtureOptions{inventory: true}, nil, taintedNode("n1"))
	f.run(t)
	poll.Eventually(t, "an "+EventInstanceNotFound+" event", func() error {
		if len(f.Events.Find("n1", EventInstanceNotFound)) == 0 {
			return fmt.Errorf("events:\n%s", f.Events)
		}
		return nil
	})
	if got := f.Metric(t, "nephele_node_initialization_pending", nil); got != 1 {
		t.Errorf("pending gauge = %v, want 1", got)
	}
	if err := f.Cloud.AddInstance(instance("n1", internal("10.0.0.1"))); err != nil {
		t.Fatal(err)
	}
	f.WaitCached(t, "n1", func(n *corev1.Node) bool {
		return n != nil && !taints.Has(n, cloudproviderapi.TaintExternalCloudProvider)
	})
}

func TestPacer(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	p := &pacer{gap: time.Second}
	steps := []struct {
		name          string
		now, created  time.Time
		fail          bool // fail the listing this step requested or shares
		wantRequested time.Time
		wantWait      time.Duration
	}{
		{name: "first node requests at once", now: at(0), created: at(-time.Second), wantRequested: at(0)},
		{name: "node created before the request shares it", now: at(100 * time.Millisecond), created: at(-500 * time.Millisecond), wantRequested: at(0)},
		{name: "node created after the request waits out the gap", now: at(200 * time.Millisecond), created: at(150 * time.Millisecond), wantWait: 800 * time.Millisecond},
		{name: "after the gap a new request", now: at(time.Second), created: at(150 * time.Millisecond), wantRequested: at(time.Second)},
		{name: "later nodes share it", now: at(time.Second + time.Millisecond), created: at(900 * time.Millisecond), wantRequested: at(time.Second), fail: true},
		{name: "a failed listing is not shared", now: at(1500 * time.Millisecond), created: at(900 * time.Millisecond), wantWait: 500 * time.Millisecond},
		{name: "retried after the gap", now: at(2 * time.Second), created: at(900 * time.Millisecond), wantRequested: at(2 * time.Second)},
	}
	for _, s := range steps {
		requested, wait := p.schedule(s.now, s.created)
		if !requested.Equal(s.wantRequested) || wait != s.wantWait {
			t.Fatalf("%s: plan = %v, %v; want %v, %v", s.name, requested, wait, s.wantRequested, s.wantWait)
		}
		if s.fail {
			p.fail(requested)
		}
	}
}

// writes returns the write actions as verb:subresource.
func writes(actions []clienttesting.Action) []string {
	var out []string
	for _, a := range actions {
		switch a.GetVerb() {
		case "get", "list", "watch":
		default:
			out = append(out, a.GetVerb()+":"+a.GetSubresource())
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func withAnnotation(k, v string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[k] = v
	}
}

func withLabel(k, v string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[k] = v
	}
}

func withLabels(inst cloud.Instance, kv ...string) cloud.Instance {
	inst.Labels = map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		inst.Labels[kv[i]] = kv[i+1]
	}
	return inst
}

func TestSpec(t *testing.T) {
	s := Spec()
	if s.Name != manager.CloudNodeController || !slices.Contains(s.Aliases, "cloud-node") || s.DisabledByDefault {
		t.Errorf("Spec = %+v, want %s with alias cloud-node, enabled by default", s, manager.CloudNodeController)
	}
	fc, err := fakecloud.New(fakecloud.Options{Disabled: []fakecloud.Capability{fakecloud.CapInstances}})
	if err != nil {
		t.Fatal(err)
	}
	cc := controllertest.Context(manager.CloudNodeController, fc,
		manager.ControllerConfig{NodeStatusUpdateFrequency: 3 * time.Minute, ConcurrentNodeSyncs: 3})
	if _, err := s.New(t.Context(), cc); !errors.Is(err, manager.ErrControllerDisabled) {
		t.Fatalf("New without Instances = %v, want ErrControllerDisabled", err)
	}
	fc.SetCapability(fakecloud.CapInstances, true)
	got, err := s.New(t.Context(), cc)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	c := got.(*Controller)
	if c.refreshEvery != 3*time.Minute || c.workers != 3 || c.inventory != nil {
		t.Errorf("controller settings: refresh %v, workers %d, inventory %v", c.refreshEvery, c.workers, c.inventory)
	}
}

// TestStatusWorkers checks what bounds a per-node refresh: --concurrent-node-status-updates
// when set, else --concurrent-node-syncs, as upstream.
func TestStatusWorkers(t *testing.T) {
	for _, tt := range []struct{ workers, status, want int }{
		{workers: 7, status: 3, want: 3},
		{workers: 7, status: 0, want: 7},
		{workers: 0, status: 0, want: manager.DefaultControllerConfig().ConcurrentNodeSyncs},
	} {
		f := nodetest.NewFake(t, nil)
		c, err := New(Config{
			ControllerDeps: manager.ControllerDeps{Client: f.Client, Informers: f.Informers, Recorder: f.Events, Metrics: f.Metrics},
			Instances:      f.Cloud,
			Workers:        tt.workers,
			StatusWorkers:  tt.status,
		})
		if err != nil {
			t.Fatal(err)
		}
		if c.statusWorkers != tt.want {
			t.Errorf("Workers %d, StatusWorkers %d: a refresh looks up %d nodes at once, want %d", tt.workers, tt.status, c.statusWorkers, tt.want)
		}
	}
	f := nodetest.NewFake(t, nil)
	if _, err := New(Config{ControllerDeps: manager.ControllerDeps{Client: f.Client, Informers: f.Informers, Recorder: f.Events, Metrics: f.Metrics}, Instances: f.Cloud, StatusWorkers: -1}); err == nil {
		t.Error("a negative StatusWorkers was accepted")
	}
}

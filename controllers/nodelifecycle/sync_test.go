package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/controllers/ownership"
	"github.com/nephele-dev/nephele/controllers/taints"
	"github.com/nephele-dev/nephele/internal/testkit/controllertest"
	"github.com/nephele-dev/nephele/internal/testkit/eventlog"
	"github.com/nephele-dev/nephele/manager"
)

var modes = []struct {
	name      string
	inventory bool
}{{"inventory", true}, {"per node", false}}

func TestAllowedDeletions(t *testing.T) {
	tests := []struct {
		threshold float64
		total     int
		want      int
	}{
		{0.1, 0, 1},
		{0.1, 1, 1},
		{0.1, 9, 1},
		{0.1, 10, 1},
		{0.1, 19, 1},
		{0.1, 20, 2},
		{0.1, 30, 3},
		{0.1, 5000, 500},
		{0.29, 100, 29},
		{0.3, 10, 3},
		{0.5, 3, 1},
		{1, 7, 7},
		{0.0001, 5000, 1},
	}
	for _, tt := range tests {
		if got := allowedDeletions(tt.threshold, tt.total); got != tt.want {
			t.Errorf("allowedDeletions(%v, %d) = %d, want %d", tt.threshold, tt.total, got, tt.want)
		}
	}
}

func TestSafeModeReason(t *testing.T) {
	tests := []struct {
		name string
		r    round
		want string
	}{
		{name: "quiet", r: round{total: 30}},
		{name: "one deletion in a small cluster", r: round{total: 3, lookups: 1, candidates: 1}},
		{name: "two deletions in a small cluster", r: round{total: 3, lookups: 2, candidates: 2}, want: SafeModeTooManyDeletions},
		{name: "at the threshold", r: round{total: 30, lookups: 3, candidates: 3}},
		{name: "over the threshold", r: round{total: 30, lookups: 4, candidates: 4}, want: SafeModeTooManyDeletions},
		{name: "listing failed", r: round{total: 30, listingFailed: true}, want: SafeModeCloudErrors},
		{name: "half the lookups failed", r: round{total: 30, lookups: 4, failed: 2, candidates: 1}},
		{name: "most lookups failed", r: round{total: 30, lookups: 4, failed: 3, candidates: 1}, want: SafeModeCloudErrors},
		{name: "the only lookup failed", r: round{total: 30, lookups: 1, failed: 1}, want: SafeModeCloudErrors},
		{name: "errors win over too many", r: round{total: 10, lookups: 10, failed: 6, candidates: 4}, want: SafeModeCloudErrors},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := safeModeReason(0.1, tt.r); got != tt.want {
				t.Errorf("safeModeReason(%+v) = %q, want %q", tt.r, got, tt.want)
			}
		})
	}
}

func TestReadyNodesCostNoCloudCalls(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			var nodes []*corev1.Node
			var insts []cloud.Instance
			for i := range 20 {
				name := fmt.Sprintf("n%02d", i)
				nodes = append(nodes, newNode(name, corev1.ConditionTrue))
				// Even a stopped instance behind a Ready node is not looked at.
				insts = append(insts, instance(name, cloud.InstanceStopped))
			}
			nodes[3].Spec.Taints = []corev1.Taint{{Key: cloudproviderapi.TaintNodeShutdown, Effect: corev1.TaintEffectNoSchedule}, {Key: "keep", Effect: corev1.TaintEffectNoExecute}}
			f := newFixture(t, fixtureOptions{inventory: mode.inventory}, insts, nodes...)
			for range 5 {
				f.round(t, time.Second)
			}
			if n := f.Cloud.TotalCalls(); n != 0 {
				t.Errorf("cloud calls = %d, want 0 for a healthy cluster", n)
			}
			got := f.Node(t, "n03")
			if taints.Has(got, cloudproviderapi.TaintNodeShutdown) || !taints.Has(got, "keep") {
				t.Errorf("taints of a Ready node = %v, want the shutdown taint removed and the other kept", got.Spec.Taints)
			}
		})
	}
}

func TestDeletionNeedsTwoNotFoundAnswersAGracePeriodApart(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{inventory: mode.inventory}, []cloud.Instance{instance("ok", cloud.InstanceRunning)},
				newNode("gone", corev1.ConditionUnknown), newNode("ok", corev1.ConditionTrue))
			f.round(t, 0)
			f.round(t, testGrace-time.Millisecond)
			if !f.Exists(t, "gone") {
				t.Fatal("node deleted before the grace period passed")
			}
			if n := f.Events.Count(EventDeletingNode); n != 0 {
				t.Fatalf("%d deletion events before the grace period", n)
			}
			f.round(t, time.Millisecond)
			if f.Exists(t, "gone") {
				t.Fatal("node not deleted after two NotFound answers a grace period apart")
			}
			if !f.Exists(t, "ok") {
				t.Fatal("the healthy node was deleted")
			}
			if got := f.Events.Objects(EventDeletingNode); !slices.Equal(got, []string{"gone"}) {
				t.Errorf("deletion events on %v, want [gone]", got)
			}
			if got := f.Metric(t, "nephele_node_lifecycle_deletions_total", nil); got != 1 {
				t.Errorf("deletions = %v, want 1", got)
			}
			f.WaitCached(t, "gone", func(n *corev1.Node) bool { return n == nil })
			f.round(t, time.Second)
			if len(f.ctrl.notFound) != 0 {
				t.Errorf("state kept for deleted nodes: %v", f.ctrl.notFound)
			}
			if got := f.Cloud.Calls(cloud.OpInstanceMetadata); got != 3 {
				t.Errorf("InstanceMetadata calls = %d, want one per round for the not-Ready node", got)
			}
			if mode.inventory {
				if got := f.Cloud.Calls(cloud.OpListInstances); got < 1 || got > 3 {
					t.Errorf("ListInstances calls = %d, want one per round at most", got)
				}
			}
		})
	}
}

// TestNodesNotOwnedAreNeverLookedUpOrDeleted: another cloud's not-Ready node (by its
// provider ID or its declaration), and in a hybrid cluster an undeclared one, have no
// instance in this cloud, which is exactly what a gone node looks like; the controller
// neither asks the cloud about them nor deletes them, and says why once.
func TestNodesNotOwnedAreNeverLookedUpOrDeleted(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			foreign := newNode("foreign", corev1.ConditionUnknown)
			foreign.Spec.ProviderID = "aws:///eu-west-1a/i-0123"
			declared := newNode("declared", corev1.ConditionFalse)
			declared.Spec.ProviderID = ""
			declared.Labels = map[string]string{cloud.LabelPlatform: "on-prem"}
			undeclared := newNode("undeclared", corev1.ConditionUnknown)
			undeclared.Spec.ProviderID = ""
			// Ready with the shutdown taint, which this CCM removes from its own Ready nodes.
			shut := newNode("shut", corev1.ConditionTrue)
			shut.Spec.ProviderID = "aws:///eu-west-1a/i-0456"
			shut.Spec.Taints = []corev1.Taint{{Key: cloudproviderapi.TaintNodeShutdown, Effect: corev1.TaintEffectNoSchedule}}
			f := newFixture(t, fixtureOptions{inventory: mode.inventory, ownership: cloud.NodeOwnership{
				Platforms: []string{"fake"}, Undeclared: cloud.UndeclaredIgnore,
			}}, nil, foreign, declared, undeclared, shut, newNode("gone", corev1.ConditionUnknown))
			f.round(t, 0)
			f.round(t, testGrace)
			if f.Exists(t, "gone") {
				t.Fatal("the CCM's own gone node was not deleted")
			}
			for _, name := range []string{"foreign", "declared", "undeclared", "shut"} {
				if !f.Exists(t, name) {
					t.Errorf("node %s, not the CCM's, was deleted", name)
				}
			}
			if n := f.Node(t, "shut"); !taints.Has(n, cloudproviderapi.TaintNodeShutdown) {
				t.Error("the shutdown taint of another cloud's node was removed")
			}
			if got := f.Cloud.Calls(cloud.OpInstanceMetadata); got != 2 {
				t.Errorf("InstanceMetadata calls = %d, want 2 (the own node's two lookups only)", got)
			}
			if got := f.Events.Objects(ownership.EventNotOwned); !slices.Equal(sorted(got), []string{"declared", "foreign", "shut", "undeclared"}) {
				t.Errorf("NotOwned events on %v, want one on each node the CCM does not own", got)
			}
		})
	}
}

func TestNoDeletionWhileTheCloudFails(t *testing.T) {
	failures := []struct {
		name  string
		fault func(*fakecloud.Cloud)
	}{
		{name: "5xx", fault: func(c *fakecloud.Cloud) { c.SetError(fakecloud.AnyOp, errors.New("HTTP 503")) }},
		{name: "throttled", fault: func(c *fakecloud.Cloud) { c.Throttle(fakecloud.AnyOp, time.Second) }},
		{name: "timeout", fault: func(c *fakecloud.Cloud) { c.SetError(fakecloud.AnyOp, context.DeadlineExceeded) }},
	}
	for _, mode := range modes {
		for _, fl := range failures {
			t.Run(mode.name+"/"+fl.name, func(t *testing.T) {
				var nodes []*corev1.Node
				for i := range 30 {
					nodes = append(nodes, newNode(fmt.Sprintf("n%02d", i), corev1.ConditionFalse))
				}
				// No instance exists: once the cloud answers, every node is gone.
				f := newFixture(t, fixtureOptions{inventory: mode.inventory, workers: 4}, nil, nodes...)
				fl.fault(f.Cloud)
				for range 10 {
					f.round(t, testGrace)
				}
				if n := f.Events.Count(EventDeletingNode); n != 0 {
					t.Fatalf("%d nodes deleted while every cloud call failed", n)
				}
				for _, n := range nodes {
					if !f.Exists(t, n.Name) {
						t.Fatalf("node %s deleted while every cloud call failed", n.Name)
					}
				}
				if got := f.Metric(t, "nephele_node_lifecycle_safe_mode", nil); got != 1 {
					t.Errorf("safe mode gauge = %v, want 1", got)
				}
				if got := f.Metric(t, "nephele_node_lifecycle_safe_mode_rounds_total", map[string]string{"reason": SafeModeCloudErrors}); got != 10 {
					t.Errorf("safe-mode rounds = %v, want 10", got)
				}
				if got := f.Events.Count(EventNodeDeletionSafeMode); got != maxSafeModeEvents {
					t.Errorf("safe-mode events = %d, want %d (once, capped)", got, maxSafeModeEvents)
				}
				if len(f.ctrl.notFound) != 0 {
					t.Errorf("NotFound observations recorded from failed calls: %v", f.ctrl.notFound)
				}
			})
		}
	}
}

func TestAbsenceFromAListingIsNoProof(t *testing.T) {
	nodes := []*corev1.Node{newNode("a", corev1.ConditionUnknown), newNode("b", corev1.ConditionUnknown)}
	insts := []cloud.Instance{instance("a", cloud.InstanceRunning), instance("b", cloud.InstanceRunning)}
	t.Run("empty listing, instances there", func(t *testing.T) {
		f := newFixture(t, fixtureOptions{lister: emptyLister{}}, insts, nodes...)
		for range 5 {
			f.round(t, testGrace)
		}
		if !f.Exists(t, "a") || !f.Exists(t, "b") {
			t.Fatal("a node was deleted on an empty listing")
		}
		if got := f.Cloud.Calls(cloud.OpInstanceMetadata); got != 10 {
			t.Errorf("InstanceMetadata calls = %d, want 10 (every absence confirmed)", got)
		}
	})
	t.Run("empty listing, confirmations fail", func(t *testing.T) {
		f := newFixture(t, fixtureOptions{lister: emptyLister{}}, nil, nodes...)
		f.Cloud.SetError(cloud.OpInstanceMetadata, errors.New("HTTP 500"))
		for range 5 {
			f.round(t, testGrace)
		}
		if !f.Exists(t, "a") || !f.Exists(t, "b") {
			t.Fatal("a node was deleted without a NotFound answer")
		}
	})
}

func TestShutdownTaint(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			node := newNode("n1", corev1.ConditionUnknown)
			node.Spec.Taints = []corev1.Taint{{Key: "keep", Effect: corev1.TaintEffectNoSchedule}}
			f := newFixture(t, fixtureOptions{inventory: mode.inventory}, []cloud.Instance{instance("n1", cloud.InstanceStopped)}, node)
			tainted := func(want bool) {
				t.Helper()
				f.WaitCached(t, "n1", func(n *corev1.Node) bool { return taints.Has(n, cloudproviderapi.TaintNodeShutdown) == want })
				if !taints.Has(f.Node(t, "n1"), "keep") {
					t.Fatal("another taint was lost")
				}
			}

			f.round(t, time.Second)
			tainted(true)
			// Periods later; the listing must be renewed to see the change.
			if err := f.Cloud.SetInstanceState("fake://n1", cloud.InstanceRunning); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1100 * time.Millisecond) // the inventory's own clock: let the listing age past a period
			f.round(t, time.Second)
			tainted(false)
			if err := f.Cloud.SetInstanceState("fake://n1", cloud.InstanceStopped); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1100 * time.Millisecond)
			f.round(t, time.Second)
			tainted(true)

			// Ready again: the taint goes without asking the cloud.
			n := f.Node(t, "n1")
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			f.update(t, n, isReady)
			f.Cloud.ResetCalls()
			f.round(t, time.Second)
			tainted(false)
			if c := f.Cloud.TotalCalls(); c != 0 {
				t.Errorf("cloud calls for a Ready node = %d, want 0", c)
			}
			if f.Events.Count(EventDeletingNode) != 0 {
				t.Error("a stopped instance's node was deleted")
			}
		})
	}
}

func TestSafeModeWhenTooManyWouldBeDeleted(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			var nodes []*corev1.Node
			var insts []cloud.Instance
			for i := range 20 {
				name := fmt.Sprintf("n%02d", i)
				if i < 3 {
					// Three not-Ready nodes whose instances are gone: 3 > 10% of 20.
					nodes = append(nodes, newNode(name, corev1.ConditionFalse))
					continue
				}
				nodes = append(nodes, newNode(name, corev1.ConditionTrue))
				insts = append(insts, instance(name, cloud.InstanceRunning))
			}
			f := newFixture(t, fixtureOptions{inventory: mode.inventory}, insts, nodes...)
			for range 4 {
				f.round(t, testGrace)
			}
			for _, n := range nodes[:3] {
				if !f.Exists(t, n.Name) {
					t.Fatalf("node %s deleted in safe mode", n.Name)
				}
			}
			if got := f.Metric(t, "nephele_node_lifecycle_safe_mode", nil); got != 1 {
				t.Errorf("safe mode gauge = %v, want 1", got)
			}
			if got := f.Metric(t, "nephele_node_lifecycle_safe_mode_rounds_total", map[string]string{"reason": SafeModeTooManyDeletions}); got != 3 {
				t.Errorf("safe-mode rounds = %v, want 3 (every round after the first answers)", got)
			}
			if got := sorted(f.Events.Objects(EventNodeDeletionSafeMode)); !slices.Equal(got, []string{"n00", "n01", "n02"}) {
				t.Errorf("safe-mode events on %v, want one on each of n00 n01 n02; events:\n%s", got, f.Events)
			}

			// One instance comes back: two deletions are within the threshold.
			if err := f.Cloud.AddInstance(instance("n00", cloud.InstanceRunning)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1100 * time.Millisecond) // let the inventory's listing age past a period
			f.round(t, time.Second)
			if !f.Exists(t, "n00") || f.Exists(t, "n01") || f.Exists(t, "n02") {
				t.Errorf("after the condition cleared: n00 exists=%v n01=%v n02=%v, want true false false",
					f.Exists(t, "n00"), f.Exists(t, "n01"), f.Exists(t, "n02"))
			}
			if got := f.Metric(t, "nephele_node_lifecycle_safe_mode", nil); got != 0 {
				t.Errorf("safe mode gauge = %v, want 0 after the condition cleared", got)
			}
		})
	}
}

func TestSafeModeWhenMostLookupsFail(t *testing.T) {
	nodes := []*corev1.Node{
		newNode("gone", corev1.ConditionFalse), newNode("e1", corev1.ConditionFalse),
		newNode("e2", corev1.ConditionFalse), newNode("e3", corev1.ConditionFalse),
	}
	for i := range 40 {
		nodes = append(nodes, newNode(fmt.Sprintf("ok%02d", i), corev1.ConditionTrue))
	}
	f := newFixture(t, fixtureOptions{}, nil, nodes...)
	failing := map[string]bool{"fake://e1": true, "fake://e2": true, "fake://e3": true}
	f.Cloud.SetHook(func(_ context.Context, op cloud.Operation, subject string) error {
		if op == cloud.OpInstanceMetadata && failing[subject] {
			return errors.New("HTTP 500")
		}
		return nil
	})
	f.round(t, 0)
	f.round(t, testGrace)
	if !f.Exists(t, "gone") {
		t.Fatal("deleted while 3 of 4 lookups failed")
	}
	if got := sorted(f.Events.Objects(EventNodeDeletionSafeMode)); !slices.Equal(got, []string{"e1", "e2", "e3"}) {
		t.Errorf("safe-mode events on %v, want the nodes whose lookup failed", got)
	}
	// Only one lookup of four fails now: the cloud is trusted again.
	delete(failing, "fake://e1")
	delete(failing, "fake://e2")
	f.round(t, time.Second)
	if f.Exists(t, "gone") {
		t.Error("not deleted once most lookups succeeded")
	}
	if got := f.Metric(t, "nephele_node_lifecycle_safe_mode", nil); got != 0 {
		t.Errorf("safe mode gauge = %v, want 0", got)
	}
}

func TestObservationsAreForgotten(t *testing.T) {
	f := newFixture(t, fixtureOptions{}, nil, newNode("a", corev1.ConditionFalse), newNode("b", corev1.ConditionFalse))
	f.round(t, 0)
	if len(f.ctrl.notFound) != 2 {
		t.Fatalf("observations = %v, want a and b", f.ctrl.notFound)
	}
	// a turns Ready; b is re-created under a new UID.
	a := f.Node(t, "a")
	a.Status.Conditions[0].Status = corev1.ConditionTrue
	f.update(t, a, isReady)
	b := f.Node(t, "b")
	b.UID = types.UID("uid-b-2")
	f.update(t, b, func(n *corev1.Node) bool { return n.UID == b.UID })

	f.round(t, testGrace)
	if _, ok := f.ctrl.notFound["a"]; ok {
		t.Error("the observation of a node that turned Ready was kept")
	}
	if obs, ok := f.ctrl.notFound["b"]; !ok || obs.uid != "uid-b-2" || !obs.first.Equal(f.clock.Now()) {
		t.Errorf("observation of the re-created node = %+v, want a fresh one", obs)
	}
	if !f.Exists(t, "b") {
		t.Error("the re-created node was deleted on its predecessor's first answer")
	}
	// A found instance clears the observation too.
	if err := f.Cloud.AddInstance(instance("b", cloud.InstanceRunning)); err != nil {
		t.Fatal(err)
	}
	f.round(t, time.Second)
	if len(f.ctrl.notFound) != 0 {
		t.Errorf("observations = %v, want none", f.ctrl.notFound)
	}
}

func TestNew(t *testing.T) {
	f := newFixture(t, fixtureOptions{}, nil)
	base := Config{ControllerDeps: manager.ControllerDeps{Client: f.Client, Recorder: &eventlog.Log{}}, Instances: f.Cloud}
	if _, err := New(base); !errors.Is(err, manager.ErrMissingDependency) {
		t.Errorf("New without informers: %v, want manager.ErrMissingDependency", err)
	}
	for _, th := range []float64{-0.1, 1.5} {
		cfg := base
		cfg.Informers = informers.NewSharedInformerFactory(f.Client, 0)
		cfg.SafeModeThreshold = th
		if _, err := New(cfg); err == nil {
			t.Errorf("New with threshold %v succeeded", th)
		}
	}
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}

func TestSpec(t *testing.T) {
	s := Spec()
	if s.Name != manager.CloudNodeLifecycleController || !slices.Contains(s.Aliases, "cloud-node-lifecycle") || s.DisabledByDefault {
		t.Errorf("Spec = %+v, want %s with alias cloud-node-lifecycle, enabled by default", s, manager.CloudNodeLifecycleController)
	}
	fc, err := fakecloud.New(fakecloud.Options{Disabled: []fakecloud.Capability{fakecloud.CapInstances}})
	if err != nil {
		t.Fatal(err)
	}
	cc := controllertest.Context(manager.CloudNodeLifecycleController, fc, manager.ControllerConfig{
		NodeMonitorPeriod: 7 * time.Second, NodeDeletionGracePeriod: time.Minute,
		NodeDeletionSafeModeThreshold: 0.25, ConcurrentNodeSyncs: 2,
	})
	if _, err := s.New(t.Context(), cc); !errors.Is(err, manager.ErrControllerDisabled) {
		t.Fatalf("New without Instances = %v, want ErrControllerDisabled", err)
	}
	fc.SetCapability(fakecloud.CapInstances, true)
	got, err := s.New(t.Context(), cc)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	c := got.(*Controller)
	if c.period != 7*time.Second || c.grace != time.Minute || c.threshold != 0.25 || c.workers != 2 {
		t.Errorf("controller settings: period %v grace %v threshold %v workers %d", c.period, c.grace, c.threshold, c.workers)
	}
}

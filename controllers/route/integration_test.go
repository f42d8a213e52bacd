package route

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/manager"
)

// These tests run the controller against a real kube-apiserver (internal/testkit/testenv) and
// the fake cloud. Nodes are plain API objects with spec.podCIDRs set; nothing else
// manages them.

func TestIntegrationRoutesCreatedForNodes(t *testing.T) {
	h := startHarness(t, controlPlane(t).Client, harnessOptions{})
	a := h.createNode("a", "10.244.1.0/24")
	b := h.createNode("b", "10.244.2.0/24", "fd00:10:244:2::/64")

	h.waitRoutes(want(routeOf(a, "10.244.1.0/24"), routeOf(b, "10.244.2.0/24"), routeOf(b, "fd00:10:244:2::/64")))
	for _, n := range []*corev1.Node{a, b} {
		cond := h.waitCondition(n, corev1.ConditionFalse, reasonRouteCreated)
		if cond.Message != messageRouteCreated {
			t.Errorf("node %s condition message = %q, want %q", n.Name, cond.Message, messageRouteCreated)
		}
	}
	// The name hints reach the cloud: the fake cloud names routes after them.
	var names []string
	for _, r := range h.cloud.AllRoutes(testCluster) {
		names = append(names, r.Name)
	}
	slices.Sort(names)
	wantNames := []string{
		fmt.Sprintf("%s-%s-ipv4", testCluster, a.UID),
		fmt.Sprintf("%s-%s-ipv4", testCluster, b.UID),
		fmt.Sprintf("%s-%s-ipv6", testCluster, b.UID),
	}
	slices.Sort(wantNames)
	if !slices.Equal(names, wantNames) {
		t.Errorf("route names = %q, want %q", names, wantNames)
	}
	poll.Eventually(h.t, "routes managed gauge", func() error {
		if got := h.counter("nephele_routes_managed", nil); got != 3 {
			return fmt.Errorf("nephele_routes_managed = %v, want 3", got)
		}
		return nil
	})
	if got := h.counter("nephele_cloud_requests_total", map[string]string{"controller": manager.NodeRouteController, "operation": string(cloud.OpCreateRoute), "result": "success"}); got != 3 {
		t.Errorf("successful creates counted = %v, want 3", got)
	}
}

func TestIntegrationNodeDeletionDeletesItsRoutes(t *testing.T) {
	h := startHarness(t, controlPlane(t).Client, harnessOptions{})
	a := h.createNode("a", "10.244.1.0/24", "fd00:10:244:1::/64")
	b := h.createNode("b", "10.244.2.0/24")
	h.waitRoutes(want(routeOf(a, "10.244.1.0/24"), routeOf(a, "fd00:10:244:1::/64"), routeOf(b, "10.244.2.0/24")))

	h.deleteNode(a)
	h.waitRoutes(want(routeOf(b, "10.244.2.0/24")))
}

func TestIntegrationPodCIDRChanges(t *testing.T) {
	h := startHarness(t, controlPlane(t).Client, harnessOptions{})

	t.Run("assigned after creation", func(t *testing.T) {
		n := h.createNode("late")
		// The API lets a pod CIDR be set once, from empty, as the IPAM controller does.
		patch := []byte(`{"spec":{"podCIDR":"10.244.5.0/24","podCIDRs":["10.244.5.0/24"]}}`)
		if _, err := h.client.CoreV1().Nodes().Patch(t.Context(), n.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		h.waitRoutes(want(routeOf(n, "10.244.5.0/24")))
		h.waitCondition(n, corev1.ConditionFalse, reasonRouteCreated)
	})

	t.Run("node recreated with another pod CIDR", func(t *testing.T) {
		old := h.createNode("moving", "10.244.6.0/24")
		h.waitRoutes(want(routeOf(h.node("late"), "10.244.5.0/24"), routeOf(old, "10.244.6.0/24")))
		h.deleteNode(old)
		// Recreate at once, so the controller may see only the new object.
		n := h.createNode("moving", "10.244.7.0/24")
		h.waitRoutes(want(routeOf(h.node("late"), "10.244.5.0/24"), routeOf(n, "10.244.7.0/24")))
		h.waitCondition(n, corev1.ConditionFalse, reasonRouteCreated)
		for _, r := range h.cloud.AllRoutes(testCluster) {
			if r.TargetNode == n.Name && r.Name != fmt.Sprintf("%s-%s-ipv4", testCluster, n.UID) {
				t.Errorf("route of the recreated node is named %q, want the new UID's hint", r.Name)
			}
		}
	})
}

// TestIntegrationNodeAddressChangeUpdatesRoute follows upstream's route controller,
// which passes a node's addresses with each route it creates and replaces a route whose
// node's addresses changed (for providers that route by next-hop address): the route of
// a node whose InternalIP changes is deleted and created again with the new addresses;
// the other node's route stays as it is.
func TestIntegrationNodeAddressChangeUpdatesRoute(t *testing.T) {
	h := startHarness(t, controlPlane(t).Client, harnessOptions{})
	a := h.createNodeWithAddresses("a", []string{"10.0.0.1"}, "10.244.1.0/24")
	b := h.createNodeWithAddresses("b", []string{"10.0.0.2"}, "10.244.2.0/24")
	h.waitRoutes(want(routeOf(a, "10.244.1.0/24"), routeOf(b, "10.244.2.0/24")))
	creates, deletes := h.cloud.Calls(cloud.OpCreateRoute), h.cloud.Calls(cloud.OpDeleteRoute)

	h.setAddresses(a, "10.0.0.11")
	poll.Eventually(t, "the route of node a replaced", func() error {
		if c, d := h.cloud.Calls(cloud.OpCreateRoute)-creates, h.cloud.Calls(cloud.OpDeleteRoute)-deletes; c != 1 || d != 1 {
			return fmt.Errorf("%d creates and %d deletes since the address changed, want 1 and 1", c, d)
		}
		return nil
	})
	h.waitRoutes(want(routeOf(a, "10.244.1.0/24"), routeOf(b, "10.244.2.0/24")))
	h.waitCondition(a, corev1.ConditionFalse, reasonRouteCreated)
	for _, r := range h.cloud.AllRoutes(testCluster) {
		wantAddrs := map[string][]corev1.NodeAddress{a.Name: internalIPs("10.0.0.11"), b.Name: internalIPs("10.0.0.2")}[r.TargetNode]
		if !slices.Equal(r.TargetNodeAddresses, wantAddrs) {
			t.Errorf("route %s to %s carries addresses %v, want %v", r.Name, r.TargetNode, r.TargetNodeAddresses, wantAddrs)
		}
	}
}

func TestIntegrationRoutesOutsideClusterCIDRUntouched(t *testing.T) {
	outside := []cloud.Route{
		{Name: "vpn", TargetNode: "gateway", DestinationCIDR: mustPrefix("192.168.0.0/24")},
		{Name: "wide", TargetNode: "gone", DestinationCIDR: mustPrefix("10.0.0.0/8")},
		{Name: "v6", TargetNode: "gone", DestinationCIDR: mustPrefix("fd00:99::/64")},
		{Name: "blackholed", TargetNode: "gone", DestinationCIDR: mustPrefix("172.16.0.0/24"), Blackhole: true},
	}
	h := startHarness(t, controlPlane(t).Client, harnessOptions{
		period: 200 * time.Millisecond,
		seed: func(c *fakecloud.Cloud) {
			for _, r := range outside {
				if err := c.AddRoute(testCluster, r); err != nil {
					t.Fatal(err)
				}
			}
			// Inside the cluster CIDR, for a node that does not exist: stale.
			if err := c.AddRoute(testCluster, cloud.Route{Name: "stale", TargetNode: "gone", DestinationCIDR: mustPrefix("10.244.99.0/24")}); err != nil {
				t.Fatal(err)
			}
		},
	})
	a := h.createNode("a", "10.244.1.0/24")

	var wantRoutes []string
	for _, r := range outside {
		s := r.TargetNode + " " + r.DestinationCIDR.String()
		if r.Blackhole {
			s += " blackhole"
		}
		wantRoutes = append(wantRoutes, s)
	}
	wantRoutes = want(append(wantRoutes, routeOf(a, "10.244.1.0/24"))...)
	h.waitRoutes(wantRoutes)
	// Let several drift checks pass, then check again: nothing outside is ever touched.
	start := h.counter("nephele_route_drift_checks_total", map[string]string{"result": "success"})
	poll.Eventually(h.t, "three more drift checks", func() error {
		if got := h.counter("nephele_route_drift_checks_total", map[string]string{"result": "success"}); got < start+3 {
			return fmt.Errorf("drift checks = %v, want %v", got, start+3)
		}
		return nil
	})
	if got := h.routes(); !slices.Equal(got, wantRoutes) {
		t.Errorf("routes after drift checks = %q, want %q", got, wantRoutes)
	}
	if n := h.cloud.CallsWithResult(cloud.OpDeleteRoute, cloud.ResultSuccess); n != 1 {
		t.Errorf("DeleteRoute calls = %d, want 1 (the stale route only)", n)
	}
}

// TestIntegrationRoutesOnlyForOwnedNodes: another cloud's node gets no route in this
// cloud and its NetworkUnavailable condition is left to its own CCM; a route this cloud
// still had to it is deleted, as one to a node that is gone.
func TestIntegrationRoutesOnlyForOwnedNodes(t *testing.T) {
	client := controlPlane(t).Client
	h := startHarness(t, client, harnessOptions{
		period:    200 * time.Millisecond,
		ownership: cloud.NodeOwnership{Platforms: []string{"fake"}, Undeclared: cloud.UndeclaredIgnore},
	})
	mine := h.node("mine", "10.244.1.0/24")
	mine.Labels[cloud.LabelNodePlatform] = "fake"
	mine, err := client.CoreV1().Nodes().Create(t.Context(), mine, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	theirs := h.node("theirs", "10.244.2.0/24")
	theirs.Spec.ProviderID = "aws:///eu-west-1a/i-0123"
	// A route this cloud has to the other cloud's node, from before: an orphan here.
	if err := h.cloud.AddRoute(testCluster, cloud.Route{Name: "old", TargetNode: theirs.Name, DestinationCIDR: mustPrefix("10.244.2.0/24")}); err != nil {
		t.Fatal(err)
	}
	if theirs, err = client.CoreV1().Nodes().Create(t.Context(), theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	undeclared := h.createNode("undeclared", "10.244.3.0/24")

	h.waitRoutes(want(routeOf(mine, "10.244.1.0/24")))
	h.waitCondition(mine, corev1.ConditionFalse, reasonRouteCreated)
	poll.Eventually(h.t, "both other nodes counted as skipped", func() error {
		skipped := h.counter("nephele_node_ownership_skipped_total", map[string]string{"controller": manager.NodeRouteController})
		if skipped != 2 {
			return fmt.Errorf("skipped = %v", skipped)
		}
		return nil
	})
	// Several drift checks later, still no route and no condition on the others.
	start := h.counter("nephele_route_drift_checks_total", map[string]string{"result": "success"})
	poll.Eventually(h.t, "three more drift checks", func() error {
		if got := h.counter("nephele_route_drift_checks_total", map[string]string{"result": "success"}); got < start+3 {
			return fmt.Errorf("drift checks = %v, want %v", got, start+3)
		}
		return nil
	})
	if got := h.routes(); !slices.Equal(got, want(routeOf(mine, "10.244.1.0/24"))) {
		t.Errorf("routes = %q, want only the own node's", got)
	}
	for _, n := range []*corev1.Node{theirs, undeclared} {
		got, err := client.CoreV1().Nodes().Get(t.Context(), n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := networkCondition(got); c != nil {
			t.Errorf("node %s: NetworkUnavailable set to %s/%s by a CCM that does not own it", n.Name, c.Status, c.Reason)
		}
	}

}

// TestIntegrationRouteWhenDeclared: a node that declares this cloud's platform after it
// registered gets its route from the update itself, not from a drift check (the period
// is an hour).
func TestIntegrationRouteWhenDeclared(t *testing.T) {
	client := controlPlane(t).Client
	h := startHarness(t, client, harnessOptions{
		period:    time.Hour,
		ownership: cloud.NodeOwnership{Platforms: []string{"fake"}, Undeclared: cloud.UndeclaredIgnore},
	})
	node := h.createNode("later", "10.244.3.0/24")
	poll.Eventually(h.t, "the undeclared node counted as skipped", func() error {
		if got := h.counter("nephele_node_ownership_skipped_total", map[string]string{"controller": manager.NodeRouteController, "reason": cloud.NotOwnedUndeclared}); got != 1 {
			return fmt.Errorf("skipped = %v", got)
		}
		return nil
	})
	if got := h.routes(); len(got) != 0 {
		t.Fatalf("routes before the declaration: %q", got)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"fake"}}}`, cloud.LabelNodePlatform)
	if _, err := client.CoreV1().Nodes().Patch(t.Context(), node.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitRoutes(want(routeOf(node, "10.244.3.0/24")))
}

func TestIntegrationDriftRepairsRoutes(t *testing.T) {
	h := startHarness(t, controlPlane(t).Client, harnessOptions{period: 300 * time.Millisecond})
	a := h.createNode("a", "10.244.1.0/24")
	b := h.createNode("b", "10.244.2.0/24")
	routesAB := want(routeOf(a, "10.244.1.0/24"), routeOf(b, "10.244.2.0/24"))
	h.waitRoutes(routesAB)
	h.waitCondition(a, corev1.ConditionFalse, reasonRouteCreated)

	// Someone deletes a route behind the controller's back; no node event follows.
	if err := h.cloud.DeleteRoute(t.Context(), testCluster, cloud.Route{DestinationCIDR: mustPrefix("10.244.1.0/24")}); err != nil {
		t.Fatal(err)
	}
	h.waitRoutes(routesAB)

	// The cloud reports a route as a blackhole: it is deleted and created again.
	if err := h.cloud.SetRouteBlackhole(testCluster, mustPrefix("10.244.2.0/24"), true); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(h.t, "blackhole route replaced", func() error {
		if got := h.routes(); !slices.Equal(got, routesAB) {
			return fmt.Errorf("routes = %q", got)
		}
		if h.cloud.CallsWithResult(cloud.OpDeleteRoute, cloud.ResultSuccess) < 2 {
			return fmt.Errorf("the blackhole route was not deleted")
		}
		return nil
	})
}

func TestIntegrationCloudErrorsAreRetried(t *testing.T) {
	h := startHarness(t, controlPlane(t).Client, harnessOptions{})

	t.Run("errors", func(t *testing.T) {
		h.cloud.FailNext(cloud.OpCreateRoute, 3, errInjected)
		n := h.createNode("a", "10.244.1.0/24")
		h.waitRoutes(want(routeOf(n, "10.244.1.0/24")))
		h.waitCondition(n, corev1.ConditionFalse, reasonRouteCreated)
		if got := h.cloud.CallsWithResult(cloud.OpCreateRoute, cloud.ResultError); got != 3 {
			t.Errorf("failed CreateRoute calls = %d, want 3", got)
		}
		ev := h.waitEvent(n, EventFailedToCreateRoute)
		if ev.Type != corev1.EventTypeWarning {
			t.Errorf("event type = %s, want Warning", ev.Type)
		}
	})

	t.Run("throttling waits for Retry-After", func(t *testing.T) {
		const retryAfter = 700 * time.Millisecond
		h.cloud.ThrottleNext(cloud.OpCreateRoute, 1, retryAfter)
		n := h.createNode("b", "10.244.2.0/24")
		h.waitRoutes(want(routeOf(h.node("a"), "10.244.1.0/24"), routeOf(n, "10.244.2.0/24")))
		throttledAt, createdAt := throttledThenCreated(t, h, n.Name)
		if d := createdAt.Sub(throttledAt); d < retryAfter {
			t.Errorf("retried after %v, before the Retry-After of %v", d, retryAfter)
		}
		if got := h.counter("nephele_cloud_requests_total", map[string]string{"controller": manager.NodeRouteController, "operation": string(cloud.OpCreateRoute), "result": "throttled"}); got != 1 {
			t.Errorf("throttled creates counted = %v, want 1", got)
		}
	})

	t.Run("failing listing", func(t *testing.T) {
		// A failed create makes the next sync relist, unless a listing started less than
		// the error relist interval (100ms here) ago: let the last one age past it, so the
		// relisting below does not depend on how fast the subtests above ran.
		poll.Eventually(t, "the last route listing to be older than the error relist interval", func() error {
			var last time.Time
			for _, c := range h.cloud.CallLog() {
				if c.Op == cloud.OpListRoutes && c.Start.After(last) {
					last = c.Start
				}
			}
			if age := time.Since(last); age < 200*time.Millisecond {
				return fmt.Errorf("last listing %v ago", age)
			}
			return nil
		})
		// The next node sync that lists (after the errors above) fails to list twice.
		h.cloud.FailNext(cloud.OpListRoutes, 2, errInjected)
		h.cloud.FailNext(cloud.OpCreateRoute, 1, errInjected)
		n := h.createNode("c", "10.244.3.0/24")
		h.waitRoutes(want(routeOf(h.node("a"), "10.244.1.0/24"), routeOf(h.node("b"), "10.244.2.0/24"), routeOf(n, "10.244.3.0/24")))
		h.waitCondition(n, corev1.ConditionFalse, reasonRouteCreated)
		// The failed create made the controller relist, which failed twice and was retried.
		if got := h.cloud.CallsWithResult(cloud.OpListRoutes, cloud.ResultError); got != 2 {
			t.Errorf("failed ListRoutes calls = %d, want 2", got)
		}
	})
}

// A cloud asking to wait a day holds route work only for the call path's cap: the one
// Retry-After mechanism every controller shares.
func TestIntegrationRetryAfterIsCapped(t *testing.T) {
	const limit = 500 * time.Millisecond
	h := startHarness(t, controlPlane(t).Client, harnessOptions{maxRetryAfter: limit})
	h.cloud.ThrottleNext(cloud.OpCreateRoute, 1, 24*time.Hour)
	n := h.createNode("a", "10.244.1.0/24")
	h.waitRoutes(want(routeOf(n, "10.244.1.0/24")))
	throttledAt, createdAt := throttledThenCreated(t, h, n.Name)
	if d := createdAt.Sub(throttledAt); d < limit {
		t.Errorf("retried %v after a day's Retry-After, before the %v cap", d, limit)
	}
}

// throttledThenCreated waits until the call log holds a throttled and a successful
// CreateRoute for node and returns when each started. The fake cloud logs a call a
// moment after it applies it, so the route may show before its call does.
func throttledThenCreated(t *testing.T, h *harness, node string) (throttledAt, createdAt time.Time) {
	t.Helper()
	poll.Eventually(t, "a throttled and a successful create of node "+node+"'s route in the call log", func() error {
		throttledAt, createdAt = time.Time{}, time.Time{}
		for _, c := range h.cloud.CallLog() {
			if c.Op != cloud.OpCreateRoute || c.Subject != node {
				continue
			}
			switch c.Result() {
			case cloud.ResultThrottled:
				throttledAt = c.Start
			case cloud.ResultSuccess:
				createdAt = c.Start
			}
		}
		if throttledAt.IsZero() || createdAt.IsZero() {
			return fmt.Errorf("call log: %v", h.cloud.CallLog())
		}
		return nil
	})
	return throttledAt, createdAt
}

func TestIntegrationNetworkUnavailableWhileCreationFails(t *testing.T) {
	h := startHarness(t, controlPlane(t).Client, harnessOptions{})
	h.cloud.SetError(cloud.OpCreateRoute, errInjected)
	n := h.createNode("a", "10.244.1.0/24")
	cond := h.waitCondition(n, corev1.ConditionTrue, reasonNoRouteCreated)
	if cond.Message != messageNoRoute {
		t.Errorf("condition message = %q, want %q", cond.Message, messageNoRoute)
	}
	h.waitEvent(n, EventFailedToCreateRoute)

	h.cloud.SetError(cloud.OpCreateRoute, nil)
	h.waitRoutes(want(routeOf(n, "10.244.1.0/24")))
	created := h.waitCondition(n, corev1.ConditionFalse, reasonRouteCreated)
	if !created.LastTransitionTime.After(cond.LastTransitionTime.Time) && !created.LastTransitionTime.Equal(&cond.LastTransitionTime) {
		t.Errorf("LastTransitionTime went back: %v then %v", cond.LastTransitionTime, created.LastTransitionTime)
	}
}

func TestIntegrationPodCIDROutsideClusterCIDR(t *testing.T) {
	h := startHarness(t, controlPlane(t).Client, harnessOptions{})
	n := h.createNode("a", "192.168.7.0/24")
	cond := h.waitCondition(n, corev1.ConditionTrue, reasonNoRouteCreated)
	h.waitEvent(n, EventPodCIDROutsideClusterCIDR)
	if got := h.routes(); len(got) != 0 {
		t.Errorf("routes = %q, want none", got)
	}
	t.Logf("condition message: %s", cond.Message)
}

// TestIntegrationListRoutesDoesNotGrowWithNodes checks that node events never list the
// cloud per node: a burst of nodes, then of deletions, costs a constant number of
// ListRoutes calls.
func TestIntegrationListRoutesDoesNotGrowWithNodes(t *testing.T) {
	const nodes = 30
	h := startHarness(t, controlPlane(t).Client, harnessOptions{period: time.Hour, workers: 5})
	created, wantRoutes := h.createNumbered(nodes)
	h.waitRoutes(want(wantRoutes...))
	for _, n := range created {
		h.waitCondition(n, corev1.ConditionFalse, reasonRouteCreated)
	}
	// One listing for the start (the workers and the first drift check share it, or the
	// first check lists once more); none per node.
	afterCreate := h.cloud.Calls(cloud.OpListRoutes)
	t.Logf("ListRoutes calls after creating %d nodes: %d", nodes, afterCreate)
	if afterCreate > 2 {
		t.Errorf("ListRoutes calls after creating %d nodes = %d, want at most 2", nodes, afterCreate)
	}
	if got := h.cloud.Calls(cloud.OpCreateRoute); got != nodes {
		t.Errorf("CreateRoute calls = %d, want %d", got, nodes)
	}

	for _, n := range created {
		h.deleteNode(n)
	}
	h.waitRoutes(nil)
	// Deleting routes the controller created but never saw listed needs one listing
	// for their cloud names, shared by all the deletions.
	if got := h.cloud.Calls(cloud.OpListRoutes) - afterCreate; got > 1 {
		t.Errorf("ListRoutes calls while deleting %d nodes = %d, want at most 1", nodes, got)
	}
	if got := h.cloud.Calls(cloud.OpDeleteRoute); got != nodes {
		t.Errorf("DeleteRoute calls = %d, want %d", got, nodes)
	}
}

// TestIntegrationBurstOfNodesIsBatched: with a provider that batches, the routes of a
// burst of nodes go out together: the first call holds the cloud while every other
// node's route waits, then they go out in one ApplyRoutes call, and every node gets its
// condition as with single calls. Deleting the nodes is batched the same way.
func TestIntegrationBurstOfNodesIsBatched(t *testing.T) {
	const nodes = 120
	// gate holds every route change while it is open (not closed); a test closes it.
	var gate atomic.Pointer[chan struct{}]
	hold := func() chan struct{} { ch := make(chan struct{}); gate.Store(&ch); return ch }
	release := hold()
	h := startHarness(t, controlPlane(t).Client, harnessOptions{period: time.Hour, seed: func(c *fakecloud.Cloud) {
		c.SetMaxRouteChanges(200)
		c.SetHook(func(ctx context.Context, op cloud.Operation, _ string) error {
			if op != cloud.OpCreateRoute && op != cloud.OpDeleteRoute && op != cloud.OpApplyRoutes {
				return nil
			}
			select {
			case <-*gate.Load():
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}})
	if h.ctrl.batcher == nil {
		t.Fatal("the controller does not batch, though its provider's Routes implement cloud.RouteBatcher")
	}
	waitAll := func(what string) {
		t.Helper()
		poll.Eventually(t, what, func() error {
			if n := h.ctrl.batcher.unanswered(); n != nodes {
				return fmt.Errorf("%d changes wait", n)
			}
			return nil
		})
	}
	// The first call takes the changes that waited when the loop woke (a CreateRoute or
	// DeleteRoute for one alone), the second every other.
	twoCalls := func(single cloud.Operation) {
		t.Helper()
		if got := h.cloud.Calls(cloud.OpApplyRoutes) + h.cloud.Calls(single); got != 2 {
			t.Errorf("ApplyRoutes calls %d and %s calls %d, want 2 calls in all",
				h.cloud.Calls(cloud.OpApplyRoutes), single, h.cloud.Calls(single))
		}
	}

	created, wantRoutes := h.createNumbered(nodes)
	waitAll("every node's route waits for the cloud")
	close(release)
	h.waitRoutes(want(wantRoutes...))
	for _, n := range created {
		h.waitCondition(n, corev1.ConditionFalse, reasonRouteCreated)
	}
	twoCalls(cloud.OpCreateRoute)
	if got := h.counter("nephele_cloud_requests_total", map[string]string{"controller": manager.NodeRouteController, "operation": string(cloud.OpApplyRoutes), "result": "success"}); got < 1 {
		t.Errorf("successful apply_routes counted = %v, want at least 1", got)
	}

	h.cloud.ResetCalls()
	release = hold()
	for _, n := range created {
		h.deleteNode(n)
	}
	waitAll("every deleted node's route waits for the cloud")
	close(release)
	h.waitRoutes(nil)
	twoCalls(cloud.OpDeleteRoute)
}

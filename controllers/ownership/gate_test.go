package ownership

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/nephele-dev/nephele/cloud"
)

func node(uid, providerID string, labels map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-" + uid, UID: types.UID(uid), Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
	}
}

// drain returns the Events the recorder holds.
func drain(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestGateTellsOncePerReason(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := record.NewFakeRecorder(100)
	g, err := New(cloud.NodeOwnership{Platforms: []string{"local"}, Undeclared: cloud.UndeclaredIgnore}, "cloud-node-controller", rec, reg)
	if err != nil {
		t.Fatal(err)
	}
	foreign := node("a", "aws:///i-1", nil)
	for range 3 {
		if g.Owns(foreign) {
			t.Fatal("a node of another scheme is owned")
		}
	}
	events := drain(rec)
	if len(events) != 1 || !strings.Contains(events[0], "Normal NotOwned cloud-node-controller leaves this node alone") ||
		!strings.Contains(events[0], `scheme "aws"`) {
		t.Fatalf("events after three looks at a foreign node = %q, want one NotOwned naming the scheme", events)
	}
	if got := testutil.ToFloat64(g.skipped.WithLabelValues("cloud-node-controller", cloud.NotOwnedSchemeMismatch)); got != 1 {
		t.Errorf("skipped{scheme_mismatch} = %v, want 1 (counted once per node)", got)
	}

	// A new reason for the same node is told again; an owned node costs nothing.
	undeclared := node("b", "", nil)
	g.Owns(undeclared)
	undeclared.Labels = map[string]string{cloud.LabelNodePlatform: "on-prem"}
	g.Owns(undeclared)
	if !g.Owns(node("c", "local://c", nil)) {
		t.Fatal("a node of the CCM's scheme is not owned")
	}
	if events := drain(rec); len(events) != 2 {
		t.Fatalf("events = %q, want two (undeclared, then declared elsewhere)", events)
	}

	// After Forget (the node was deleted), a node of the same UID is told again.
	g.Forget(foreign)
	g.Owns(foreign)
	if events := drain(rec); len(events) != 1 {
		t.Fatalf("events after Forget = %q, want one", events)
	}
	if got := testutil.ToFloat64(g.skipped.WithLabelValues("cloud-node-controller", cloud.NotOwnedSchemeMismatch)); got != 2 {
		t.Errorf("skipped{scheme_mismatch} = %v, want 2", got)
	}
}

func TestGateSharesItsCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	policy := cloud.NodeOwnership{Platforms: []string{"local"}}
	a, err := New(policy, "route", nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(policy, "lb", nil, reg)
	if err != nil {
		t.Fatalf("a second controller's Gate on the same registry: %v", err)
	}
	a.Owns(node("x", "gce://p/z/x", nil))
	b.Owns(node("x", "gce://p/z/x", nil))
	if n := testutil.CollectAndCount(reg, "nephele_node_ownership_skipped_total"); n != 2 {
		t.Errorf("series = %d, want one per controller", n)
	}
}

func TestNewRefusesABadPolicy(t *testing.T) {
	if _, err := New(cloud.NodeOwnership{Platforms: []string{"Bad Scheme"}}, "x", nil, nil); err == nil {
		t.Fatal("New accepted an invalid platform")
	}
}

func TestChanged(t *testing.T) {
	base := node("a", "", map[string]string{"x": "1"})
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Node)
		want   bool
	}{
		{"another label", func(n *corev1.Node) { n.Labels["x"] = "2" }, false},
		{"provider ID set", func(n *corev1.Node) { n.Spec.ProviderID = "local://a" }, true},
		{"KEP label", func(n *corev1.Node) { n.Labels[cloud.LabelPlatform] = "aws" }, true},
		{"kubelet label", func(n *corev1.Node) { n.Labels[cloud.LabelNodePlatform] = "aws" }, true},
	} {
		n := base.DeepCopy()
		tc.mutate(n)
		if got := Changed(base, n); got != tc.want {
			t.Errorf("%s: Changed = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestGateOwnsEveryNodeByDefault: without platforms (the default, as upstream) every
// node is owned, nothing is counted or told, and Owns neither allocates nor remembers.
func TestGateOwnsEveryNodeByDefault(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	g, err := New(cloud.NodeOwnership{}, "service-lb-controller", rec, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	foreign := node("a", "aws:///i-1", map[string]string{cloud.LabelNodePlatform: "on-prem"})
	if n := testing.AllocsPerRun(100, func() {
		if !g.Owns(foreign) {
			t.Fatal("a node was not owned by a CCM that owns every node")
		}
	}); n != 0 {
		t.Errorf("Owns allocates %v times", n)
	}
	if len(drain(rec)) != 0 || len(g.told) != 0 {
		t.Error("a CCM that owns every node told or remembered something")
	}
}

func TestGateTellsNothingOfASiblingsNode(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	reg := prometheus.NewRegistry()
	// The non-default cloud of a manager serving two: east (the default, adopting
	// undeclared nodes) is its sibling.
	east := cloud.NodeOwnership{Platforms: []string{"east"}, Undeclared: cloud.UndeclaredAdopt}
	west := cloud.NodeOwnership{Platforms: []string{"west"}, Undeclared: cloud.UndeclaredIgnore, Siblings: []cloud.NodeOwnership{east}}
	g, err := New(west, "cloud-node-controller", rec, reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []*corev1.Node{
		node("a", "east://i-1", nil),
		node("b", "", map[string]string{cloud.LabelNodePlatform: "east"}),
		node("c", "", nil), // undeclared: the default sibling adopts it
	} {
		if g.Owns(n) {
			t.Fatalf("west owns %s, a node of its sibling", n.Name)
		}
	}
	if events := drain(rec); len(events) != 0 {
		t.Errorf("events = %q, want none: the manager owns every one of these nodes", events)
	}
	if n := testutil.CollectAndCount(reg, "nephele_node_ownership_skipped_total"); n != 3 {
		t.Errorf("skip series = %d, want 3 (counted all the same)", n)
	}
	// A node nobody in the manager owns is told, naming every cloud's platforms.
	g.Owns(node("d", "aws:///i-1", nil))
	if events := drain(rec); len(events) != 1 || !strings.Contains(events[0], "(west, east)") {
		t.Errorf("events for a node no cloud of the manager owns = %q, want one naming west and east", events)
	}
	// Unless this cloud is quiet: the default cloud tells.
	west.Quiet = true
	quiet, err := New(west, "cloud-node-controller", rec, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if quiet.Owns(node("e", "aws:///i-2", nil)); len(drain(rec)) != 0 {
		t.Error("a quiet cloud told about a node nobody owns")
	}
}

package loadbalancer

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
)

func TestIsBackend(t *testing.T) {
	tests := []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"initialized node", newNode("n"), true},
		{"nil", nil, false},
		{"no provider ID", newNode("n", withoutProviderID()), false},
		{"uninitialized taint", newNode("n", withTaint(cloudproviderapi.TaintExternalCloudProvider)), false},
		{"provider ID but still uninitialized", newNode("n", withTaint(cloudproviderapi.TaintExternalCloudProvider), withTaint("other")), false},
		// KEP-3458: the node stays until it is deleted; the health check drains it.
		{"autoscaler deleting", newNode("n", withTaint(TaintToBeDeleted)), true},
		{"autoscaler deleting and the Node being deleted", newNode("n", withTaint(TaintToBeDeleted), deleting()), false},
		{"unrelated taint", newNode("n", withTaint("example.com/dedicated")), true},
		{"excluded label", newNode("n", withLabel(corev1.LabelNodeExcludeBalancers, "true")), false},
		{"excluded label, empty value", newNode("n", withLabel(corev1.LabelNodeExcludeBalancers, "")), false},
		{"excluded label, not a boolean", newNode("n", withLabel(corev1.LabelNodeExcludeBalancers, "yes-please")), false},
		{"excluded label set to false", newNode("n", withLabel(corev1.LabelNodeExcludeBalancers, "false")), true},
		{"unrelated label", newNode("n", withLabel("example.com/pool", "a")), true},
		{"being deleted", newNode("n", deleting()), false},
		{"not ready still counts", newNode("n", func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
		}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsBackend(tt.node); got != tt.want {
				t.Errorf("IsBackend = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBackendSetUpdate(t *testing.T) {
	type step struct {
		name        string
		node        *corev1.Node // nil deletes nodeName
		nodeName    string
		wantChanged bool
		wantNames   []string
	}
	n1, n2 := newNode("n1"), newNode("n2")
	heartbeat := n1.DeepCopy()
	heartbeat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	heartbeat.ResourceVersion = "42"
	steps := []step{
		{"first node", n1, "n1", true, []string{"n1"}},
		{"same node again", n1.DeepCopy(), "n1", false, []string{"n1"}},
		{"heartbeat", heartbeat, "n1", false, []string{"n1"}},
		{"uninitialized node joins", newNode("n3", withTaint(cloudproviderapi.TaintExternalCloudProvider)), "n3", false, []string{"n1"}},
		{"second node", n2, "n2", true, []string{"n1", "n2"}},
		{"uninitialized node initializes", newNode("n3"), "n3", true, []string{"n1", "n2", "n3"}},
		{"address change", newNode("n2", withIP("10.9.9.9")), "n2", true, []string{"n1", "n2", "n3"}},
		{"unrelated label", newNode("n2", withIP("10.9.9.9"), withLabel("example.com/x", "y")), "n2", false, []string{"n1", "n2", "n3"}},
		{"excluded", newNode("n1", withLabel(corev1.LabelNodeExcludeBalancers, "")), "n1", true, []string{"n2", "n3"}},
		{"excluded node changes", newNode("n1", withLabel(corev1.LabelNodeExcludeBalancers, ""), withIP("10.1.1.1")), "n1", false, []string{"n2", "n3"}},
		{"autoscaler taint keeps the node", newNode("n3", withTaint(TaintToBeDeleted)), "n3", false, []string{"n2", "n3"}},
		{"delete unknown node", nil, "n9", false, []string{"n2", "n3"}},
		{"delete", nil, "n2", true, []string{"n3"}},
		{"delete the tainted node", nil, "n3", true, nil},
	}
	s := newBackendSet()
	var prev uint64
	for _, st := range steps {
		if got := s.update(st.nodeName, st.node); got != st.wantChanged {
			t.Fatalf("%s: update changed = %v, want %v", st.name, got, st.wantChanged)
		}
		snap := s.current()
		var names []string
		for _, b := range snap.backends {
			names = append(names, b.NodeName)
			if b.Node == nil || b.ProviderID != b.Node.Spec.ProviderID || b.NodeName != b.Node.Name {
				t.Fatalf("%s: backend %+v does not match its node", st.name, b)
			}
		}
		if fmt.Sprint(names) != fmt.Sprint(st.wantNames) {
			t.Fatalf("%s: backends %v, want %v (sorted by name)", st.name, names, st.wantNames)
		}
		if snap.hash != s.currentHash() {
			t.Fatalf("%s: snapshot hash %x, set hash %x", st.name, snap.hash, s.currentHash())
		}
		if changed := snap.hash != prev; changed != st.wantChanged {
			t.Fatalf("%s: hash changed = %v, want %v", st.name, changed, st.wantChanged)
		}
		prev = snap.hash
	}
	if s.currentHash() != 0 {
		t.Errorf("empty set hash = %x, want 0", s.currentHash())
	}
}

func TestBackendSetHashIsOrderIndependent(t *testing.T) {
	a, b := newBackendSet(), newBackendSet()
	var nodes []*corev1.Node
	for i := range 50 {
		nodes = append(nodes, newNode(fmt.Sprintf("node-%02d", i), withIP(fmt.Sprintf("10.0.1.%d", i))))
	}
	for i := range nodes {
		a.update(nodes[i].Name, nodes[i])
		b.update(nodes[len(nodes)-1-i].Name, nodes[len(nodes)-1-i])
	}
	if a.currentHash() != b.currentHash() {
		t.Fatalf("same set, different hashes: %x vs %x", a.currentHash(), b.currentHash())
	}
	// Removing and adding back a node restores the hash: a load balancer that
	// already has that set needs no call.
	h := a.currentHash()
	a.update("node-07", nil)
	if a.currentHash() == h {
		t.Fatal("removing a node kept the hash")
	}
	a.update("node-07", nodes[7])
	if a.currentHash() != h {
		t.Fatal("adding the node back did not restore the hash")
	}
	// Moving an address from one node to another is a different set.
	c := newBackendSet()
	c.update("x", newNode("x", withIP("10.0.0.1")))
	c.update("y", newNode("y", withIP("10.0.0.2")))
	d := newBackendSet()
	d.update("x", newNode("x", withIP("10.0.0.2")))
	d.update("y", newNode("y", withIP("10.0.0.1")))
	if c.currentHash() == d.currentHash() {
		t.Fatal("swapping addresses between nodes kept the hash")
	}
}

func TestBackendSetSnapshotIsCached(t *testing.T) {
	s := newBackendSet()
	s.update("n1", newNode("n1"))
	first := s.current()
	if s.current() != first {
		t.Fatal("snapshot rebuilt without a change")
	}
	s.update("n1", newNode("n1")) // heartbeat-like: no change
	if s.current() != first {
		t.Fatal("snapshot rebuilt after an update that changed nothing")
	}
	s.update("n2", newNode("n2"))
	if s.current() == first || len(first.backends) != 1 {
		t.Fatal("snapshot not rebuilt after a change, or the old one was modified")
	}
}

package main

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/controllers/nodeinit"
	"github.com/nephele-dev/nephele/localcloud/api"
)

func TestKubeletNode(t *testing.T) {
	n := kubeletNode("node-7", netip.MustParseAddr("127.200.0.7"))
	if n.Spec.ProviderID != "" {
		t.Errorf("provider ID %q: a kubelet with an external cloud provider sets none", n.Spec.ProviderID)
	}
	if got := n.Annotations[nodeinit.AnnotationProvidedNodeIP]; got != "127.200.0.7" {
		t.Errorf("provided-node-ip annotation = %q, want 127.200.0.7", got)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != cloudproviderapi.TaintExternalCloudProvider ||
		n.Spec.Taints[0].Value != "true" || n.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("taints = %v, want only %s=true:NoSchedule", n.Spec.Taints, cloudproviderapi.TaintExternalCloudProvider)
	}
	want := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.200.0.7"}, {Type: corev1.NodeHostName, Address: "node-7"}}
	if len(n.Status.Addresses) != 2 || n.Status.Addresses[0] != want[0] || n.Status.Addresses[1] != want[1] {
		t.Errorf("addresses = %v, want %v", n.Status.Addresses, want)
	}
	if n.Labels[corev1.LabelHostname] != "node-7" {
		t.Errorf("hostname label = %q", n.Labels[corev1.LabelHostname])
	}
	if ok, _ := nodeInitialized(n); ok {
		t.Error("a freshly registered node counts as initialized")
	}
}

func TestNodeInitialized(t *testing.T) {
	initialized := func() *corev1.Node {
		n := kubeletNode("node-1", netip.MustParseAddr("127.200.0.1"))
		n.Spec.Taints = nil
		n.Spec.ProviderID = "local://i-000000000001"
		n.Labels[corev1.LabelTopologyZone] = "local-a"
		n.Labels[corev1.LabelTopologyRegion] = "local"
		n.Labels[corev1.LabelInstanceTypeStable] = "local.small"
		return n
	}
	tests := []struct {
		name   string
		change func(*corev1.Node)
		want   string // what is missing; empty when initialized
	}{
		{"initialized", func(*corev1.Node) {}, ""},
		{"other taints are fine", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "example.com/dedicated", Effect: corev1.TaintEffectNoSchedule}}
		}, ""},
		{"tainted", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Effect: corev1.TaintEffectNoSchedule}}
		}, "still tainted"},
		{"no provider ID", func(n *corev1.Node) { n.Spec.ProviderID = "" }, "provider ID"},
		{"another provider", func(n *corev1.Node) { n.Spec.ProviderID = "aws:///i-1" }, "provider ID"},
		{"no zone", func(n *corev1.Node) { delete(n.Labels, corev1.LabelTopologyZone) }, corev1.LabelTopologyZone},
		{"no instance type", func(n *corev1.Node) { delete(n.Labels, corev1.LabelInstanceTypeStable) }, corev1.LabelInstanceTypeStable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := initialized()
			tt.change(n)
			ok, why := nodeInitialized(n)
			if ok != (tt.want == "") || !strings.Contains(why, tt.want) {
				t.Errorf("nodeInitialized() = %v, %q; want missing %q", ok, why, tt.want)
			}
		})
	}
}

func TestInternalIP(t *testing.T) {
	inst := func(addrs ...api.Address) *api.Instance {
		return &api.Instance{ID: "i-000000000001", Name: "node-1", Addresses: addrs}
	}
	tests := []struct {
		name string
		inst *api.Instance
		want string // address, or part of the error
		ok   bool
	}{
		{"internal IP", inst(api.Address{Type: api.AddressHostname, Address: "node-1"}, api.Address{Type: api.AddressInternalIP, Address: "127.200.0.1"}), "127.200.0.1", true},
		{"none", inst(api.Address{Type: api.AddressExternalIP, Address: "192.0.2.1"}), "no InternalIP", false},
		{"garbage", inst(api.Address{Type: api.AddressInternalIP, Address: "not-an-ip"}), "not-an-ip", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := internalIP(tt.inst)
			switch {
			case tt.ok && (err != nil || got.String() != tt.want):
				t.Errorf("internalIP() = %v, %v; want %s", got, err, tt.want)
			case !tt.ok && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("internalIP() = %v, %v; want an error containing %q", got, err, tt.want)
			}
		})
	}
}

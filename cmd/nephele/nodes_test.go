package main

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/controllers/nodeinit"
	"github.com/nephele-dev/nephele/localcluster"
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
	if ok, _ := localcluster.Initialized(n); ok {
		t.Error("a freshly registered node counts as initialized")
	}
}

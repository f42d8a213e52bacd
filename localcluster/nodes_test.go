package localcluster

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/localcloud/api"
)

func TestInitialized(t *testing.T) {
	initialized := func() *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{
				corev1.LabelTopologyZone:       "local-a",
				corev1.LabelTopologyRegion:     "local",
				corev1.LabelInstanceTypeStable: "local.small",
			}},
			Spec: corev1.NodeSpec{ProviderID: "local://i-000000000001"},
		}
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
			ok, why := Initialized(n)
			if ok != (tt.want == "") || !strings.Contains(why, tt.want) {
				t.Errorf("Initialized() = %v, %q; want missing %q", ok, why, tt.want)
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
			got, err := InternalIP(tt.inst)
			switch {
			case tt.ok && (err != nil || got.String() != tt.want):
				t.Errorf("InternalIP() = %v, %v; want %s", got, err, tt.want)
			case !tt.ok && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("InternalIP() = %v, %v; want an error containing %q", got, err, tt.want)
			}
		})
	}
}

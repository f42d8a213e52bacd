package localcluster

import (
	"net/netip"
	"strings"
	"testing"
)

func TestClusterDNSAddress(t *testing.T) {
	tests := []struct {
		cidr    string
		want    string
		wantErr bool
	}{
		{"10.96.0.0/16", "10.96.0.10", false},
		{"10.171.0.0/16", "10.171.0.10", false},
		{"10.96.0.5/16", "10.96.0.10", false}, // the range, not the address given
		{"10.96.0.0/29", "", true},            // 8 addresses: no 10th
	}
	for _, tt := range tests {
		t.Run(tt.cidr, func(t *testing.T) {
			got, err := ClusterDNSAddress(netip.MustParsePrefix(tt.cidr))
			if (err != nil) != tt.wantErr || (!tt.wantErr && got.String() != tt.want) {
				t.Errorf("ClusterDNSAddress(%s) = %s, %v; want %s, error %t", tt.cidr, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestDNSObjects checks what the DNS add-on must be for pods and for upstream's tests:
// the Service at the given address under kube-dns, the reverse zones served, and
// nothing forwarded off the machine.
func TestDNSObjects(t *testing.T) {
	addr := netip.MustParseAddr("10.96.0.10")
	_, role, binding, cm, dep, svc := dnsObjects(addr, "nephele.local/coredns@sha256:0123")
	if svc.Name != "kube-dns" || svc.Namespace != "kube-system" || svc.Spec.ClusterIP != "10.96.0.10" {
		t.Errorf("Service %s/%s at %s", svc.Namespace, svc.Name, svc.Spec.ClusterIP)
	}
	corefile := cm.Data["Corefile"]
	for _, want := range []string{"kubernetes cluster.local in-addr.arpa ip6.arpa", "health :8080", "ready :8181", "rcode NXDOMAIN"} {
		if !strings.Contains(corefile, want) {
			t.Errorf("the Corefile lacks %q:\n%s", want, corefile)
		}
	}
	for _, never := range []string{"forward", "proxy", "/etc/resolv.conf"} {
		if strings.Contains(corefile, never) {
			t.Errorf("the Corefile says %q: it would send lookups off the machine:\n%s", never, corefile)
		}
	}
	if binding.RoleRef.Name != role.Name || binding.Subjects[0].Name != dep.Spec.Template.Spec.ServiceAccountName {
		t.Errorf("the binding %+v does not grant %s to the pods' ServiceAccount", binding, role.Name)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if c.ReadinessProbe == nil || c.LivenessProbe == nil {
		t.Error("CoreDNS has no readiness or liveness probe")
	}
	if c.Image != "nephele.local/coredns@sha256:0123" {
		t.Errorf("image %s", c.Image)
	}
}

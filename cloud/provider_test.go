package cloud

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestSameNodeAddresses(t *testing.T) {
	ip := func(a string) corev1.NodeAddress { return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a} }
	host := corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n1"}
	tests := []struct {
		name string
		a, b []corev1.NodeAddress
		want bool
	}{
		{"both empty", nil, []corev1.NodeAddress{}, true},
		{"same order", []corev1.NodeAddress{ip("10.0.0.1"), host}, []corev1.NodeAddress{ip("10.0.0.1"), host}, true},
		{"other order", []corev1.NodeAddress{ip("10.0.0.1"), host}, []corev1.NodeAddress{host, ip("10.0.0.1")}, true},
		{"address changed", []corev1.NodeAddress{ip("10.0.0.1")}, []corev1.NodeAddress{ip("10.0.0.2")}, false},
		{"type changed", []corev1.NodeAddress{ip("10.0.0.1")}, []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "10.0.0.1"}}, false},
		{"one more", []corev1.NodeAddress{ip("10.0.0.1")}, []corev1.NodeAddress{ip("10.0.0.1"), host}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SameNodeAddresses(tt.a, tt.b); got != tt.want {
				t.Errorf("SameNodeAddresses = %v, want %v", got, tt.want)
			}
		})
	}
}

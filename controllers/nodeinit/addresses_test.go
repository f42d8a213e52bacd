package nodeinit

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func addr(t corev1.NodeAddressType, a string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: t, Address: a}
}

func internal(a string) corev1.NodeAddress { return addr(corev1.NodeInternalIP, a) }
func external(a string) corev1.NodeAddress { return addr(corev1.NodeExternalIP, a) }
func hostname(a string) corev1.NodeAddress { return addr(corev1.NodeHostName, a) }

func nodeWith(annotation string, addrs ...corev1.NodeAddress) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: addrs}}
	if annotation != "" {
		n.Annotations = map[string]string{AnnotationProvidedNodeIP: annotation}
	}
	return n
}

func TestParseProvidedNodeIP(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "10.0.0.1", want: []string{"10.0.0.1"}},
		{in: "fd00::1", want: []string{"fd00::1"}},
		{in: "10.0.0.1,fd00::1", want: []string{"10.0.0.1", "fd00::1"}},
		{in: "fd00::1,10.0.0.1", want: []string{"fd00::1", "10.0.0.1"}},
		{in: "::ffff:10.0.0.1", want: []string{"10.0.0.1"}},
		{in: "", wantErr: "not an IP"},
		{in: "node-1", wantErr: "not an IP"},
		{in: "10.0.0.1,", wantErr: "not an IP"},
		{in: "10.0.0.1, fd00::1", wantErr: "not an IP"},
		{in: "10.0.0.1,10.0.0.2", wantErr: "one IPv4 and one IPv6"},
		{in: "0.0.0.0,fd00::1", wantErr: "cannot include"},
		{in: "10.0.0.1,fd00::1,10.0.0.2", wantErr: "one IP or a dual-stack pair"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseProvidedNodeIP(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseProvidedNodeIP(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseProvidedNodeIP(%q): %v", tt.in, err)
			}
			var gotS []string
			for _, ip := range got {
				gotS = append(gotS, ip.String())
			}
			if !slices.Equal(gotS, tt.want) {
				t.Errorf("parseProvidedNodeIP(%q) = %v, want %v", tt.in, gotS, tt.want)
			}
		})
	}
}

func TestDesiredAddresses(t *testing.T) {
	cloudAddrs := []corev1.NodeAddress{
		internal("10.0.0.1"), internal("10.0.0.2"), external("203.0.113.1"), internal("fd00::1"), hostname("vm-1"),
	}
	tests := []struct {
		name        string
		node        *corev1.Node
		cloud       []corev1.NodeAddress
		want        []corev1.NodeAddress
		wantMissing string // the provided IP reported missing
		wantErr     string
	}{
		{
			name:  "no annotation: the cloud's addresses as they are",
			node:  nodeWith(""),
			cloud: cloudAddrs,
			want:  cloudAddrs,
		},
		{
			name:  "provided IP first and the only address of its type",
			node:  nodeWith("10.0.0.2"),
			cloud: cloudAddrs,
			want:  []corev1.NodeAddress{internal("10.0.0.2"), external("203.0.113.1"), hostname("vm-1")},
		},
		{
			name:  "provided external IP keeps the internal ones",
			node:  nodeWith("203.0.113.1"),
			cloud: cloudAddrs,
			want:  []corev1.NodeAddress{external("203.0.113.1"), internal("10.0.0.1"), internal("10.0.0.2"), internal("fd00::1"), hostname("vm-1")},
		},
		{
			name:  "dual-stack pair",
			node:  nodeWith("fd00::1,10.0.0.2"),
			cloud: cloudAddrs,
			want:  []corev1.NodeAddress{internal("fd00::1"), internal("10.0.0.2"), external("203.0.113.1"), hostname("vm-1")},
		},
		{
			name:  "IPv6 written differently still matches",
			node:  nodeWith("fd00:0::0001"),
			cloud: cloudAddrs,
			want:  []corev1.NodeAddress{internal("fd00::1"), external("203.0.113.1"), hostname("vm-1")},
		},
		{
			name:        "provided IP the cloud does not know",
			node:        nodeWith("10.9.9.9"),
			cloud:       cloudAddrs,
			wantMissing: "10.9.9.9",
		},
		{
			name:        "second IP of a pair the cloud does not know",
			node:        nodeWith("10.0.0.1,fd00::99"),
			cloud:       cloudAddrs,
			wantMissing: "fd00::99",
		},
		{
			name:    "malformed annotation",
			node:    nodeWith("10.0.0.300"),
			cloud:   cloudAddrs,
			wantErr: "not an IP",
		},
		{
			name:  "the kubelet's hostname is kept when the cloud has none",
			node:  nodeWith("", internal("192.168.1.1"), hostname("node-1")),
			cloud: []corev1.NodeAddress{internal("10.0.0.1")},
			want:  []corev1.NodeAddress{internal("10.0.0.1"), hostname("node-1")},
		},
		{
			name:  "the cloud's hostname wins",
			node:  nodeWith("", hostname("node-1")),
			cloud: []corev1.NodeAddress{internal("10.0.0.1"), hostname("vm-1")},
			want:  []corev1.NodeAddress{internal("10.0.0.1"), hostname("vm-1")},
		},
		{
			name:  "hostname kept and provided IP applied",
			node:  nodeWith("10.0.0.2", hostname("node-1")),
			cloud: []corev1.NodeAddress{internal("10.0.0.1"), internal("10.0.0.2")},
			want:  []corev1.NodeAddress{internal("10.0.0.2"), hostname("node-1")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(tt.cloud)
			got, err := desiredAddresses(tt.node, tt.cloud)
			if !slices.Equal(before, tt.cloud) {
				t.Fatalf("desiredAddresses changed the cloud's slice: %v, was %v", tt.cloud, before)
			}
			if tt.wantMissing != "" {
				var missing *missingNodeIPError
				if !errors.As(err, &missing) || missing.ip.String() != tt.wantMissing {
					t.Fatalf("desiredAddresses = %v, %v; want a missing node IP error for %s", got, err, tt.wantMissing)
				}
				if !strings.Contains(err.Error(), tt.wantMissing) {
					t.Errorf("error %q does not name the IP %s", err, tt.wantMissing)
				}
				return
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("desiredAddresses = %v, %v; want error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("desiredAddresses: %v", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("desiredAddresses = %v\nwant %v", formatAddresses(got), formatAddresses(tt.want))
			}
		})
	}
}

func TestDesiredAddressesDoesNotAllocateWhenUnchanged(t *testing.T) {
	node := nodeWith("", internal("10.0.0.1"), hostname("vm-1"))
	cloudAddrs := []corev1.NodeAddress{internal("10.0.0.1"), hostname("vm-1")}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := desiredAddresses(node, cloudAddrs); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("desiredAddresses allocated %v times per call for an unchanged node, want 0", allocs)
	}
}

func TestDroppedTypes(t *testing.T) {
	tests := []struct {
		name          string
		current, next []corev1.NodeAddress
		want          []corev1.NodeAddressType
	}{
		{name: "same types", current: []corev1.NodeAddress{internal("10.0.0.1")}, next: []corev1.NodeAddress{internal("10.0.0.2")}},
		{name: "type added", current: []corev1.NodeAddress{internal("10.0.0.1")}, next: []corev1.NodeAddress{internal("10.0.0.1"), external("203.0.113.1")}},
		{name: "one of two of a type left", current: []corev1.NodeAddress{internal("10.0.0.1"), internal("10.0.0.2")}, next: []corev1.NodeAddress{internal("10.0.0.1")}},
		{
			name:    "internal lost",
			current: []corev1.NodeAddress{internal("10.0.0.1"), external("203.0.113.1"), hostname("h")},
			next:    []corev1.NodeAddress{external("203.0.113.1"), hostname("h")},
			want:    []corev1.NodeAddressType{corev1.NodeInternalIP},
		},
		{
			name:    "everything lost",
			current: []corev1.NodeAddress{internal("10.0.0.1"), internal("10.0.0.2"), hostname("h")},
			next:    nil,
			want:    []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeHostName},
		},
		{name: "node had none", next: []corev1.NodeAddress{internal("10.0.0.1")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := droppedTypes(tt.current, tt.next); !slices.Equal(got, tt.want) {
				t.Errorf("droppedTypes = %v, want %v", got, tt.want)
			}
		})
	}
}

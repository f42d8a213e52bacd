package local

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/localcloud/api"
)

func addr(typ corev1.NodeAddressType, a string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: typ, Address: a}
}

func TestToInstance(t *testing.T) {
	in := &api.Instance{
		ID: "i-00000000000a", Name: "node-a", Zone: "local-b", Region: "local", InstanceType: "local.large",
		Addresses: []api.Address{
			{Type: api.AddressInternalIP, Address: "127.200.0.1"},
			{Type: api.AddressExternalIP, Address: "192.0.2.1"},
			{Type: api.AddressHostname, Address: "node-a"},
			{Type: api.AddressInternalDNS, Address: "node-a.internal"},
			{Type: "", Address: "dropped"},
		},
		Labels: map[string]string{"example.com/pool": "edge"},
		State:  api.InstanceStopped,
	}
	got, err := toInstance(ProviderName, in)
	if err != nil {
		t.Fatal(err)
	}
	want := &cloud.Instance{
		ProviderID: "local://i-00000000000a", NodeName: "node-a", InstanceType: "local.large", Zone: "local-b", Region: "local",
		Addresses: []corev1.NodeAddress{
			addr(corev1.NodeInternalIP, "127.200.0.1"), addr(corev1.NodeExternalIP, "192.0.2.1"),
			addr(corev1.NodeHostName, "node-a"), addr(corev1.NodeInternalDNS, "node-a.internal"),
		},
		Labels: map[string]string{"example.com/pool": "edge"},
		State:  cloud.InstanceStopped,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("toInstance =\n%+v\nwant\n%+v", got, want)
	}
	in.Labels["example.com/pool"] = "changed"
	if got.Labels["example.com/pool"] != "edge" {
		t.Error("toInstance shares the label map with the API object")
	}

	noLabels, err := toInstance(ProviderName, &api.Instance{ID: "i-1", Name: "n", State: api.InstanceRunning})
	if err != nil {
		t.Fatal(err)
	}
	if noLabels.Labels != nil {
		t.Errorf("labels %v for an instance without labels, want none", noLabels.Labels)
	}

	if _, err := toInstance(ProviderName, &api.Instance{ID: "", Name: "n"}); err == nil {
		t.Error("toInstance accepted an instance without an ID")
	}
	if _, err := toInstance(ProviderName, &api.Instance{ID: "i 1", Name: "n"}); err == nil {
		t.Error("toInstance accepted an ID with white space")
	}
}

func TestToState(t *testing.T) {
	for in, want := range map[api.InstanceState]cloud.InstanceState{
		api.InstanceRunning:    cloud.InstanceRunning,
		api.InstanceStopped:    cloud.InstanceStopped,
		api.InstanceTerminated: cloud.InstanceTerminated,
		"rebooting":            cloud.InstanceUnknown,
		"":                     cloud.InstanceUnknown,
	} {
		if got := toState(in); got != want {
			t.Errorf("toState(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestInstanceID(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
		// scheme is the provider's ProviderIDScheme; empty means ProviderName.
		scheme string
	}{
		{in: "b://i-1", want: "i-1", ok: true, scheme: "b"},
		{in: "local://i-1", scheme: "b"},
		{"local://i-000000000001", "i-000000000001", true, ""},
		{"local:///i-000000000001", "i-000000000001", true, ""},
		{"aws:///us-east-1a/i-0abc", "", false, ""},
		{"i-000000000001", "", false, ""},
		{"local://", "", false, ""},
		{"local://i-1 2", "", false, ""},
	}
	for _, tt := range tests {
		scheme := tt.scheme
		if scheme == "" {
			scheme = ProviderName
		}
		got, err := instanceID(scheme, tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("instanceID(%q) = %q, %v; want %q, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestBackendAddress(t *testing.T) {
	tests := []struct {
		name   string
		addrs  []corev1.NodeAddress
		family corev1.IPFamily
		want   string
	}{
		{"internal first", []corev1.NodeAddress{addr(corev1.NodeExternalIP, "192.0.2.1"), addr(corev1.NodeInternalIP, "10.0.0.1")}, "", "10.0.0.1"},
		{"external fallback", []corev1.NodeAddress{addr(corev1.NodeHostName, "n"), addr(corev1.NodeExternalIP, "192.0.2.1")}, "", "192.0.2.1"},
		{"family preferred", []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.1"), addr(corev1.NodeInternalIP, "fd00::1")}, corev1.IPv6Protocol, "fd00::1"},
		{"ipv4 preferred", []corev1.NodeAddress{addr(corev1.NodeInternalIP, "fd00::1"), addr(corev1.NodeInternalIP, "10.0.0.1")}, corev1.IPv4Protocol, "10.0.0.1"},
		{"other family when alone", []corev1.NodeAddress{addr(corev1.NodeInternalIP, "fd00::1")}, corev1.IPv4Protocol, "fd00::1"},
		{"internal of other family beats external", []corev1.NodeAddress{addr(corev1.NodeExternalIP, "192.0.2.1"), addr(corev1.NodeInternalIP, "fd00::1")}, corev1.IPv4Protocol, "fd00::1"},
		{"garbage skipped", []corev1.NodeAddress{addr(corev1.NodeInternalIP, "not-an-ip"), addr(corev1.NodeInternalIP, "0.0.0.0"), addr(corev1.NodeExternalIP, "192.0.2.9")}, "", "192.0.2.9"},
		{"mapped IPv4 unmapped", []corev1.NodeAddress{addr(corev1.NodeInternalIP, "::ffff:10.0.0.3")}, "", "10.0.0.3"},
		{"nothing usable", []corev1.NodeAddress{addr(corev1.NodeHostName, "n"), addr(corev1.NodeInternalDNS, "n.local")}, "", ""},
		{"no addresses", nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := backendAddress(tt.addrs, tt.family)
			if tt.want == "" {
				if ok {
					t.Errorf("backendAddress = %s, want none", got)
				}
				return
			}
			if !ok || got.String() != tt.want {
				t.Errorf("backendAddress = %v, %v; want %s", got, ok, tt.want)
			}
		})
	}
}

func TestToSpec(t *testing.T) {
	nodeOnly := &corev1.Node{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.4")}}}
	spec := &cloud.LoadBalancerSpec{
		Name:        "a1234",
		ClusterName: "kubernetes",
		Service:     types.NamespacedName{Namespace: "default", Name: "web"},
		Ports: []cloud.LoadBalancerPort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080},
			{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053},
		},
		Backends: []cloud.Backend{
			{NodeName: "n1", ProviderID: "local://i-1", Addresses: []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.1")}},
			{NodeName: "n2", Addresses: []corev1.NodeAddress{addr(corev1.NodeExternalIP, "192.0.2.2")}},
			{NodeName: "n3", Addresses: []corev1.NodeAddress{addr(corev1.NodeHostName, "n3")}},
			{NodeName: "n4", Node: nodeOnly},
			{NodeName: "n1", Addresses: []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.9")}},
			{NodeName: "", Addresses: []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.8")}},
		},
		HealthCheckNodePort:    32000,
		ExternalTrafficPolicy:  corev1.ServiceExternalTrafficPolicyLocal,
		SourceRanges:           []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/64")},
		IPFamilies:             []corev1.IPFamily{corev1.IPv4Protocol},
		RequestedIP:            "127.100.0.7",
		SessionAffinity:        corev1.ServiceAffinityClientIP,
		SessionAffinityTimeout: 125 * time.Second,
	}
	got, skipped := toSpec(spec, cloud.KubeProxyHealthzPort)
	want := api.LoadBalancerSpec{
		ClusterName: "kubernetes",
		Service:     "default/web",
		Ports: []api.Port{
			{Name: "http", Protocol: api.ProtocolTCP, Port: 80, NodePort: 30080},
			{Name: "dns", Protocol: api.ProtocolUDP, Port: 53, NodePort: 30053},
		},
		Backends: []api.Backend{
			{NodeName: "n1", Address: "10.0.0.1"},
			{NodeName: "n2", Address: "192.0.2.2"},
			{NodeName: "n4", Address: "10.0.0.4"},
		},
		HealthCheckNodePort:           32000,
		SourceRanges:                  []string{"10.0.0.0/8", "fd00::/64"},
		RequestedIP:                   "127.100.0.7",
		SessionAffinity:               api.SessionAffinityClientIP,
		SessionAffinityTimeoutSeconds: 125,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("toSpec =\n%+v\nwant\n%+v", got, want)
	}
	wantSkipped := []skippedBackend{
		{NodeName: "n3", Reason: "the node has no usable InternalIP or ExternalIP address"},
		{NodeName: "n1", Reason: "the node is listed twice"},
		{NodeName: "", Reason: "the backend has no node name"},
	}
	if !reflect.DeepEqual(skipped, wantSkipped) {
		t.Errorf("skipped = %+v, want %+v", skipped, wantSkipped)
	}

	empty, _ := toSpec(&cloud.LoadBalancerSpec{Name: "x", Ports: spec.Ports, SessionAffinity: corev1.ServiceAffinityNone}, ProxyHealthzOff)
	if empty.SessionAffinity != "" || empty.SessionAffinityTimeoutSeconds != 0 {
		t.Errorf("affinity None maps to %q, %d; want none", empty.SessionAffinity, empty.SessionAffinityTimeoutSeconds)
	}
	if empty.Backends == nil || len(empty.Backends) != 0 || empty.Service != "" {
		t.Errorf("spec without backends or service maps to backends %#v, service %q; want an empty list (the whole, empty set) and no service", empty.Backends, empty.Service)
	}
}

func TestHealthCheckPort(t *testing.T) {
	tests := []struct {
		name         string
		policy       corev1.ServiceExternalTrafficPolicy
		hcNodePort   int32
		proxyHealthz int32
		want         int32
	}{
		{name: "Local: the Service's health check node port", policy: corev1.ServiceExternalTrafficPolicyLocal, hcNodePort: 32000, proxyHealthz: 10256, want: 32000},
		{name: "Local without one: TCP connects", policy: corev1.ServiceExternalTrafficPolicyLocal, proxyHealthz: 10256, want: 0},
		{name: "Cluster: kube-proxy's healthz", policy: corev1.ServiceExternalTrafficPolicyCluster, proxyHealthz: 10256, want: 10256},
		{name: "no policy is Cluster", proxyHealthz: 20256, want: 20256},
		{name: "Cluster, kube-proxy checks off: TCP connects", policy: corev1.ServiceExternalTrafficPolicyCluster, proxyHealthz: ProxyHealthzOff, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &cloud.LoadBalancerSpec{Name: "x", ExternalTrafficPolicy: tt.policy, HealthCheckNodePort: tt.hcNodePort}
			if got := healthCheckPort(spec, tt.proxyHealthz); got != tt.want {
				t.Errorf("healthCheckPort = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestToStatus(t *testing.T) {
	tests := []struct {
		cloud api.IPMode
		want  corev1.LoadBalancerIPMode
	}{
		{api.IPModeVIP, corev1.LoadBalancerIPModeVIP},
		{api.IPModeProxy, corev1.LoadBalancerIPModeProxy},
		{"", corev1.LoadBalancerIPModeProxy}, // a cloud from before ipMode: a proxy
	}
	for _, tt := range tests {
		st, err := toStatus(&api.LoadBalancer{Name: "lb", Status: api.LoadBalancerStatus{VIP: "127.100.0.3", IPMode: tt.cloud}})
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Ingress) != 1 || st.Ingress[0].IP != "127.100.0.3" || st.Ingress[0].Hostname != "" {
			t.Fatalf("status %+v, want one ingress with IP 127.100.0.3", st)
		}
		if st.Ingress[0].IPMode == nil || *st.Ingress[0].IPMode != tt.want {
			t.Errorf("the cloud's ipMode %q maps to %v, want %s", tt.cloud, st.Ingress[0].IPMode, tt.want)
		}
	}
	for _, vip := range []string{"", "nope"} {
		if _, err := toStatus(&api.LoadBalancer{Name: "lb", Status: api.LoadBalancerStatus{VIP: vip}}); err == nil || cloud.IsNotFound(err) {
			t.Errorf("toStatus with VIP %q = %v, want a temporary error", vip, err)
		}
	}
}

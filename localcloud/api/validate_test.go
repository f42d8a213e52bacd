package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"
)

func lbSpec(mutate ...func(*LoadBalancerSpec)) LoadBalancerSpec {
	s := LoadBalancerSpec{
		ClusterName: "kubernetes",
		Service:     "default/web",
		Ports:       []Port{{Name: "http", Protocol: ProtocolTCP, Port: 80, NodePort: 30080}, {Protocol: ProtocolUDP, Port: 80, NodePort: 30081}},
		Backends:    []Backend{{NodeName: "node-1", Address: "10.0.0.1"}, {NodeName: "node-2", Address: "fd00::2"}},
		SourceRanges: []string{
			"10.0.0.0/8", "127.0.0.1/32",
		},
		HealthCheckNodePort: 32000,
	}
	for _, m := range mutate {
		m(&s)
	}
	return s
}

func instanceSpec(mutate ...func(*InstanceSpec)) InstanceSpec {
	s := InstanceSpec{
		Name:      "node-1.example",
		Zone:      "local-a",
		Addresses: []Address{{Type: AddressInternalIP, Address: "10.0.0.1"}, {Type: AddressHostname, Address: "node-1"}},
		Labels:    map[string]string{"example.com/pool": "a"},
	}
	for _, m := range mutate {
		m(&s)
	}
	return s
}

// wantField checks that err is a *FieldError naming field ("" means no error).
func wantField(t *testing.T, err error, field string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v, want a *FieldError for %s", err, field)
	}
	if fe.Field != field {
		t.Fatalf("error names field %q (%v), want %q", fe.Field, err, field)
	}
}

func TestLoadBalancerSpecValidate(t *testing.T) {
	tests := []struct {
		name  string
		spec  LoadBalancerSpec
		field string
	}{
		{name: "valid", spec: lbSpec()},
		{name: "no backends is fine", spec: lbSpec(func(s *LoadBalancerSpec) { s.Backends = nil })},
		{name: "SCTP", spec: lbSpec(func(s *LoadBalancerSpec) { s.Ports[0].Protocol = "SCTP" }), field: "spec.ports[0].protocol"},
		{name: "lower-case protocol", spec: lbSpec(func(s *LoadBalancerSpec) { s.Ports[1].Protocol = "udp" }), field: "spec.ports[1].protocol"},
		{name: "missing protocol", spec: lbSpec(func(s *LoadBalancerSpec) { s.Ports[0].Protocol = "" }), field: "spec.ports[0].protocol"},
		{name: "no ports", spec: lbSpec(func(s *LoadBalancerSpec) { s.Ports = nil }), field: "spec.ports"},
		{name: "port 0", spec: lbSpec(func(s *LoadBalancerSpec) { s.Ports[0].Port = 0 }), field: "spec.ports[0].port"},
		{name: "port too big", spec: lbSpec(func(s *LoadBalancerSpec) { s.Ports[1].Port = 65536 }), field: "spec.ports[1].port"},
		{name: "no node port (the server says whether its data plane needs one)", spec: lbSpec(func(s *LoadBalancerSpec) { s.Ports[0].NodePort = 0 })},
		{name: "negative node port", spec: lbSpec(func(s *LoadBalancerSpec) { s.Ports[0].NodePort = -1 }), field: "spec.ports[0].nodePort"},
		{name: "ClientIP affinity", spec: lbSpec(func(s *LoadBalancerSpec) { s.SessionAffinity = SessionAffinityClientIP })},
		{name: "ClientIP affinity with a timeout", spec: lbSpec(func(s *LoadBalancerSpec) {
			s.SessionAffinity, s.SessionAffinityTimeoutSeconds = SessionAffinityClientIP, 125
		})},
		{name: "affinity None", spec: lbSpec(func(s *LoadBalancerSpec) { s.SessionAffinity = SessionAffinityNone })},
		{name: "unknown affinity", spec: lbSpec(func(s *LoadBalancerSpec) { s.SessionAffinity = "Cookie" }), field: "spec.sessionAffinity"},
		{name: "affinity timeout too long", spec: lbSpec(func(s *LoadBalancerSpec) {
			s.SessionAffinity, s.SessionAffinityTimeoutSeconds = SessionAffinityClientIP, 86401
		}), field: "spec.sessionAffinityTimeoutSeconds"},
		{name: "affinity timeout without affinity", spec: lbSpec(func(s *LoadBalancerSpec) { s.SessionAffinityTimeoutSeconds = 60 }), field: "spec.sessionAffinityTimeoutSeconds"},
		{name: "duplicate listener", spec: lbSpec(func(s *LoadBalancerSpec) { s.Ports[1].Protocol = ProtocolTCP }), field: "spec.ports[1].port"},
		{name: "ports at the cap", spec: lbSpec(func(s *LoadBalancerSpec) { s.Ports = distinctPorts(MaxLoadBalancerPorts) })},
		{name: "ports over the cap", spec: lbSpec(func(s *LoadBalancerSpec) { s.Ports = distinctPorts(MaxLoadBalancerPorts + 1) }), field: "spec.ports"},
		{name: "source ranges over the cap", spec: lbSpec(func(s *LoadBalancerSpec) {
			s.SourceRanges = slices.Repeat([]string{"10.0.0.0/8"}, MaxSourceRanges+1)
		}), field: "spec.sourceRanges"},
		{name: "backends over the cap", spec: lbSpec(func(s *LoadBalancerSpec) {
			s.Backends = make([]Backend, MaxBackends+1)
		}), field: "spec.backends"},
		{name: "bad backend address", spec: lbSpec(func(s *LoadBalancerSpec) { s.Backends[1].Address = "node-2" }), field: "spec.backends[1].address"},
		{name: "zoned backend address", spec: lbSpec(func(s *LoadBalancerSpec) { s.Backends[1].Address = "fe80::1%eth0" }), field: "spec.backends[1].address"},
		{name: "backend without name", spec: lbSpec(func(s *LoadBalancerSpec) { s.Backends[0].NodeName = "" }), field: "spec.backends[0].nodeName"},
		{name: "duplicate backend", spec: lbSpec(func(s *LoadBalancerSpec) { s.Backends[1].NodeName = "node-1" }), field: "spec.backends[1].nodeName"},
		{name: "bad source range", spec: lbSpec(func(s *LoadBalancerSpec) { s.SourceRanges[1] = "10.0.0.1" }), field: "spec.sourceRanges[1]"},
		{name: "health check port", spec: lbSpec(func(s *LoadBalancerSpec) { s.HealthCheckNodePort = 70000 }), field: "spec.healthCheckNodePort"},
		{name: "requested IP", spec: lbSpec(func(s *LoadBalancerSpec) { s.RequestedIP = "x" }), field: "spec.requestedIP"},
		{name: "cluster name", spec: lbSpec(func(s *LoadBalancerSpec) { s.ClusterName = "a/b" }), field: "spec.clusterName"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantField(t, tt.spec.Validate(), tt.field) })
	}
}

func TestInstanceSpecValidate(t *testing.T) {
	tests := []struct {
		name  string
		spec  InstanceSpec
		field string
	}{
		{name: "valid", spec: instanceSpec()},
		{name: "only a name", spec: InstanceSpec{Name: "n"}},
		{name: "no name", spec: instanceSpec(func(s *InstanceSpec) { s.Name = "" }), field: "spec.name"},
		{name: "upper-case name", spec: instanceSpec(func(s *InstanceSpec) { s.Name = "Node" }), field: "spec.name"},
		{name: "name ending in a dash", spec: instanceSpec(func(s *InstanceSpec) { s.Name = "node-" }), field: "spec.name"},
		{name: "zone with a slash", spec: instanceSpec(func(s *InstanceSpec) { s.Zone = "a/b" }), field: "spec.zone"},
		{name: "bad address type", spec: instanceSpec(func(s *InstanceSpec) { s.Addresses[0].Type = "Internal" }), field: "spec.addresses[0].type"},
		{name: "bad IP", spec: instanceSpec(func(s *InstanceSpec) { s.Addresses[0].Address = "10.0.0" }), field: "spec.addresses[0].address"},
		{name: "empty host name", spec: instanceSpec(func(s *InstanceSpec) { s.Addresses[1].Address = "" }), field: "spec.addresses[1].address"},
		{name: "empty label key", spec: instanceSpec(func(s *InstanceSpec) { s.Labels[""] = "x" }), field: `spec.labels[""]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantField(t, tt.spec.Validate(), tt.field) })
	}
}

func TestRouteSpecValidate(t *testing.T) {
	tests := []struct {
		name  string
		spec  RouteSpec
		field string
	}{
		{name: "by node", spec: RouteSpec{DestinationCIDR: "10.244.1.0/24", TargetNode: "node-1"}},
		{name: "by instance", spec: RouteSpec{Name: "r1", DestinationCIDR: "fd00:1::/64", TargetInstance: "i-000000000001"}},
		{name: "no destination", spec: RouteSpec{TargetNode: "node-1"}, field: "spec.destinationCIDR"},
		{name: "host bits", spec: RouteSpec{DestinationCIDR: "10.244.1.1/24", TargetNode: "node-1"}, field: "spec.destinationCIDR"},
		{name: "no target", spec: RouteSpec{DestinationCIDR: "10.244.1.0/24"}, field: "spec.targetNode"},
		{name: "bad name", spec: RouteSpec{Name: "-x", DestinationCIDR: "10.244.1.0/24", TargetNode: "n"}, field: "spec.name"},
		{name: "node addresses", spec: RouteSpec{DestinationCIDR: "10.244.1.0/24", TargetNode: "n", TargetNodeAddresses: []Address{
			{Type: AddressInternalIP, Address: "10.0.0.1"}, {Type: "SomethingNew", Address: "any thing"}}}},
		{name: "node address without type", spec: RouteSpec{DestinationCIDR: "10.244.1.0/24", TargetNode: "n", TargetNodeAddresses: []Address{
			{Type: AddressInternalIP, Address: "10.0.0.1"}, {Address: "10.0.0.2"}}}, field: "spec.targetNodeAddresses[1].type"},
		{name: "empty node address", spec: RouteSpec{DestinationCIDR: "10.244.1.0/24", TargetNode: "n", TargetNodeAddresses: []Address{
			{Type: AddressHostname}}}, field: "spec.targetNodeAddresses[0].address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantField(t, tt.spec.Validate(), tt.field) })
	}
}

func TestFaultValidate(t *testing.T) {
	d := func(s string) Duration {
		v, _ := time.ParseDuration(s)
		return Duration{v}
	}
	tests := []struct {
		name   string
		faults []Fault
		field  string
	}{
		{name: "valid", faults: []Fault{
			{Operation: "*", RateLimit: &RateLimit{QPS: 10}},
			{Operation: "lb.*", Latency: &Latency{Distribution: DistributionUniform, Min: d("1ms"), Max: d("2ms")}},
			{Operation: "instances.list", InvisibleFor: d("5s"), ErrorRate: 0.5},
		}},
		{name: "unknown operation", faults: []Fault{{Operation: "lb.create"}}, field: "faults[0].operation"},
		{name: "unknown group", faults: []Fault{{Operation: "disks.*"}}, field: "faults[0].operation"},
		{name: "error rate", faults: []Fault{{Operation: "*", ErrorRate: 1.5}}, field: "faults[0].errorRate"},
		{name: "rate", faults: []Fault{{Operation: "*", RateLimit: &RateLimit{QPS: -1}}}, field: "faults[0].rateLimit.qps"},
		{name: "burst", faults: []Fault{{Operation: "*", RateLimit: &RateLimit{QPS: 1, Burst: -1}}}, field: "faults[0].rateLimit.burst"},
		{name: "mixed latency", faults: []Fault{{Operation: "*", Latency: &Latency{Fixed: d("1s"), Min: d("1ms")}}}, field: "faults[0].latency"},
		{name: "unknown distribution", faults: []Fault{{Operation: "*", Latency: &Latency{Distribution: "pareto"}}}, field: "faults[0].latency.distribution"},
		{name: "negative", faults: []Fault{{Operation: "*", Latency: &Latency{Fixed: d("-1s")}}}, field: "faults[0].latency.fixed"},
		{name: "duplicate", faults: []Fault{{Operation: "*"}, {Operation: "lb.get"}, {Operation: "*"}}, field: "faults[2].operation"},
		{name: "invisible on load balancers", faults: []Fault{{Operation: "lb.get", InvisibleFor: d("1s")}}, field: "faults[0].invisibleFor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantField(t, ValidateFaults(tt.faults), tt.field) })
	}
}

func TestMatchOperation(t *testing.T) {
	tests := []struct {
		pattern, op string
		want        int
	}{
		{"lb.ensure", "lb.ensure", 3},
		{"lb.*", "lb.ensure", 2},
		{"*", "lb.ensure", 1},
		{"lb.get", "lb.ensure", 0},
		{"instances.*", "lb.ensure", 0},
		{"l*", "lb.ensure", 0},
	}
	for _, tt := range tests {
		if got := MatchOperation(tt.pattern, tt.op); got != tt.want {
			t.Errorf("MatchOperation(%q, %q) = %d, want %d", tt.pattern, tt.op, got, tt.want)
		}
	}
	for _, op := range Operations() {
		if !ValidOperationPattern(op) {
			t.Errorf("operation %q is not a valid pattern", op)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	in := Fault{Operation: "*", Latency: &Latency{Fixed: Duration{1500 * time.Millisecond}}}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"operation":"*","latency":{"fixed":"1.5s"}}`; string(raw) != want {
		t.Fatalf("JSON = %s, want %s", raw, want)
	}
	var out Fault
	if err := json.Unmarshal(raw, &out); err != nil || out.Latency.Fixed.Duration != 1500*time.Millisecond {
		t.Fatalf("round trip = %+v, %v", out, err)
	}
	if err := json.Unmarshal([]byte(`{"invisibleFor": 5}`), &out); err == nil {
		t.Fatal("a number was accepted as a duration")
	}
}

func TestRouteName(t *testing.T) {
	for in, want := range map[string]string{
		"10.244.1.0/24": "r-10-244-1-0-24",
		"fd00:1::/64":   "r-fd00-1---64",
	} {
		got := RouteName(netip.MustParsePrefix(in))
		if got != want {
			t.Errorf("RouteName(%s) = %q, want %q", in, got, want)
		}
		if err := ValidateObjectName("name", got); err != nil {
			t.Errorf("RouteName(%s) = %q is not a valid name: %v", in, got, err)
		}
	}
}

// distinctPorts returns n TCP listeners on distinct ports.
func distinctPorts(n int) []Port {
	ports := make([]Port, n)
	for i := range ports {
		ports[i] = Port{Protocol: ProtocolTCP, Port: int32(1000 + i), NodePort: int32(30000 + i)}
	}
	return ports
}

func TestRouteChangesValidate(t *testing.T) {
	spec := func(dst string) RouteSpec { return RouteSpec{DestinationCIDR: dst, TargetNode: "node-1"} }
	many := RouteChanges{}
	for i := range MaxRouteChanges + 1 {
		many.Delete = append(many.Delete, fmt.Sprintf("r%d", i))
	}
	tests := []struct {
		name    string
		c       RouteChanges
		wantErr string // the field named, or "" for valid
	}{
		{"a create and a delete", RouteChanges{Delete: []string{"old"}, Create: []RouteSpec{spec("10.244.1.0/24")}}, ""},
		{"no change", RouteChanges{}, "changes"},
		{"too many", many, "changes"},
		{"bad name to delete", RouteChanges{Delete: []string{"ok", "a/b"}}, "delete[1]"},
		{"bad creation", RouteChanges{Create: []RouteSpec{spec("10.244.1.0/24"), spec("10.244.2.1/24")}}, "create[1].destinationCIDR"},
		{"creation without target", RouteChanges{Create: []RouteSpec{{DestinationCIDR: "10.244.1.0/24"}}}, "create[0].targetNode"},
		{"one destination twice", RouteChanges{Create: []RouteSpec{spec("10.244.1.0/24"), spec("10.244.1.0/24")}}, "create[1].destinationCIDR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.wantErr {
				t.Fatalf("Validate = %v, want a field error naming %s", err, tt.wantErr)
			}
		})
	}
}

package upstream_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/providers/upstream"
)

var (
	errRouteExists  = errors.New("route already exists")
	errRouteMissing = errors.New("no such route")
	errUnreachable  = errors.New("dial tcp 10.0.0.1:443: i/o timeout")
)

func newAdapter(t *testing.T, s cloudprovider.Interface) *upstream.Provider {
	t.Helper()
	p, err := upstream.New(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func instancesOf(t *testing.T, p *upstream.Provider) cloud.Instances {
	t.Helper()
	in, ok := p.Instances()
	if !ok {
		t.Fatal("Instances capability absent")
	}
	return in
}

func node(name, providerID string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
}

var addrs = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}}

// result is cloud.Classify with success as the zero value, so table cases omit it.
func result(err error) cloud.Result {
	if err == nil {
		return ""
	}
	return cloud.Classify(err)
}

func TestNewChecksTheProvider(t *testing.T) {
	if _, err := upstream.New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	if _, err := upstream.New(&stub{name: "Not A Scheme"}); err == nil || !strings.Contains(err.Error(), "scheme") {
		t.Errorf("New with an invalid name: %v", err)
	}
	p := newAdapter(t, &stub{name: "acme"})
	if p.ProviderName() != "acme" {
		t.Errorf("ProviderName() = %q", p.ProviderName())
	}
	for name, ok := range map[string]bool{
		"instances":       func() bool { _, ok := p.Instances(); return ok }(),
		"instance lister": func() bool { _, ok := p.InstanceLister(); return ok }(),
		"load balancers":  func() bool { _, ok := p.LoadBalancers(); return ok }(),
		"routes":          func() bool { _, ok := p.Routes(); return ok }(),
	} {
		if ok {
			t.Errorf("%s reported present for a provider without it", name)
		}
	}
}

func TestInstancesV2(t *testing.T) {
	md := &cloudprovider.InstanceMetadata{ProviderID: "acme://i-1", InstanceType: "m5", Zone: "z1", Region: "r1",
		NodeAddresses: addrs, AdditionalLabels: map[string]string{"acme.com/pool": "a"}}
	tests := []struct {
		name      string
		stub      v2Stub
		node      *corev1.Node
		want      cloud.Result
		wantState cloud.InstanceState
		wantPID   string
	}{
		{name: "running", stub: v2Stub{exists: answer[bool]{v: true}, metadata: answer[*cloudprovider.InstanceMetadata]{v: md}},
			node: node("n1", ""), wantState: cloud.InstanceRunning, wantPID: "acme://i-1"},
		{name: "shut down", stub: v2Stub{exists: answer[bool]{v: true}, shutdown: answer[bool]{v: true}, metadata: answer[*cloudprovider.InstanceMetadata]{v: md}},
			node: node("n1", ""), wantState: cloud.InstanceStopped, wantPID: "acme://i-1"},
		{name: "shutdown not implemented", stub: v2Stub{exists: answer[bool]{v: true}, shutdown: answer[bool]{err: cloudprovider.NotImplemented}, metadata: answer[*cloudprovider.InstanceMetadata]{v: md}},
			node: node("n1", ""), wantState: cloud.InstanceUnknown, wantPID: "acme://i-1"},
		{name: "provider ID kept from the node", stub: v2Stub{exists: answer[bool]{v: true}, metadata: answer[*cloudprovider.InstanceMetadata]{v: &cloudprovider.InstanceMetadata{InstanceType: "m5"}}},
			node: node("n1", "acme://i-9"), wantState: cloud.InstanceRunning, wantPID: "acme://i-9"},
		{name: "no provider ID anywhere", stub: v2Stub{exists: answer[bool]{v: true}, metadata: answer[*cloudprovider.InstanceMetadata]{v: &cloudprovider.InstanceMetadata{}}},
			node: node("n1", ""), want: cloud.ResultError},
		{name: "does not exist", stub: v2Stub{exists: answer[bool]{v: false}}, node: node("n1", "acme://i-1"), want: cloud.ResultNotFound},
		{name: "exists says InstanceNotFound", stub: v2Stub{exists: answer[bool]{err: fmt.Errorf("lookup: %w", cloudprovider.InstanceNotFound)}}, node: node("n1", ""), want: cloud.ResultNotFound},
		{name: "metadata says InstanceNotFound", stub: v2Stub{exists: answer[bool]{v: true}, metadata: answer[*cloudprovider.InstanceMetadata]{err: cloudprovider.InstanceNotFound}}, node: node("n1", ""), want: cloud.ResultNotFound},
		{name: "cloud unreachable", stub: v2Stub{exists: answer[bool]{err: errUnreachable}}, node: node("n1", ""), want: cloud.ResultError},
		{name: "shutdown fails", stub: v2Stub{exists: answer[bool]{v: true}, shutdown: answer[bool]{err: errUnreachable}, metadata: answer[*cloudprovider.InstanceMetadata]{v: md}}, node: node("n1", ""), want: cloud.ResultError},
		{name: "retry error", stub: v2Stub{exists: answer[bool]{err: api.NewRetryError("slow down", 4*time.Second)}}, node: node("n1", ""), want: cloud.ResultThrottled},
		{name: "metadata nil", stub: v2Stub{exists: answer[bool]{v: true}}, node: node("n1", ""), want: cloud.ResultError},
		{name: "nil node", node: nil, want: cloud.ResultError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.stub
			p := newAdapter(t, &stub{name: "acme", v2: &s, v1: &v1Stub{}})
			inst, err := instancesOf(t, p).InstanceMetadata(t.Context(), tt.node)
			if tt.node == nil {
				if !cloud.IsInvalid(err) {
					t.Fatalf("nil node: %v, want Invalid", err)
				}
				return
			}
			if got := result(err); got != tt.want {
				t.Fatalf("error %v is %s, want %s", err, got, tt.want)
			}
			if err != nil {
				if tt.want == cloud.ResultThrottled {
					if after, ok := cloud.RetryAfter(err); !ok || after != 4*time.Second {
						t.Errorf("RetryAfter = %v, %v; want 4s", after, ok)
					}
				}
				return
			}
			if inst.ProviderID != tt.wantPID || inst.State != tt.wantState || inst.NodeName != tt.node.Name {
				t.Errorf("instance = %+v, want provider ID %s, state %s, node %s", inst, tt.wantPID, tt.wantState, tt.node.Name)
			}
			if tt.wantPID == "acme://i-1" && (inst.Zone != "z1" || inst.Region != "r1" || inst.InstanceType != "m5" ||
				!slices.Equal(inst.Addresses, addrs) || inst.Labels["acme.com/pool"] != "a") {
				t.Errorf("instance = %+v, want the upstream metadata", inst)
			}
		})
	}
}

func TestInstancesV1(t *testing.T) {
	zoneByName := cloudprovider.Zone{FailureDomain: "by-name", Region: "r"}
	zoneByID := cloudprovider.Zone{FailureDomain: "by-id", Region: "r"}
	byIDAddrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.9.9.9"}}
	base := func() *v1Stub {
		return &v1Stub{
			id:          answer[string]{v: "i-7"},
			addrsByName: answer[[]corev1.NodeAddress]{v: addrs},
			addrsByID:   answer[[]corev1.NodeAddress]{v: byIDAddrs},
			typeByName:  answer[string]{v: "small"},
			typeByID:    answer[string]{v: "large"},
			existsByID:  answer[bool]{v: true},
		}
	}
	tests := []struct {
		name    string
		mod     func(*v1Stub, *zonesStub)
		noZones bool
		node    *corev1.Node
		want    cloud.Result
		check   func(t *testing.T, inst *cloud.Instance, s *v1Stub)
	}{
		{name: "by name", node: node("n1", ""), check: func(t *testing.T, inst *cloud.Instance, s *v1Stub) {
			if inst.ProviderID != "acme://i-7" || inst.InstanceType != "small" || inst.Zone != "by-name" || !slices.Equal(inst.Addresses, addrs) {
				t.Errorf("instance = %+v, want the by-name answers and provider ID acme://i-7", inst)
			}
			if s.shutdownAskedWith != "acme://i-7" {
				t.Errorf("shutdown asked with %q, want the built provider ID", s.shutdownAskedWith)
			}
		}},
		{name: "by provider ID", node: node("n1", "acme://i-7"), check: func(t *testing.T, inst *cloud.Instance, _ *v1Stub) {
			if inst.InstanceType != "large" || inst.Zone != "by-id" || !slices.Equal(inst.Addresses, byIDAddrs) || inst.State != cloud.InstanceRunning {
				t.Errorf("instance = %+v, want the by-provider-ID answers", inst)
			}
		}},
		{name: "without zones", noZones: true, node: node("n1", ""), check: func(t *testing.T, inst *cloud.Instance, _ *v1Stub) {
			if inst.Zone != "" || inst.Region != "" {
				t.Errorf("zone %q region %q without a Zones capability", inst.Zone, inst.Region)
			}
		}},
		{name: "type and zone not implemented", node: node("n1", ""), mod: func(s *v1Stub, z *zonesStub) {
			s.typeByName.err = cloudprovider.NotImplemented
			z.byName.err = cloudprovider.NotImplemented
		}, check: func(t *testing.T, inst *cloud.Instance, _ *v1Stub) {
			if inst.InstanceType != "" || inst.Zone != "" {
				t.Errorf("instance = %+v, want empty type and zone", inst)
			}
		}},
		{name: "shut down", node: node("n1", "acme://i-7"), mod: func(s *v1Stub, _ *zonesStub) { s.shutdownByID.v = true },
			check: func(t *testing.T, inst *cloud.Instance, _ *v1Stub) {
				if inst.State != cloud.InstanceStopped {
					t.Errorf("state %s, want stopped", inst.State)
				}
			}},
		{name: "gone by provider ID", node: node("n1", "acme://i-7"), mod: func(s *v1Stub, _ *zonesStub) { s.existsByID.v = false }, want: cloud.ResultNotFound},
		{name: "gone by name", node: node("n1", ""), mod: func(s *v1Stub, _ *zonesStub) { s.id.err = cloudprovider.InstanceNotFound }, want: cloud.ResultNotFound},
		{name: "empty instance ID", node: node("n1", ""), mod: func(s *v1Stub, _ *zonesStub) { s.id.v = "" }, want: cloud.ResultError},
		{name: "addresses fail", node: node("n1", "acme://i-7"), mod: func(s *v1Stub, _ *zonesStub) { s.addrsByID.err = errUnreachable }, want: cloud.ResultError},
		{name: "zone fails", node: node("n1", ""), mod: func(_ *v1Stub, z *zonesStub) { z.byName.err = errUnreachable }, want: cloud.ResultError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, z := base(), &zonesStub{byName: answer[cloudprovider.Zone]{v: zoneByName}, byID: answer[cloudprovider.Zone]{v: zoneByID}}
			if tt.mod != nil {
				tt.mod(s, z)
			}
			st := &stub{name: "acme", v1: s}
			if !tt.noZones {
				st.zones = z
			}
			inst, err := instancesOf(t, newAdapter(t, st)).InstanceMetadata(t.Context(), tt.node)
			if got := result(err); got != tt.want {
				t.Fatalf("error %v is %s, want %s", err, got, tt.want)
			}
			if err == nil && tt.check != nil {
				tt.check(t, inst, s)
			}
		})
	}
}

func TestErrorsKeepTheUpstreamError(t *testing.T) {
	tests := []struct {
		name     string
		upstream error
		want     cloud.Result
	}{
		{"instance not found", cloudprovider.InstanceNotFound, cloud.ResultNotFound},
		{"wrapped instance not found", fmt.Errorf("describe: %w", cloudprovider.InstanceNotFound), cloud.ResultNotFound},
		{"not implemented", cloudprovider.NotImplemented, cloud.ResultNotImplemented},
		{"implemented elsewhere", cloudprovider.ImplementedElsewhere, cloud.ResultNotImplemented},
		{"retry error", fmt.Errorf("ensure: %w", api.NewRetryError("provisioning", time.Minute)), cloud.ResultThrottled},
		{"anything else", errUnreachable, cloud.ResultError},
		{"deadline", context.DeadlineExceeded, cloud.ResultTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newAdapter(t, &stub{name: "acme", v2: &v2Stub{exists: answer[bool]{err: tt.upstream}}})
			_, err := instancesOf(t, p).InstanceMetadata(t.Context(), node("n1", ""))
			if got := result(err); got != tt.want {
				t.Fatalf("error %v is %s, want %s", err, got, tt.want)
			}
			if !errors.Is(err, tt.upstream) {
				t.Errorf("errors.Is(%v, the upstream error) = false", err)
			}
			var ue *upstream.Error
			if !errors.As(err, &ue) || ue.Op != "InstanceExists" || !strings.Contains(ue.Subject, "n1") {
				t.Errorf("errors.As *upstream.Error: %+v", ue)
			}
		})
	}
}

// TestInstanceNotFoundOutsideInstances checks that InstanceNotFound from a load balancer
// call, which names a backend, does not make the load balancer look gone.
func TestInstanceNotFoundOutsideInstances(t *testing.T) {
	lb := &lbStub{err: fmt.Errorf("backend: %w", cloudprovider.InstanceNotFound)}
	l, _ := newAdapter(t, &stub{name: "acme", lb: lb}).LoadBalancers()
	err := l.UpdateLoadBalancerBackends(t.Context(), &cloud.LoadBalancerSpec{Name: "lb"}, nil)
	if got := result(err); got != cloud.ResultError {
		t.Fatalf("UpdateLoadBalancerBackends error %v is %s, want temporary", err, got)
	}
}

func TestImplementedElsewhere(t *testing.T) {
	routes := &routesStub{listErr: cloudprovider.ImplementedElsewhere}
	lb := &lbStub{err: cloudprovider.ImplementedElsewhere}
	p := newAdapter(t, &stub{name: "acme", v2: &v2Stub{exists: answer[bool]{err: cloudprovider.ImplementedElsewhere}}, routes: routes, lb: lb})

	_, err := instancesOf(t, p).InstanceMetadata(t.Context(), node("n1", ""))
	if !cloud.IsNotImplemented(err) {
		t.Errorf("InstanceMetadata: %v, want NotImplemented", err)
	}
	if _, ok := p.Instances(); ok {
		t.Error("Instances still reported after ImplementedElsewhere")
	}
	r, _ := p.Routes()
	if _, err := r.ListRoutes(t.Context(), "c"); !cloud.IsNotImplemented(err) {
		t.Errorf("ListRoutes: %v, want NotImplemented", err)
	}
	if _, ok := p.Routes(); ok {
		t.Error("Routes still reported after ImplementedElsewhere")
	}
	l, _ := p.LoadBalancers()
	if _, err := l.EnsureLoadBalancer(t.Context(), &cloud.LoadBalancerSpec{Name: "lb"}, nil); !cloud.IsNotImplemented(err) {
		t.Errorf("EnsureLoadBalancer: %v, want NotImplemented", err)
	}
	if _, ok := p.LoadBalancers(); !ok {
		t.Error("LoadBalancers switched off: upstream answers ImplementedElsewhere per Service")
	}
}

func TestLoadBalancers(t *testing.T) {
	shared := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"pool": "a"}}}
	status := &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}}
	lb := &lbStub{status: status, exists: true}
	l, ok := newAdapter(t, &stub{name: "acme", lb: lb}).LoadBalancers()
	if !ok {
		t.Fatal("LoadBalancers absent")
	}
	spec := &cloud.LoadBalancerSpec{
		Name: "lb-1", ClusterName: "prod", Service: types.NamespacedName{Namespace: "ns", Name: "web"},
		Ports: []cloud.LoadBalancerPort{{
			Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080,
			TargetPort: intstr.FromString("web"), AppProtocol: "kubernetes.io/h2c",
		}},
		Backends:     []cloud.Backend{{NodeName: "n1", Node: shared}, {NodeName: "n2", ProviderID: "acme://i-2", Addresses: addrs}},
		SourceRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, HealthCheckNodePort: 32000,
		ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, RequestedIP: "192.0.2.7",
	}
	got, err := l.EnsureLoadBalancer(t.Context(), spec, nil)
	if err != nil || got.Ingress[0].IP != "192.0.2.1" {
		t.Fatalf("EnsureLoadBalancer = %+v, %v", got, err)
	}
	if got == status {
		t.Error("the status the provider returned is handed out as is; want a copy")
	}
	nodes := lb.nodes[0]
	if len(nodes) != 2 || nodes[0] != shared {
		t.Fatalf("nodes = %v, want the backend's own Node first", nodes)
	}
	if n := nodes[1]; n.Name != "n2" || n.Spec.ProviderID != "acme://i-2" || !slices.Equal(n.Status.Addresses, addrs) {
		t.Errorf("made-up node = %+v", n)
	}
	svc := lb.services[0]
	if lb.cluster != "prod" || svc.Namespace != "ns" || svc.Name != "web" || svc.Spec.Type != corev1.ServiceTypeLoadBalancer ||
		len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].NodePort != 30080 || svc.Spec.HealthCheckNodePort != 32000 ||
		!slices.Equal(svc.Spec.LoadBalancerSourceRanges, []string{"10.0.0.0/8"}) || svc.Spec.LoadBalancerIP != "192.0.2.7" ||
		svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		t.Errorf("made-up Service in cluster %q = %+v", lb.cluster, svc)
	}
	if p := svc.Spec.Ports[0]; p.TargetPort != intstr.FromString("web") || p.AppProtocol == nil || *p.AppProtocol != "kubernetes.io/h2c" {
		t.Errorf("made-up Service port = %+v, want the spec's target port and app protocol", p)
	}

	given := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "given", UID: "u-1"}}
	if err := l.UpdateLoadBalancerBackends(t.Context(), spec, given); err != nil {
		t.Fatal(err)
	}
	if lb.services[1] != given {
		t.Error("the controller's Service was not passed through")
	}

	if _, err := l.GetLoadBalancer(t.Context(), spec, given); err != nil {
		t.Errorf("GetLoadBalancer of an existing load balancer: %v", err)
	}
	lb.exists = false
	if _, err := l.GetLoadBalancer(t.Context(), spec, given); !cloud.IsNotFound(err) {
		t.Errorf("GetLoadBalancer with exists=false: %v, want NotFound", err)
	}
	lb.err = api.NewRetryError("provisioning", 15*time.Second)
	if _, err := l.EnsureLoadBalancer(t.Context(), spec, given); !cloud.IsThrottled(err) {
		t.Errorf("EnsureLoadBalancer with a RetryError: %v, want Throttled", err)
	} else if after, _ := cloud.RetryAfter(err); after != 15*time.Second {
		t.Errorf("RetryAfter = %s, want 15s", after)
	}
	if _, err := l.EnsureLoadBalancer(t.Context(), nil, given); !cloud.IsInvalid(err) {
		t.Errorf("nil spec: %v, want Invalid", err)
	}
}

func route(name, target, cidr string) *cloudprovider.Route {
	return &cloudprovider.Route{Name: name, TargetNode: types.NodeName(target), DestinationCIDR: cidr}
}

func TestRoutesList(t *testing.T) {
	tests := []struct {
		name    string
		table   []*cloudprovider.Route
		want    []string // "target cidr"
		wantErr string
	}{
		{name: "canonical", table: []*cloudprovider.Route{route("r1", "n1", "10.244.1.0/24"), route("r2", "n2", "fd00:10:244::/64")},
			want: []string{"n1 10.244.1.0/24", "n2 fd00:10:244::/64"}},
		{name: "host bits and white space", table: []*cloudprovider.Route{route("r1", "n1", " 10.244.1.5/24 ")},
			want: []string{"n1 10.244.1.0/24"}},
		{name: "nil entries", table: []*cloudprovider.Route{nil, route("r1", "n1", "10.0.0.0/16")}, want: []string{"n1 10.0.0.0/16"}},
		{name: "not a CIDR", table: []*cloudprovider.Route{route("r1", "n1", "10.0.0.0/16"), route("bad", "n2", "10.0.0.300/24")}, wantErr: `route "bad" to node n2 has destination "10.0.0.300/24"`},
		{name: "no prefix length", table: []*cloudprovider.Route{route("bad", "n2", "10.0.0.1")}, wantErr: "bad"},
		{name: "empty", table: []*cloudprovider.Route{route("bad", "n2", "")}, wantErr: "bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := newAdapter(t, &stub{name: "acme", routes: &routesStub{table: tt.table}}).Routes()
			got, err := r.ListRoutes(t.Context(), "c")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || cloud.IsNotFound(err) {
					t.Fatalf("ListRoutes = %v, %v; want an error naming %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, r := range got {
				out = append(out, r.TargetNode+" "+r.DestinationCIDR.String())
			}
			if !slices.Equal(out, tt.want) {
				t.Errorf("routes = %v, want %v", out, tt.want)
			}
		})
	}
}

// TestRoutesNodeAddresses checks that a route's node addresses pass through both ways:
// to the upstream provider on create, and back with its EnableNodeAddresses on list.
func TestRoutesNodeAddresses(t *testing.T) {
	addrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.7"}, {Type: corev1.NodeHostName, Address: "n1"}}
	rs := &routesStub{}
	r, _ := newAdapter(t, &stub{name: "acme", routes: rs}).Routes()
	if err := r.CreateRoute(t.Context(), "c", "hint", cloud.Route{TargetNode: "n1", DestinationCIDR: netip.MustParsePrefix("10.244.7.0/24"), TargetNodeAddresses: addrs}); err != nil {
		t.Fatalf("CreateRoute: %v", err)
	}
	if len(rs.created) != 1 || !slices.Equal(rs.created[0].TargetNodeAddresses, addrs) {
		t.Fatalf("upstream CreateRoute calls: %+v, want one with the node's addresses", rs.created)
	}
	recorded := route("r2", "n2", "10.244.8.0/24")
	recorded.EnableNodeAddresses, recorded.TargetNodeAddresses = true, addrs
	rs.table = append(rs.table, recorded)
	got, err := r.ListRoutes(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].EnableNodeAddresses || !got[1].EnableNodeAddresses || !slices.Equal(got[1].TargetNodeAddresses, addrs) {
		t.Errorf("ListRoutes = %+v, want the addresses and EnableNodeAddresses as the provider lists them", got)
	}
}

func TestRoutesCreateDeleteIdempotent(t *testing.T) {
	rs := &routesStub{}
	r, _ := newAdapter(t, &stub{name: "acme", routes: rs}).Routes()
	want := cloud.Route{TargetNode: "n1", DestinationCIDR: netip.MustParsePrefix("10.244.7.0/24")}
	for range 2 {
		if err := r.CreateRoute(t.Context(), "c", "hint", want); err != nil {
			t.Fatalf("CreateRoute: %v", err)
		}
	}
	if len(rs.created) != 1 || rs.created[0].DestinationCIDR != "10.244.7.0/24" || rs.created[0].TargetNode != "n1" {
		t.Fatalf("upstream CreateRoute calls: %+v, want one", rs.created)
	}
	listed := rs.table[0]
	for range 2 {
		if err := r.DeleteRoute(t.Context(), "c", cloud.Route{TargetNode: "n1", DestinationCIDR: want.DestinationCIDR}); err != nil {
			t.Fatalf("DeleteRoute: %v", err)
		}
	}
	if len(rs.deleted) != 1 || rs.deleted[0] != listed {
		t.Errorf("upstream DeleteRoute calls: %+v, want one with the route as listed", rs.deleted)
	}
	for _, bad := range []cloud.Route{{TargetNode: "n1"}, {DestinationCIDR: want.DestinationCIDR}} {
		if err := r.CreateRoute(t.Context(), "c", "", bad); !cloud.IsInvalid(err) {
			t.Errorf("CreateRoute(%+v): %v, want Invalid", bad, err)
		}
	}
	if err := r.DeleteRoute(t.Context(), "c", cloud.Route{}); !cloud.IsInvalid(err) {
		t.Errorf("DeleteRoute of nothing: %v, want Invalid", err)
	}
	rs.listErr = errUnreachable
	if err := r.DeleteRoute(t.Context(), "c", want); err == nil || cloud.IsNotFound(err) {
		t.Errorf("DeleteRoute when listing fails: %v, want a temporary error", err)
	}
}

// blocking is an upstream provider whose calls ignore their context and block until
// released, as providers with their own retry loops do.
type blocking struct {
	stub
	release chan struct{}
	entered chan struct{}
}

func (b *blocking) InstanceExists(context.Context, *corev1.Node) (bool, error) {
	b.entered <- struct{}{}
	<-b.release
	return true, nil
}
func (b *blocking) InstanceShutdown(context.Context, *corev1.Node) (bool, error) { return false, nil }
func (b *blocking) InstanceMetadata(context.Context, *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	panic("metadata exploded")
}

func TestContextHonoredAndPanicsRecovered(t *testing.T) {
	b := &blocking{release: make(chan struct{}), entered: make(chan struct{}, 1)}
	b.name = "acme"
	b.v2 = b
	in := instancesOf(t, newAdapter(t, b))

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := in.InstanceMetadata(ctx, node("n1", ""))
		errc <- err
	}()
	<-b.entered // the upstream call is blocked now
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) || cloud.IsNotFound(err) {
			t.Errorf("error = %v, want context.Canceled and not NotFound", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("InstanceMetadata did not return after its context was canceled")
	}
	close(b.release) // the abandoned upstream call ends

	canceled, cancel2 := context.WithCancel(t.Context())
	cancel2()
	if _, err := in.InstanceMetadata(canceled, node("n1", "")); !errors.Is(err, context.Canceled) {
		t.Errorf("already canceled: %v", err)
	}

	_, err := in.InstanceMetadata(t.Context(), node("n1", ""))
	<-b.entered
	if err == nil || !strings.Contains(err.Error(), "panicked in InstanceMetadata: metadata exploded") || cloud.IsNotFound(err) {
		t.Errorf("a panicking provider: %v, want the panic as a temporary error", err)
	}
}

// FuzzListRoutes feeds the adapter any destination string an upstream provider might
// list: it must never panic, and a destination it accepts must be a valid, masked
// prefix.
func FuzzListRoutes(f *testing.F) {
	for _, s := range []string{"10.244.1.0/24", " 10.0.0.5/8", "fd00::/64", "::ffff:10.0.0.0/104", "10.0.0.1", "", "/", "1.2.3.4/33", "fe80::1%eth0/64", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dst string) {
		r, _ := newAdapter(t, &stub{name: "acme", routes: &routesStub{table: []*cloudprovider.Route{route("r", "n", dst)}}}).Routes()
		got, err := r.ListRoutes(context.Background(), "c")
		if err != nil {
			if cloud.IsNotFound(err) {
				t.Fatalf("a bad destination %q is NotFound", dst)
			}
			return
		}
		if len(got) != 1 || !got[0].DestinationCIDR.IsValid() || got[0].DestinationCIDR != got[0].DestinationCIDR.Masked() {
			t.Fatalf("destination %q listed as %+v", dst, got)
		}
	})
}

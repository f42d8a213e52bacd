package fakecloud

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nephele-dev/nephele/cloud"
)

// newCloud returns a Cloud built from opts, failing the test on error.
func newCloud(t *testing.T, opts Options) *Cloud {
	t.Helper()
	c, err := New(opts)
	if err != nil {
		t.Fatalf("New(%+v): %v", opts, err)
	}
	return c
}

// node returns a Node called name with the given provider ID.
func node(name, providerID string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
}

// instance returns a running instance backing node name.
func instance(name string) cloud.Instance {
	return cloud.Instance{
		ProviderID:   "fake://" + name,
		NodeName:     name,
		InstanceType: "small",
		Zone:         "zone-a",
		Region:       "region-1",
		Addresses:    []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
		Labels:       map[string]string{"example.com/pool": "a"},
		State:        cloud.InstanceRunning,
	}
}

// lbSpec returns a load balancer spec called name with one port and backends on nodes.
func lbSpec(name string, nodes ...string) *cloud.LoadBalancerSpec {
	s := &cloud.LoadBalancerSpec{
		Name:        name,
		ClusterName: "c1",
		Ports:       []cloud.LoadBalancerPort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}},
	}
	for _, n := range nodes {
		s.Backends = append(s.Backends, cloud.Backend{NodeName: n, ProviderID: "fake://" + n})
	}
	return s
}

func TestNew(t *testing.T) {
	tests := []struct {
		name     string
		opts     Options
		wantName string
		wantErr  bool
	}{
		{name: "defaults", wantName: "fake"},
		{name: "custom name", opts: Options{Name: "other"}, wantName: "other"},
		{name: "name not usable as a scheme", opts: Options{Name: "Bad Name"}, wantErr: true},
		{name: "single-address pool", opts: Options{VIPPool: netip.MustParsePrefix("198.51.100.7/32")}, wantName: "fake"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.opts)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("New(%+v) succeeded, want an error", tt.opts)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if got := c.ProviderName(); got != tt.wantName {
				t.Errorf("ProviderName() = %q, want %q", got, tt.wantName)
			}
		})
	}
}

// capabilities returns which capabilities p reports, checking that an absent one
// comes back as a nil interface.
func capabilities(t *testing.T, p cloud.Provider) map[Capability]bool {
	t.Helper()
	i, iok := p.Instances()
	l, lok := p.InstanceLister()
	b, bok := p.LoadBalancers()
	r, rok := p.Routes()
	for name, nilWhenAbsent := range map[string]bool{
		"instances": iok || i == nil, "lister": lok || l == nil, "lbs": bok || b == nil, "routes": rok || r == nil,
	} {
		if !nilWhenAbsent {
			t.Errorf("capability %s is absent but not nil", name)
		}
	}
	return map[Capability]bool{CapInstances: iok, CapInstanceLister: lok, CapLoadBalancers: bok, CapRoutes: rok}
}

func TestCapabilities(t *testing.T) {
	all := map[Capability]bool{CapInstances: true, CapInstanceLister: true, CapLoadBalancers: true, CapRoutes: true}
	c := newCloud(t, Options{})
	if got := capabilities(t, c); !equalMaps(got, all) {
		t.Fatalf("default capabilities = %v, want all", got)
	}

	c = newCloud(t, Options{Disabled: []Capability{CapInstanceLister, CapRoutes}})
	want := map[Capability]bool{CapInstances: true, CapInstanceLister: false, CapLoadBalancers: true, CapRoutes: false}
	if got := capabilities(t, c); !equalMaps(got, want) {
		t.Fatalf("capabilities with Disabled = %v, want %v", got, want)
	}

	c.SetCapability(CapInstanceLister, true)
	c.SetCapability(CapLoadBalancers, false)
	want = map[Capability]bool{CapInstances: true, CapInstanceLister: true, CapLoadBalancers: false, CapRoutes: false}
	if got := capabilities(t, c); !equalMaps(got, want) {
		t.Fatalf("capabilities after SetCapability = %v, want %v", got, want)
	}
}

func equalMaps[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestInstanceMetadata(t *testing.T) {
	c := newCloud(t, Options{})
	for _, inst := range []cloud.Instance{instance("n1"), instance("n2"), {NodeName: "bare"}} {
		if err := c.AddInstance(inst); err != nil {
			t.Fatal(err)
		}
	}
	// Two instances claim node "dup": the lower provider ID must win, every time.
	for _, id := range []string{"fake://dup-b", "fake://dup-a"} {
		if err := c.AddInstance(cloud.Instance{ProviderID: id, NodeName: "dup"}); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name       string
		node       *corev1.Node
		wantID     string
		wantResult cloud.Result
	}{
		{name: "by provider ID", node: node("whatever", "fake://n1"), wantID: "fake://n1"},
		{name: "by node name", node: node("n2", ""), wantID: "fake://n2"},
		{name: "defaults filled in", node: node("bare", ""), wantID: "fake://bare"},
		{name: "ambiguous name picks the lowest ID", node: node("dup", ""), wantID: "fake://dup-a"},
		{name: "unknown provider ID", node: node("n1", "fake://gone"), wantResult: cloud.ResultNotFound},
		{name: "provider ID wins over name", node: node("n1", "fake://n3"), wantResult: cloud.ResultNotFound},
		{name: "unknown name", node: node("n9", ""), wantResult: cloud.ResultNotFound},
		{name: "nil node", node: nil, wantResult: cloud.ResultInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.InstanceMetadata(context.Background(), tt.node)
			if tt.wantResult != "" {
				if r := cloud.Classify(err); r != tt.wantResult {
					t.Fatalf("InstanceMetadata error = %v (%s), want %s", err, r, tt.wantResult)
				}
				if got != nil {
					t.Errorf("InstanceMetadata returned %+v with an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("InstanceMetadata: %v", err)
			}
			if got.ProviderID != tt.wantID {
				t.Errorf("ProviderID = %q, want %q", got.ProviderID, tt.wantID)
			}
			if got.State != cloud.InstanceRunning {
				t.Errorf("State = %q, want running", got.State)
			}
		})
	}
}

func TestInstanceLifecycle(t *testing.T) {
	ctx := context.Background()
	c := newCloud(t, Options{Name: "acme"})
	if err := c.AddInstance(cloud.Instance{}); err == nil {
		t.Error("AddInstance of an instance without provider ID or node name succeeded")
	}
	if err := c.AddInstance(cloud.Instance{NodeName: "n1", Labels: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	const id = "acme://n1"

	// What callers get is a copy: changing it must not change the cloud.
	got, err := c.InstanceMetadata(ctx, node("n1", id))
	if err != nil {
		t.Fatal(err)
	}
	got.Labels["k"] = "changed"
	if again, _ := c.Instance(id); again.Labels["k"] != "v" {
		t.Errorf("changing a returned instance changed the cloud: label = %q", again.Labels["k"])
	}

	if err := c.SetInstanceState(id, cloud.InstanceStopped); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.InstanceMetadata(ctx, node("n1", id)); got == nil || got.State != cloud.InstanceStopped {
		t.Errorf("state after SetInstanceState = %+v, want stopped", got)
	}
	if err := c.UpdateInstance(id, func(i *cloud.Instance) { i.Zone = "zone-b" }); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Instance(id); got.Zone != "zone-b" || got.State != cloud.InstanceStopped {
		t.Errorf("after UpdateInstance: %+v", got)
	}
	if err := c.UpdateInstance(id, func(i *cloud.Instance) { i.ProviderID = "acme://other" }); err == nil {
		t.Error("UpdateInstance changing the provider ID succeeded")
	}
	if err := c.SetInstanceState("acme://missing", cloud.InstanceStopped); !cloud.IsNotFound(err) {
		t.Errorf("SetInstanceState of a missing instance: %v, want NotFound", err)
	}

	if !c.RemoveInstance(id) {
		t.Error("RemoveInstance of an existing instance returned false")
	}
	if c.RemoveInstance(id) {
		t.Error("second RemoveInstance returned true")
	}
	_, err = c.InstanceMetadata(ctx, node("n1", id))
	if !cloud.IsNotFound(err) || !errors.Is(err, cloud.ErrNotFound) {
		t.Errorf("InstanceMetadata after RemoveInstance: %v, want NotFound", err)
	}
}

func TestListInstances(t *testing.T) {
	c := newCloud(t, Options{})
	for _, n := range []string{"c", "a", "b"} {
		if err := c.AddInstance(instance(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.AddInstance(cloud.Instance{ProviderID: "fake://a-0", NodeName: "a"}); err != nil {
		t.Fatal(err)
	}
	got, err := c.ListInstances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range got {
		ids = append(ids, i.ProviderID)
	}
	if want := []string{"fake://a", "fake://a-0", "fake://b", "fake://c"}; !slices.Equal(ids, want) {
		t.Errorf("ListInstances order = %v, want %v", ids, want)
	}
	if all := c.AllInstances(); len(all) != 4 {
		t.Errorf("AllInstances returned %d instances, want 4", len(all))
	}
	if c.Calls(cloud.OpListInstances) != 1 {
		t.Errorf("Calls(cloud.OpListInstances) = %d, want 1 (accessors must not be logged)", c.Calls(cloud.OpListInstances))
	}
}

package upstreamcloud

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/nephele-dev/nephele/internal/testkit/servertest"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/dataplane"
	"github.com/nephele-dev/nephele/localcloud/server"
)

// startCloud starts a local cloud and returns the provider over it, a direct client and
// a function reading the cloud's call counts.
func startCloud(t *testing.T) (*Cloud, *client.Client) {
	t.Helper()
	srv, direct := servertest.Start(t, server.Config{
		VIPPool:   netip.MustParsePrefix("127.114.0.0/24"),
		DataPlane: dataplane.Config{DisableHealthChecks: true},
	})
	cfg := fmt.Sprintf("endpoint: %s\ntoken: %s\nrequestTimeout: 10s\n", srv.URL(), servertest.Token)
	c, err := New(strings.NewReader(cfg))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, direct
}

func node(name, providerID string, addrs ...corev1.NodeAddress) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
		Status:     corev1.NodeStatus{Addresses: addrs},
	}
}

func service(name, uid string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid)},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 18090, NodePort: 30090}},
		},
	}
}

// calls returns the calls of op made since before.
func calls(t *testing.T, c *client.Client, before client.CallCounts, op string) uint64 {
	t.Helper()
	now, err := c.CallCounts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return now.Since(before).Total(op)
}

func TestInstances(t *testing.T) {
	c, direct := startCloud(t)
	ctx := t.Context()
	inst, err := direct.CreateInstance(ctx, api.InstanceSpec{Name: "n1", Labels: map[string]string{"example.com/pool": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	in, ok := c.InstancesV2()
	if !ok {
		t.Fatal("no InstancesV2")
	}
	if _, ok := c.Instances(); ok {
		t.Fatal("the provider offers the legacy Instances as well")
	}
	pid := "local://" + inst.ID

	tests := []struct {
		name string
		node *corev1.Node
	}{
		{"by name", node("n1", "")},
		{"by provider ID", node("other-name", pid)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := direct.CallCounts(ctx)
			md, err := in.InstanceMetadata(ctx, tt.node)
			if err != nil {
				t.Fatalf("InstanceMetadata: %v", err)
			}
			if md.ProviderID != pid || md.InstanceType != inst.InstanceType || md.Zone != inst.Zone || md.Region != inst.Region {
				t.Errorf("metadata %+v does not match instance %+v", md, inst)
			}
			if md.AdditionalLabels["example.com/pool"] != "a" || len(md.NodeAddresses) != len(inst.Addresses) {
				t.Errorf("metadata %+v: labels or addresses missing", md)
			}
			if n := calls(t, direct, before, api.OpInstancesGet); n != 1 {
				t.Errorf("InstanceMetadata made %d instance gets, want 1", n)
			}
		})
	}

	exists, err := in.InstanceExists(ctx, node("n1", pid))
	if err != nil || !exists {
		t.Fatalf("InstanceExists of a running instance: %v, %v", exists, err)
	}
	exists, err = in.InstanceExists(ctx, node("gone", "local://i-00000000ffff"))
	if err != nil || exists {
		t.Fatalf("InstanceExists of a missing instance: %v, %v; want false, nil", exists, err)
	}
	if _, err := in.InstanceExists(ctx, node("foreign", "aws:///i-1")); err == nil {
		t.Fatal("InstanceExists of another cloud's provider ID succeeded")
	}

	down, err := in.InstanceShutdown(ctx, node("n1", pid))
	if err != nil || down {
		t.Fatalf("InstanceShutdown of a running instance: %v, %v", down, err)
	}
	if _, err := direct.StopInstance(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	down, err = in.InstanceShutdown(ctx, node("n1", pid))
	if err != nil || !down {
		t.Fatalf("InstanceShutdown of a stopped instance: %v, %v", down, err)
	}
}

func TestLoadBalancer(t *testing.T) {
	c, direct := startCloud(t)
	ctx := t.Context()
	lbs, ok := c.LoadBalancer()
	if !ok {
		t.Fatal("no LoadBalancer")
	}
	svc := service("web", "0b5e0f4c-0000-4000-8000-000000000001")
	name := cloudprovider.DefaultLoadBalancerName(svc)
	if got := lbs.GetLoadBalancerName(ctx, "bench", svc); got != name {
		t.Errorf("GetLoadBalancerName = %q, want %q", got, name)
	}
	if _, exists, err := lbs.GetLoadBalancer(ctx, "bench", svc); err != nil || exists {
		t.Fatalf("GetLoadBalancer before ensure: exists %v, %v", exists, err)
	}
	n1 := node("n1", "", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "127.200.0.1"})
	n2 := node("n2", "", corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n2"}, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "127.200.0.2"})
	noAddr := node("n3", "", corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n3"})

	st, err := lbs.EnsureLoadBalancer(ctx, "bench", svc, []*corev1.Node{n1, noAddr})
	if err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	// The IP mode is set (the cloud's, Proxy on loopback VIPs), so upstream's controller
	// finds the status it reads back equal to this one and does not patch it again.
	if len(st.Ingress) != 1 || st.Ingress[0].IP == "" || st.Ingress[0].IPMode == nil || *st.Ingress[0].IPMode != corev1.LoadBalancerIPModeProxy {
		t.Fatalf("status %+v: want one ingress with the VIP and IP mode Proxy", st)
	}
	got, err := direct.GetLoadBalancer(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.ClusterName != "bench" || got.Spec.Service != "ns/web" || len(got.Spec.Backends) != 1 || got.Spec.Backends[0].Address != "127.200.0.1" {
		t.Fatalf("ensured spec %+v: want cluster bench, service ns/web and only n1 (n3 has no address)", got.Spec)
	}

	before, _ := direct.CallCounts(ctx)
	if err := lbs.UpdateLoadBalancer(ctx, "bench", svc, []*corev1.Node{n1, n2}); err != nil {
		t.Fatalf("UpdateLoadBalancer: %v", err)
	}
	if n := calls(t, direct, before, api.OpLBUpdate); n != 1 {
		t.Errorf("UpdateLoadBalancer made %d updates, want 1", n)
	}
	got, _ = direct.GetLoadBalancer(ctx, name)
	if len(got.Spec.Backends) != 2 || got.Spec.Backends[1].Address != "127.200.0.2" {
		t.Fatalf("backends after the update: %+v; want n1 and n2 at its ExternalIP", got.Spec.Backends)
	}
	if st, exists, err := lbs.GetLoadBalancer(ctx, "bench", svc); err != nil || !exists || st.Ingress[0].IP != got.Status.VIP {
		t.Fatalf("GetLoadBalancer: %+v, %v, %v", st, exists, err)
	}
	for i := range 2 {
		if err := lbs.EnsureLoadBalancerDeleted(ctx, "bench", svc); err != nil {
			t.Fatalf("EnsureLoadBalancerDeleted (%d): %v", i+1, err)
		}
	}
	if err := lbs.UpdateLoadBalancer(ctx, "bench", svc, []*corev1.Node{n1}); err == nil {
		t.Fatal("UpdateLoadBalancer of a deleted load balancer succeeded")
	}
}

func TestRoutes(t *testing.T) {
	c, direct := startCloud(t)
	ctx := t.Context()
	if _, err := direct.CreateInstance(ctx, api.InstanceSpec{Name: "n1"}); err != nil {
		t.Fatal(err)
	}
	rt, ok := c.Routes()
	if !ok {
		t.Fatal("no Routes")
	}
	r := &cloudprovider.Route{TargetNode: "n1", DestinationCIDR: "100.64.1.0/24"}
	for i := range 2 {
		if err := rt.CreateRoute(ctx, "bench", "0b5e0f4c-0000-4000-8000-000000000002", r); err != nil {
			t.Fatalf("CreateRoute (%d): %v", i+1, err)
		}
	}
	list, err := rt.ListRoutes(ctx, "bench")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].TargetNode != "n1" || list[0].DestinationCIDR != "100.64.1.0/24" || list[0].Name == "" {
		t.Fatalf("routes %+v", list)
	}
	if other, err := rt.ListRoutes(ctx, "other"); err != nil || len(other) != 0 {
		t.Fatalf("another cluster's routes: %+v, %v", other, err)
	}
	for i := range 2 {
		if err := rt.DeleteRoute(ctx, "bench", list[0]); err != nil {
			t.Fatalf("DeleteRoute (%d): %v", i+1, err)
		}
	}
	if list, err := rt.ListRoutes(ctx, "bench"); err != nil || len(list) != 0 {
		t.Fatalf("routes after delete: %+v, %v", list, err)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, cfg := range []string{"", "endpoint: http://127.0.0.1:1\n", "token: x\n", "endpoint: ftp://x\ntoken: x\n"} {
		if _, err := New(strings.NewReader(cfg)); err == nil {
			t.Errorf("New accepted %q", cfg)
		}
	}
}

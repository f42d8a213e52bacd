package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
)

// The tests in this file run the provider against a real local cloud: the HTTP
// service of package localcloud/server on a loopback port, with a bbolt state file and
// a data plane that really forwards TCP.

func TestIntegrationInstances(t *testing.T) {
	ctx := context.Background()
	c := startRealCloud(t)
	in := c.instances(t)

	a := c.create(t, api.InstanceSpec{
		Name: "node-a", Zone: "zone-1", Region: "region-1", InstanceType: "big.2",
		Addresses: []api.Address{{Type: api.AddressInternalIP, Address: "10.1.0.5"}, {Type: api.AddressExternalIP, Address: "192.0.2.5"}},
		Labels:    map[string]string{"example.com/pool": "edge"},
	})
	b := c.create(t, api.InstanceSpec{Name: "node-b"})

	want := cloud.Instance{
		ProviderID: "local://" + a.ID, NodeName: "node-a", InstanceType: "big.2", Zone: "zone-1", Region: "region-1",
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "10.1.0.5"},
			{Type: corev1.NodeExternalIP, Address: "192.0.2.5"},
			{Type: corev1.NodeHostName, Address: "node-a"},
		},
		Labels: map[string]string{"example.com/pool": "edge"},
		State:  cloud.InstanceRunning,
	}
	for name, node := range map[string]*corev1.Node{
		"by provider ID":                    nodeNamed("node-a", "local://"+a.ID),
		"by provider ID with three slashes": nodeNamed("whatever", "local:///"+a.ID),
		"by name":                           nodeNamed("node-a", ""),
	} {
		got, err := in.InstanceMetadata(ctx, node)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, *got, want)
		}
	}

	// Defaults of the cloud: a zone, the region, the instance type and an InternalIP
	// from the instance range.
	gotB, err := in.InstanceMetadata(ctx, nodeNamed("node-b", ""))
	if err != nil {
		t.Fatal(err)
	}
	if gotB.ProviderID != "local://"+b.ID || gotB.Zone == "" || gotB.Region != "local" || gotB.InstanceType != "local.small" || gotB.Labels != nil {
		t.Errorf("node-b: %+v", gotB)
	}
	ip, ok := backendAddress(gotB.Addresses, "")
	if !ok || !c.cfg.InstanceCIDR.Contains(ip) {
		t.Errorf("node-b addresses %v, want an InternalIP from %s", gotB.Addresses, c.cfg.InstanceCIDR)
	}

	// States.
	state := func() cloud.InstanceState {
		t.Helper()
		got, err := in.InstanceMetadata(ctx, nodeNamed("node-b", "local://"+b.ID))
		if err != nil {
			t.Fatal(err)
		}
		return got.State
	}
	if _, err := c.admin.StopInstance(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if s := state(); s != cloud.InstanceStopped {
		t.Errorf("stopped instance has state %s", s)
	}
	if _, err := c.admin.TerminateInstance(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	// A terminated instance is gone, by provider ID and by name, and from listings,
	// though the local cloud still lists it until it is deleted.
	if _, err := in.InstanceMetadata(ctx, nodeNamed("node-b", "local://"+b.ID)); !cloud.IsNotFound(err) {
		t.Errorf("terminated instance by provider ID: %v, want NotFound", err)
	}
	if _, err := in.InstanceMetadata(ctx, nodeNamed("node-b", "")); !cloud.IsNotFound(err) {
		t.Errorf("terminated instance by name: %v, want NotFound", err)
	}
	if listed, err := c.lister(t).ListInstances(ctx); err != nil || slices.ContainsFunc(listed, func(i cloud.Instance) bool { return i.ProviderID == "local://"+b.ID }) {
		t.Errorf("listing after terminating %s: %v, %v; want it left out", b.ID, listed, err)
	}

	// A deleted instance is positively not found, by ID and by name.
	if err := c.admin.DeleteInstance(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	for name, node := range map[string]*corev1.Node{"by ID": nodeNamed("node-b", "local://"+b.ID), "by name": nodeNamed("node-b", "")} {
		_, err := in.InstanceMetadata(ctx, node)
		if !cloud.IsNotFound(err) {
			t.Errorf("deleted instance %s: %v, want NotFound", name, err)
		}
	}

	// Another provider's ID is refused without a call, never NotFound.
	_, err = in.InstanceMetadata(ctx, nodeNamed("node-a", "aws:///us-east-1a/i-0abc"))
	if !cloud.IsInvalid(err) || cloud.IsNotFound(err) {
		t.Errorf("foreign provider ID: %v, want an invalid request", err)
	}

	list, err := c.lister(t).ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || !reflect.DeepEqual(list[0], want) {
		t.Errorf("listing %+v, want only node-a %+v", list, want)
	}
}

func TestIntegrationListInstancesPages(t *testing.T) {
	ctx := context.Background()
	c := startRealCloud(t, "listPageSize: 2")
	var wantIDs []string
	for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
		wantIDs = append(wantIDs, "local://"+c.create(t, api.InstanceSpec{Name: n}).ID)
	}
	before := c.counts(t)
	list, err := c.lister(t).ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, i := range list {
		got = append(got, i.ProviderID)
	}
	if !slices.Equal(got, wantIDs) {
		t.Errorf("listed %v, want %v", got, wantIDs)
	}
	if n := c.counts(t).Since(before).Code(api.OpInstancesList, 200); n != 3 {
		t.Errorf("listing 5 instances in pages of 2 took %d list calls, want 3", n)
	}

	// A page that fails fails the whole listing: with a budget of two list calls the
	// third page is throttled.
	c.fault(t, api.Fault{Operation: api.OpInstancesList, RateLimit: &api.RateLimit{QPS: 0.01, Burst: 2}})
	list, err = c.lister(t).ListInstances(ctx)
	if list != nil || !cloud.IsThrottled(err) || cloud.IsNotFound(err) {
		t.Fatalf("listing with a throttled third page = %d instances, %v; want no list and a throttled error", len(list), err)
	}
	if ra, ok := cloud.RetryAfter(err); !ok || ra < time.Second {
		t.Errorf("Retry-After %s, %v; want at least a second", ra, ok)
	}
	if !strings.Contains(err.Error(), "page 3") {
		t.Errorf("error %q does not say which page failed", err)
	}
}

// TestIntegrationFaults checks the provider's answer to each fault knob of the cloud.
func TestIntegrationFaults(t *testing.T) {
	ctx := context.Background()
	c := startRealCloud(t)
	inst := c.create(t, api.InstanceSpec{Name: "node-f"})
	node := nodeNamed("node-f", "local://"+inst.ID)
	spec := lbSpec("lb-f")

	cidr := netip.MustParsePrefix("10.244.0.0/24")
	calls := []struct {
		name, op string
		call     func() error
	}{
		{"metadata by ID", api.OpInstancesGet, func() error { _, err := c.instances(t).InstanceMetadata(ctx, node); return err }},
		{"metadata by name", api.OpInstancesGet, func() error {
			_, err := c.instances(t).InstanceMetadata(ctx, nodeNamed("node-f", ""))
			return err
		}},
		{"list instances", api.OpInstancesList, func() error { _, err := c.lister(t).ListInstances(ctx); return err }},
		{"ensure", api.OpLBEnsure, func() error { _, err := c.lbs(t).EnsureLoadBalancer(ctx, spec, nil); return err }},
		{"update backends", api.OpLBUpdate, func() error { return c.lbs(t).UpdateLoadBalancerBackends(ctx, spec, nil) }},
		{"get", api.OpLBGet, func() error { _, err := c.lbs(t).GetLoadBalancer(ctx, spec, nil); return err }},
		{"delete", api.OpLBDelete, func() error { return c.lbs(t).EnsureLoadBalancerDeleted(ctx, spec, nil) }},
		{"list routes", api.OpRoutesList, func() error { _, err := c.routes(t).ListRoutes(ctx, "kubernetes"); return err }},
		{"create route", api.OpRoutesCreate, func() error {
			return c.routes(t).CreateRoute(ctx, "kubernetes", "", cloud.Route{TargetNode: "node-f", DestinationCIDR: cidr})
		}},
		{"delete route", api.OpRoutesDelete, func() error {
			return c.routes(t).DeleteRoute(ctx, "kubernetes", cloud.Route{Name: "r1", TargetNode: "node-f", DestinationCIDR: cidr})
		}},
		{"apply routes", api.OpRoutesApply, func() error {
			return c.routes(t).(cloud.RouteBatcher).ApplyRoutes(ctx, "kubernetes", []cloud.RouteChange{{Route: cloud.Route{TargetNode: "node-f", DestinationCIDR: cidr}}})
		}},
	}

	knobs := []struct {
		name   string
		fault  func(op string) api.Fault
		result cloud.Result
		status int
	}{
		{"outage", func(op string) api.Fault { return api.Fault{Operation: op, Outage: true} }, cloud.ResultError, http.StatusServiceUnavailable},
		{"errors", func(op string) api.Fault { return api.Fault{Operation: op, ErrorRate: 1} }, cloud.ResultError, http.StatusInternalServerError},
		{"unimplemented", func(op string) api.Fault { return api.Fault{Operation: op, NotImplemented: true} }, cloud.ResultNotImplemented, http.StatusNotImplemented},
		{"throttle", func(op string) api.Fault {
			// One token, refilled far slower than the test runs: the second call is refused.
			return api.Fault{Operation: op, RateLimit: &api.RateLimit{QPS: 0.001, Burst: 1}}
		}, cloud.ResultThrottled, http.StatusTooManyRequests},
	}
	for _, k := range knobs {
		for _, cl := range calls {
			op := cl.op
			t.Run(k.name+"/"+cl.name, func(t *testing.T) {
				f := k.fault(op)
				c.fault(t, f)
				if f.RateLimit != nil {
					// Use up the burst with a call the bucket lets through.
					_ = cl.call()
				}
				err := cl.call()
				if err == nil {
					t.Fatalf("%s under %s succeeded", op, k.name)
				}
				if got := cloud.Classify(err); got != k.result {
					t.Errorf("%s under %s: %v classified %s, want %s", op, k.name, err, got, k.result)
				}
				if cloud.IsNotFound(err) {
					t.Errorf("%s under %s: %v matches NotFound", op, k.name, err)
				}
				if k.result == cloud.ResultThrottled {
					if ra, ok := cloud.RetryAfter(err); !ok || ra < time.Second {
						t.Errorf("Retry-After %s, %v; want the cloud's, at least a second", ra, ok)
					}
				}
				var ce *client.Error
				if !errors.As(err, &ce) || ce.StatusCode != k.status {
					t.Errorf("%s under %s: %v does not carry the cloud's %d answer", op, k.name, err, k.status)
				}
			})
		}
	}

	// Once the faults are gone the same calls work again.
	if _, err := c.instances(t).InstanceMetadata(ctx, node); err != nil {
		t.Errorf("after the faults: %v", err)
	}
}

func TestIntegrationWrongToken(t *testing.T) {
	c := startRealCloud(t)
	p, err := New(strings.NewReader("endpoint: " + c.srv.URL() + "\ntoken: wrong\n"))
	if err != nil {
		t.Fatal(err)
	}
	in, _ := p.Instances()
	_, err = in.InstanceMetadata(context.Background(), nodeNamed("node-x", ""))
	if err == nil || cloud.IsNotFound(err) || cloud.Classify(err) != cloud.ResultError {
		t.Errorf("lookup with a wrong token: %v, want a temporary error", err)
	}
}

// TestIntegrationLoadBalancer ensures a load balancer through the provider and checks
// that its VIP really forwards TCP to the backends' addresses, follows backend updates,
// and stops when deleted.
func TestIntegrationLoadBalancer(t *testing.T) {
	ctx := context.Background()
	c := startRealCloud(t)
	lbs := c.lbs(t)
	vip := c.firstVIP()
	addr1, addr2 := backendAddrs(c.cfg.InstanceCIDR)
	nodePort := testnet.FreePort(t, "tcp", addr1, addr2)
	port := testnet.FreePort(t, "tcp", vip)
	testnet.TCPEcho(t, netip.AddrPortFrom(addr1, nodePort), "node-1")
	testnet.TCPEcho(t, netip.AddrPortFrom(addr2, nodePort), "node-2")

	backend := func(name string, addrs ...corev1.NodeAddress) cloud.Backend {
		return cloud.Backend{NodeName: name, ProviderID: "local://" + name, Addresses: addrs}
	}
	spec := &cloud.LoadBalancerSpec{
		Name:        "a0123456789abcdef",
		ClusterName: "kubernetes",
		Service:     types.NamespacedName{Namespace: "default", Name: "web"},
		Ports:       []cloud.LoadBalancerPort{{Name: "echo", Protocol: corev1.ProtocolTCP, Port: int32(port), NodePort: int32(nodePort)}},
		Backends: []cloud.Backend{
			backend("node-1", corev1.NodeAddress{Type: corev1.NodeHostName, Address: "node-1"}, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: addr1.String()}),
			backend("node-3", corev1.NodeAddress{Type: corev1.NodeHostName, Address: "node-3"}), // no IP: skipped
		},
		SourceRanges: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		IPFamilies:   []corev1.IPFamily{corev1.IPv4Protocol},
	}

	if _, err := lbs.GetLoadBalancer(ctx, spec, nil); !cloud.IsNotFound(err) {
		t.Fatalf("GetLoadBalancer before ensure: %v, want NotFound", err)
	}
	if err := lbs.UpdateLoadBalancerBackends(ctx, spec, nil); !cloud.IsNotFound(err) {
		t.Fatalf("UpdateLoadBalancerBackends before ensure: %v, want NotFound", err)
	}

	st, err := lbs.EnsureLoadBalancer(ctx, spec, nil)
	if err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	// VIPs on loopback: the user-space proxy, which says so.
	mode := corev1.LoadBalancerIPModeProxy
	wantStatus := &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: vip.String(), IPMode: &mode}}}
	if !reflect.DeepEqual(st, wantStatus) {
		t.Fatalf("status %+v, want %+v", st, wantStatus)
	}
	got, err := c.admin.GetLoadBalancer(ctx, spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	wantSpec := api.LoadBalancerSpec{
		ClusterName:  "kubernetes",
		Service:      "default/web",
		Ports:        []api.Port{{Name: "echo", Protocol: api.ProtocolTCP, Port: int32(port), NodePort: int32(nodePort)}},
		Backends:     []api.Backend{{NodeName: "node-1", Address: addr1.String()}},
		SourceRanges: []string{"127.0.0.0/8"},
		// Traffic policy Cluster: kube-proxy's healthz, which nothing serves here, so
		// every backend fails it and traffic goes to all of them (fail open).
		HealthCheckNodePort: cloud.KubeProxyHealthzPort,
	}
	if !reflect.DeepEqual(got.Spec, wantSpec) {
		t.Errorf("the cloud holds\n%+v\nwant\n%+v", got.Spec, wantSpec)
	}

	front := netip.AddrPortFrom(vip, port)
	answers := func(tag string) func() error {
		return func() error {
			a, err := testnet.AskTCP(front, netip.Addr{}, "hello")
			if err == nil && a != tag+" hello" {
				err = fmt.Errorf("answered %q", a)
			}
			return err
		}
	}
	poll.Eventually(t, "the VIP to forward to node-1", answers("node-1"))

	// Ensuring again with the same spec keeps the VIP.
	again, err := lbs.EnsureLoadBalancer(ctx, spec, nil)
	if err != nil || !reflect.DeepEqual(again, wantStatus) {
		t.Fatalf("second ensure: %+v, %v", again, err)
	}
	if st, err := lbs.GetLoadBalancer(ctx, spec, nil); err != nil || !reflect.DeepEqual(st, wantStatus) {
		t.Fatalf("GetLoadBalancer: %+v, %v", st, err)
	}

	// Move the traffic to node-2, whose only address is an ExternalIP.
	spec.Backends = []cloud.Backend{backend("node-2", corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: addr2.String()})}
	if err := lbs.UpdateLoadBalancerBackends(ctx, spec, nil); err != nil {
		t.Fatalf("UpdateLoadBalancerBackends: %v", err)
	}
	poll.Eventually(t, "the VIP to forward to node-2", answers("node-2"))
	for range 5 {
		if a, err := testnet.AskTCP(front, netip.Addr{}, "again"); err != nil || a != "node-2 again" {
			t.Fatalf("after the update the VIP answered %q, %v; want node-2 only", a, err)
		}
	}

	// Deleting closes the listener; deleting again succeeds.
	if err := lbs.EnsureLoadBalancerDeleted(ctx, spec, nil); err != nil {
		t.Fatalf("EnsureLoadBalancerDeleted: %v", err)
	}
	poll.Eventually(t, "the VIP to stop listening", func() error {
		conn, err := net.DialTimeout("tcp", front.String(), time.Second)
		if err != nil {
			return nil
		}
		_ = conn.Close()
		return errors.New("it still accepts connections")
	})
	if err := lbs.EnsureLoadBalancerDeleted(ctx, spec, nil); err != nil {
		t.Errorf("deleting a deleted load balancer: %v, want success", err)
	}
	if _, err := lbs.GetLoadBalancer(ctx, spec, nil); !cloud.IsNotFound(err) {
		t.Errorf("GetLoadBalancer after delete: %v, want NotFound", err)
	}
}

// TestIntegrationClusterTrafficHealthCheck checks that an externalTrafficPolicy Cluster
// load balancer is health-checked through kube-proxy's /healthz on each backend, as real
// clouds do: a node whose kube-proxy answers 503 (KEP-3836: the node is tainted
// ToBeDeletedByClusterAutoscaler or being deleted) gets no new connections although its
// node port still accepts them, so its connections drain.
func TestIntegrationClusterTrafficHealthCheck(t *testing.T) {
	ctx := context.Background()
	instanceCIDR := testnet.LoopbackPrefix(108)
	addr1, addr2 := backendAddrs(instanceCIDR)
	healthzPort := testnet.FreePort(t, "tcp", addr1, addr2)
	c := startRealCloudIn(t, instanceCIDR, fmt.Sprintf("proxyHealthzPort: %d", healthzPort))
	lbs := c.lbs(t)
	vip := c.firstVIP()
	nodePort := testnet.FreePort(t, "tcp", addr1, addr2)
	port := testnet.FreePort(t, "tcp", vip)
	testnet.TCPEcho(t, netip.AddrPortFrom(addr1, nodePort), "node-1")
	testnet.TCPEcho(t, netip.AddrPortFrom(addr2, nodePort), "node-2")
	testnet.Healthz(t, netip.AddrPortFrom(addr1, healthzPort), http.StatusOK)
	testnet.Healthz(t, netip.AddrPortFrom(addr2, healthzPort), http.StatusServiceUnavailable)

	spec := lbSpec("a0123456789cluster", cloud.LoadBalancerPort{Name: "echo", Protocol: corev1.ProtocolTCP, Port: int32(port), NodePort: int32(nodePort)})
	spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	spec.Backends = []cloud.Backend{
		{NodeName: "node-1", Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr1.String()}}},
		{NodeName: "node-2", Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr2.String()}}},
	}
	if _, err := lbs.EnsureLoadBalancer(ctx, spec, nil); err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	got, err := c.admin.GetLoadBalancer(ctx, spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.HealthCheckNodePort != int32(healthzPort) {
		t.Errorf("the cloud health-checks port %d, want kube-proxy's %d", got.Spec.HealthCheckNodePort, healthzPort)
	}
	front := netip.AddrPortFrom(vip, port)
	poll.Eventually(t, "node-2 to be drained", func() error {
		for range 10 {
			a, err := testnet.AskTCP(front, netip.Addr{}, "hello")
			if err != nil {
				return err
			}
			if a != "node-1 hello" {
				return fmt.Errorf("answered %q", a)
			}
		}
		return nil
	})
}

// TestIntegrationLoadBalancerRefusals checks requests the cloud refuses: unsupported
// protocols and VIPs are invalid and named; a taken port is a temporary conflict.
func TestIntegrationLoadBalancerRefusals(t *testing.T) {
	ctx := context.Background()
	c := startRealCloud(t)
	lbs := c.lbs(t)

	sctp := lbSpec("lb-sctp",
		cloud.LoadBalancerPort{Name: "web", Protocol: corev1.ProtocolTCP, Port: 8080, NodePort: 30080},
		cloud.LoadBalancerPort{Name: "sig", Protocol: corev1.ProtocolSCTP, Port: 9000, NodePort: 30900})
	_, err := lbs.EnsureLoadBalancer(ctx, sctp, nil)
	if !cloud.IsInvalid(err) || !strings.Contains(err.Error(), "spec.ports[1].protocol") || !strings.Contains(err.Error(), `Service port "sig"`) {
		t.Errorf("SCTP port: %v, want an invalid request naming spec.ports[1].protocol and the Service port", err)
	}

	outside := lbSpec("lb-ip")
	outside.RequestedIP = "192.0.2.10"
	_, err = lbs.EnsureLoadBalancer(ctx, outside, nil)
	if !cloud.IsInvalid(err) || !strings.Contains(err.Error(), "loadBalancerIP") {
		t.Errorf("VIP outside the pool: %v, want an invalid request naming loadBalancerIP", err)
	}

	// Something else holds the VIP's port: a conflict the controller retries.
	vip := c.firstVIP()
	port := testnet.FreePort(t, "tcp", vip)
	ln, err := net.Listen("tcp", netip.AddrPortFrom(vip, port).String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	taken := lbSpec("lb-taken", cloud.LoadBalancerPort{Name: "p", Protocol: corev1.ProtocolTCP, Port: int32(port), NodePort: 30001})
	// Asked for by loadBalancerIP: the cloud cannot move it to a free address.
	taken.RequestedIP = vip.String()
	_, err = lbs.EnsureLoadBalancer(ctx, taken, nil)
	if err == nil || cloud.Classify(err) != cloud.ResultError {
		t.Errorf("taken port: %v, want a temporary error", err)
	}
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != http.StatusConflict {
		t.Errorf("taken port: %v, want the cloud's 409", err)
	}
	if _, err := lbs.GetLoadBalancer(ctx, taken, nil); !cloud.IsNotFound(err) {
		t.Errorf("a refused ensure left a load balancer behind: %v", err)
	}
}

// TestIntegrationRouteBatch: routes.apply makes many changes in one call of the real
// local cloud, all or none, and the provider says which refusals the controller should
// split the call for (ErrInvalid).
func TestIntegrationRouteBatch(t *testing.T) {
	ctx := t.Context()
	c := startRealCloud(t)
	rt := c.routes(t)
	b, ok := rt.(cloud.RouteBatcher)
	if !ok {
		t.Fatal("the local provider's Routes do not batch by default")
	}
	if n := b.MaxRouteChanges(); n != api.MaxRouteChanges {
		t.Errorf("MaxRouteChanges = %d, want the cloud's %d", n, api.MaxRouteChanges)
	}
	var creates []cloud.RouteChange
	for i := range 20 {
		c.create(t, api.InstanceSpec{Name: fmt.Sprintf("node-%d", i)})
		creates = append(creates, cloud.RouteChange{NameHint: fmt.Sprintf("blue-uid%d-ipv4", i),
			Route: cloud.Route{TargetNode: fmt.Sprintf("node-%d", i), DestinationCIDR: netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/24", i))}})
	}
	before := c.counts(t)
	if err := b.ApplyRoutes(ctx, "blue", creates); err != nil {
		t.Fatalf("ApplyRoutes of 20 creations: %v", err)
	}
	if got := c.counts(t).Total(api.OpRoutesApply) - before.Total(api.OpRoutesApply); got != 1 {
		t.Errorf("routes.apply calls = %d, want 1", got)
	}
	got, err := rt.ListRoutes(ctx, "blue")
	if err != nil || len(got) != 20 {
		t.Fatalf("routes after one batch: %d, %v; want 20", len(got), err)
	}
	// The same creations again change nothing and succeed.
	if err := b.ApplyRoutes(ctx, "blue", creates); err != nil {
		t.Errorf("applying identical creations again: %v", err)
	}

	// A batch whose one creation takes another route's destination is refused whole,
	// as ErrInvalid, and changes nothing: the deletion in it did not happen either.
	bad := []cloud.RouteChange{
		{Delete: true, Route: got[0]},
		{Route: cloud.Route{TargetNode: "node-1", DestinationCIDR: got[2].DestinationCIDR}},
	}
	if err := b.ApplyRoutes(ctx, "blue", bad); !cloud.IsInvalid(err) || !strings.Contains(err.Error(), "create[0]") {
		t.Errorf("a batch with a conflicting creation: %v, want ErrInvalid naming create[0]", err)
	}
	if after, _ := rt.ListRoutes(ctx, "blue"); len(after) != 20 {
		t.Errorf("routes after a refused batch: %d, want 20 (all or none)", len(after))
	}

	// Deletions by name and by destination alone (one listing finds those), and of a
	// route that is gone, in one call.
	deletes := []cloud.RouteChange{
		{Delete: true, Route: got[0]},
		{Delete: true, Route: cloud.Route{TargetNode: got[1].TargetNode, DestinationCIDR: got[1].DestinationCIDR}},
		{Delete: true, Route: cloud.Route{Name: "never-was", DestinationCIDR: netip.MustParsePrefix("10.244.99.0/24")}},
	}
	if err := b.ApplyRoutes(ctx, "blue", deletes); err != nil {
		t.Fatalf("ApplyRoutes of deletions: %v", err)
	}
	if after, _ := rt.ListRoutes(ctx, "blue"); len(after) != 18 {
		t.Errorf("routes after deleting two: %d, want 18", len(after))
	}

	// More changes than the cloud takes in one call: the cloud's 400, ErrInvalid,
	// naming the bound.
	var many []cloud.RouteChange
	for i := range api.MaxRouteChanges + 1 {
		many = append(many, cloud.RouteChange{Delete: true, Route: cloud.Route{Name: fmt.Sprintf("r%d", i)}})
	}
	if err := b.ApplyRoutes(ctx, "blue", many); !cloud.IsInvalid(err) || !strings.Contains(err.Error(), "split") {
		t.Errorf("%d changes in one call: %v, want ErrInvalid saying to split them", len(many), err)
	}
}

// TestIntegrationRouteBatchOff: routeBatch: false leaves the provider's Routes without
// the batch capability.
func TestIntegrationRouteBatchOff(t *testing.T) {
	c := startRealCloud(t, "routeBatch: false")
	if _, ok := c.routes(t).(cloud.RouteBatcher); ok {
		t.Error("routeBatch: false, yet the provider's Routes batch")
	}
}

func TestIntegrationRoutes(t *testing.T) {
	ctx := context.Background()
	c := startRealCloud(t)
	rt := c.routes(t)
	n1 := c.create(t, api.InstanceSpec{Name: "node-1"})
	c.create(t, api.InstanceSpec{Name: "node-2"})
	cidr1, cidr2 := netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("10.244.2.0/24")

	if got, err := rt.ListRoutes(ctx, "blue"); err != nil || len(got) != 0 {
		t.Fatalf("routes of a new cluster: %v, %v", got, err)
	}
	// The node's addresses are stored and listed back, so the controller can compare them.
	addrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: "node-1"}}
	if err := rt.CreateRoute(ctx, "blue", "blue-uid1-ipv4", cloud.Route{TargetNode: "node-1", DestinationCIDR: cidr1, TargetNodeAddresses: addrs}); err != nil {
		t.Fatalf("CreateRoute: %v", err)
	}
	// Identical again, under another hint: success, no second route.
	if err := rt.CreateRoute(ctx, "blue", "other-hint", cloud.Route{TargetNode: "node-1", DestinationCIDR: cidr1}); err != nil {
		t.Fatalf("creating an identical route: %v", err)
	}
	// A hint the cloud does not accept as a name: the cloud names the route.
	if err := rt.CreateRoute(ctx, "blue", "blue/uid2", cloud.Route{TargetNode: "node-2", DestinationCIDR: cidr2}); err != nil {
		t.Fatalf("CreateRoute with an unusable hint: %v", err)
	}
	// Another cluster's table is separate.
	if err := rt.CreateRoute(ctx, "green", "", cloud.Route{TargetNode: "node-2", DestinationCIDR: cidr1}); err != nil {
		t.Fatalf("CreateRoute in another cluster: %v", err)
	}

	want := []cloud.Route{
		{Name: "blue-uid1-ipv4", TargetNode: "node-1", DestinationCIDR: cidr1, TargetNodeAddresses: addrs, EnableNodeAddresses: true},
		{Name: "r-10-244-2-0-24", TargetNode: "node-2", DestinationCIDR: cidr2},
	}
	got, err := rt.ListRoutes(ctx, "blue")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("routes of blue: %+v, %v; want %+v", got, err, want)
	}

	// A destination routed elsewhere, or a target that does not exist: a conflict,
	// temporary, never NotFound.
	for name, r := range map[string]cloud.Route{
		"destination taken": {TargetNode: "node-2", DestinationCIDR: cidr1},
		"no such target":    {TargetNode: "node-9", DestinationCIDR: netip.MustParsePrefix("10.244.9.0/24")},
	} {
		err := rt.CreateRoute(ctx, "blue", "", r)
		if err == nil || cloud.Classify(err) != cloud.ResultError {
			t.Errorf("%s: %v, want a temporary error", name, err)
		}
	}
	// A destination with host bits is masked, as the node's pod CIDR means the network.
	if err := rt.CreateRoute(ctx, "green", "", cloud.Route{TargetNode: "node-1", DestinationCIDR: netip.MustParsePrefix("10.244.7.1/24")}); err != nil {
		t.Errorf("CreateRoute with host bits: %v", err)
	}

	// A terminated target makes the route a blackhole.
	if _, err := c.admin.TerminateInstance(ctx, n1.ID); err != nil {
		t.Fatal(err)
	}
	got, err = rt.ListRoutes(ctx, "blue")
	if err != nil || len(got) != 2 || !got[0].Blackhole || got[1].Blackhole {
		t.Fatalf("routes after terminating node-1: %+v, %v; want the first a blackhole", got, err)
	}

	// Delete by name, by destination and target (no name), and again: all succeed.
	if err := rt.DeleteRoute(ctx, "blue", got[0]); err != nil {
		t.Fatalf("DeleteRoute: %v", err)
	}
	if err := rt.DeleteRoute(ctx, "blue", cloud.Route{TargetNode: "node-2", DestinationCIDR: cidr2}); err != nil {
		t.Fatalf("DeleteRoute without a name: %v", err)
	}
	if err := rt.DeleteRoute(ctx, "blue", got[0]); err != nil {
		t.Errorf("deleting a deleted route: %v, want success", err)
	}
	if got, err := rt.ListRoutes(ctx, "blue"); err != nil || len(got) != 0 {
		t.Errorf("routes of blue after deleting: %+v, %v", got, err)
	}
	if got, err := rt.ListRoutes(ctx, "green"); err != nil || len(got) != 2 {
		t.Errorf("routes of green: %+v, %v; want its two routes untouched", got, err)
	}

	// An invalid cluster name is refused by the cloud, naming the field.
	_, err = rt.ListRoutes(ctx, "-bad")
	if !cloud.IsInvalid(err) || !strings.Contains(err.Error(), "cluster") {
		t.Errorf("invalid cluster name: %v, want an invalid request naming the cluster", err)
	}
}

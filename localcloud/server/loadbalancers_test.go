package server_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/server"
)

func tcpPort(port, nodePort uint16) api.Port {
	return api.Port{Protocol: api.ProtocolTCP, Port: int32(port), NodePort: int32(nodePort)}
}

func udpPort(port, nodePort uint16) api.Port {
	return api.Port{Protocol: api.ProtocolUDP, Port: int32(port), NodePort: int32(nodePort)}
}

func backend(name string, a netip.Addr) api.Backend {
	return api.Backend{NodeName: name, Address: a.String()}
}

// healthOf returns the health the cloud reports for a backend.
func healthOf(t *testing.T, c *testCloud, lb, node string) api.Health {
	t.Helper()
	got, err := c.client.GetLoadBalancer(ctx(), lb)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range got.Status.Backends {
		if b.NodeName == node {
			return b.Health
		}
	}
	return ""
}

func TestLoadBalancerCRUD(t *testing.T) {
	c := startCloud(t)
	cl := c.client
	spec := api.LoadBalancerSpec{
		ClusterName: "k",
		Service:     "default/web",
		Ports:       []api.Port{tcpPort(1, 30001)},
		Backends:    []api.Backend{backend("node-1", nodeA)},
	}
	code, _, body := c.raw("PUT", "/v1/loadbalancers/web", `{"clusterName":"k","ports":[{"protocol":"TCP","port":1,"nodePort":30001}],"backends":[{"nodeName":"node-1","address":"127.200.255.1"}]}`, nil)
	if code != http.StatusCreated {
		t.Fatalf("first ensure: %d %s", code, body)
	}
	web := must(cl.GetLoadBalancer(ctx(), "web")).of(t)
	if web.Status.VIP != c.firstVIP().String() {
		t.Fatalf("VIP %s, want the pool's first address %s", web.Status.VIP, c.firstVIP())
	}

	// The same spec again changes nothing.
	again := must(cl.EnsureLoadBalancer(ctx(), "web", api.LoadBalancerSpec{
		ClusterName: "k", Ports: spec.Ports, Backends: spec.Backends,
	})).of(t)
	if !again.UpdatedAt.Equal(web.UpdatedAt) || again.Status.VIP != web.Status.VIP {
		t.Fatalf("an identical ensure rewrote the load balancer: %v -> %v", web.UpdatedAt, again.UpdatedAt)
	}
	// A changed spec keeps the VIP.
	spec.Ports = append(spec.Ports, udpPort(1, 30002))
	changed := must(cl.EnsureLoadBalancer(ctx(), "web", spec)).of(t)
	if changed.Status.VIP != web.Status.VIP || len(changed.Spec.Ports) != 2 || !changed.CreatedAt.Equal(web.CreatedAt) {
		t.Fatalf("update: %+v", changed)
	}

	other := must(cl.EnsureLoadBalancer(ctx(), "db", api.LoadBalancerSpec{ClusterName: "k2", Ports: []api.Port{tcpPort(1, 30003)}})).of(t)
	if other.Status.VIP == web.Status.VIP {
		t.Fatal("two load balancers share a VIP")
	}
	if _, err := cl.EnsureLoadBalancer(ctx(), "thief", api.LoadBalancerSpec{Ports: []api.Port{tcpPort(1, 30004)}, RequestedIP: web.Status.VIP}); statusOf(err) != http.StatusConflict {
		t.Fatalf("requesting another load balancer's VIP: %v, want 409", err)
	}
	requested := c.cfg.VIPPool.Addr().Next().Next().Next().Next() // .4
	mine := must(cl.EnsureLoadBalancer(ctx(), "mine", api.LoadBalancerSpec{Ports: []api.Port{tcpPort(1, 30005)}, RequestedIP: requested.String()})).of(t)
	if mine.Status.VIP != requested.String() {
		t.Fatalf("requested VIP %s, got %s", requested, mine.Status.VIP)
	}

	if lbs := must(cl.ListLoadBalancers(ctx(), "k")).of(t); len(lbs) != 1 || lbs[0].Name != "web" {
		t.Fatalf("load balancers of k: %+v", lbs)
	}
	if lbs := must(cl.ListLoadBalancers(ctx(), "")).of(t); len(lbs) != 3 {
		t.Fatalf("all load balancers: %d, want 3", len(lbs))
	}

	upd := must(cl.UpdateLoadBalancerBackends(ctx(), "web", []api.Backend{backend("node-2", nodeB)})).of(t)
	if len(upd.Spec.Backends) != 1 || upd.Spec.Backends[0].NodeName != "node-2" || len(upd.Spec.Ports) != 2 {
		t.Fatalf("after updating backends: %+v", upd.Spec)
	}
	if _, err := cl.UpdateLoadBalancerBackends(ctx(), "missing", nil); !cloud.IsNotFound(err) {
		t.Fatalf("updating a missing load balancer: %v, want NotFound", err)
	}

	if err := cl.DeleteLoadBalancer(ctx(), "web"); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteLoadBalancer(ctx(), "web"); !cloud.IsNotFound(err) {
		t.Fatalf("deleting twice: %v, want NotFound", err)
	}
	if _, err := cl.GetLoadBalancer(ctx(), "web"); !cloud.IsNotFound(err) {
		t.Fatalf("get after delete: %v", err)
	}
	// The freed VIP is handed out again.
	reused := must(cl.EnsureLoadBalancer(ctx(), "web2", api.LoadBalancerSpec{Ports: []api.Port{tcpPort(1, 30006)}})).of(t)
	if reused.Status.VIP != web.Status.VIP {
		t.Fatalf("new load balancer got %s, want the freed %s", reused.Status.VIP, web.Status.VIP)
	}
}

func TestLoadBalancerForwardsTraffic(t *testing.T) {
	c := startCloud(t)
	cl := c.client
	vip := c.firstVIP()
	nodePort := testnet.FreePort(t, "tcp", nodeA, nodeB)
	udpNodePort := testnet.FreePort(t, "udp", nodeA, nodeB)
	for tag, addr := range map[string]netip.Addr{"a": nodeA, "b": nodeB} {
		testnet.TCPEcho(t, netip.AddrPortFrom(addr, nodePort), tag)
		testnet.UDPEcho(t, netip.AddrPortFrom(addr, udpNodePort), tag)
	}
	port := testnet.FreePort(t, "tcp", vip)
	uport := testnet.FreePort(t, "udp", vip)
	lb := must(cl.EnsureLoadBalancer(ctx(), "web", api.LoadBalancerSpec{
		Ports:    []api.Port{tcpPort(port, nodePort), udpPort(uport, udpNodePort)},
		Backends: []api.Backend{backend("node-a", nodeA), backend("node-b", nodeB)},
	})).of(t)
	if lb.Status.VIP != vip.String() {
		t.Fatalf("VIP %s, want %s", lb.Status.VIP, vip)
	}
	tcpAddr, udpAddr := netip.AddrPortFrom(vip, port), netip.AddrPortFrom(vip, uport)

	poll.Eventually(t, "both backends healthy", func() error {
		if a, b := healthOf(t, c, "web", "node-a"), healthOf(t, c, "web", "node-b"); a != api.HealthHealthy || b != api.HealthHealthy {
			return fmt.Errorf("node-a %s, node-b %s", a, b)
		}
		return nil
	})
	seen := map[string]int{}
	for range 4 {
		answer, err := testnet.AskTCP(tcpAddr, netip.Addr{}, "hello")
		if err != nil {
			t.Fatalf("TCP through the VIP: %v", err)
		}
		seen[testnet.Tag(answer)]++
	}
	if seen["a"] != 2 || seen["b"] != 2 {
		t.Errorf("TCP answers %v, want 2 from each backend", seen)
	}
	u1 := testnet.NewUDPClient(t, nodeA, udpAddr)
	u2 := testnet.NewUDPClient(t, nodeA, udpAddr)
	a1, a2 := u1.AskUntil(t, "ping"), u2.AskUntil(t, "ping")
	if testnet.Tag(a1) == testnet.Tag(a2) || a1[2:] != "ping" {
		t.Errorf("UDP answers %q and %q, want one from each backend", a1, a2)
	}

	t.Run("update backends", func(t *testing.T) {
		must(cl.UpdateLoadBalancerBackends(ctx(), "web", []api.Backend{backend("node-b", nodeB)})).of(t)
		for range 3 {
			if answer, err := testnet.AskTCP(tcpAddr, netip.Addr{}, "x"); err != nil || testnet.Tag(answer) != "b" {
				t.Fatalf("after removing node-a: %q, %v", answer, err)
			}
		}
		// The UDP client that was on node-a moves to node-b.
		for _, u := range []testnet.UDPClient{u1, u2} {
			poll.Eventually(t, "UDP answers from node-b only", func() error {
				a, err := u.Ask("y", 500*time.Millisecond)
				if err == nil && testnet.Tag(a) != "b" {
					err = fmt.Errorf("answered %q", a)
				}
				return err
			})
		}
	})

	t.Run("unhealthy backend skipped", func(t *testing.T) {
		must(cl.UpdateLoadBalancerBackends(ctx(), "web", []api.Backend{backend("node-a", nodeA), backend("node-dead", dead)})).of(t)
		poll.Eventually(t, "node-dead reported unhealthy", func() error {
			if h := healthOf(t, c, "web", "node-dead"); h != api.HealthUnhealthy {
				return fmt.Errorf("node-dead is %s", h)
			}
			return nil
		})
		for i := range 6 {
			if answer, err := testnet.AskTCP(tcpAddr, netip.Addr{}, "x"); err != nil || testnet.Tag(answer) != "a" {
				t.Fatalf("request %d: %q, %v; want node-a", i, answer, err)
			}
		}
		_, _, body := c.raw("GET", "/metrics", "", nil)
		if contains(body, `localcloud_lb_rejected_total{loadbalancer="web",protocol="TCP",reason="no_backend"}`) {
			t.Errorf("connections were refused for want of a backend")
		}
	})

	t.Run("source ranges", func(t *testing.T) {
		lb.Spec.Backends = []api.Backend{backend("node-a", nodeA)}
		lb.Spec.SourceRanges = []string{netip.PrefixFrom(nodeA, 32).String()}
		must(cl.EnsureLoadBalancer(ctx(), "web", lb.Spec)).of(t)
		if answer, err := testnet.AskTCP(tcpAddr, nodeA, "in"); err != nil || answer != "a in" {
			t.Fatalf("client inside the ranges: %q, %v", answer, err)
		}
		if answer, err := testnet.AskTCP(tcpAddr, other, "out"); err == nil {
			t.Fatalf("TCP client from %s outside the ranges got %q", other, answer)
		}
		out := testnet.NewUDPClient(t, other, udpAddr)
		if answer, err := out.Ask("out", 300*time.Millisecond); err == nil || !testnet.IsTimeout(err) {
			t.Fatalf("UDP client from %s outside the ranges: %q, %v; want no answer", other, answer, err)
		}
		poll.Eventually(t, "refusals counted", func() error {
			return metricsShow(c, `localcloud_lb_rejected_total{loadbalancer="web",protocol="TCP",reason="source_range"} 1`,
				`localcloud_lb_rejected_total{loadbalancer="web",protocol="UDP",reason="source_range"}`)
		})
	})

	t.Run("delete closes the listeners", func(t *testing.T) {
		if err := cl.DeleteLoadBalancer(ctx(), "web"); err != nil {
			t.Fatal(err)
		}
		if testnet.Listening(tcpAddr) {
			t.Fatal("VIP still listening after delete")
		}
	})
}

func TestLoadBalancerPortConflict(t *testing.T) {
	c := startCloud(t)
	cl := c.client
	vip := c.firstVIP()
	nodePort := testnet.FreePort(t, "tcp", nodeA)
	testnet.TCPEcho(t, netip.AddrPortFrom(nodeA, nodePort), "a")
	free := testnet.FreePort(t, "tcp", vip)
	taken := testnet.FreePort(t, "tcp", vip)
	for taken == free {
		taken = testnet.FreePort(t, "tcp", vip)
	}
	squatter, err := net.Listen("tcp", netip.AddrPortFrom(vip, taken).String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = squatter.Close() }()
	conflicting := api.LoadBalancerSpec{
		Ports:    []api.Port{tcpPort(free, nodePort), tcpPort(taken, nodePort)},
		Backends: []api.Backend{backend("node-a", nodeA)},
	}

	// Asked for that VIP by name, the cloud cannot move it: 409, nothing half-applied.
	requested := conflicting
	requested.RequestedIP = vip.String()
	_, err = cl.EnsureLoadBalancer(ctx(), "web", requested)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != http.StatusConflict || ce.Reason != api.ReasonConflict || cloud.IsNotFound(err) {
		t.Fatalf("ensure with a taken port on the requested VIP: %v, want 409 Conflict", err)
	}
	if !contains([]byte(ce.Message), netip.AddrPortFrom(vip, taken).String()) {
		t.Errorf("409 message %q does not name %s", ce.Message, netip.AddrPortFrom(vip, taken))
	}
	if _, err := cl.GetLoadBalancer(ctx(), "web"); !cloud.IsNotFound(err) {
		t.Fatalf("load balancer stored despite the conflict: %v", err)
	}
	if testnet.Listening(netip.AddrPortFrom(vip, free)) {
		t.Fatal("the free port's listener stayed open")
	}

	// Without a requested VIP, an address another program uses is skipped: the load
	// balancer lands on the next one and serves there.
	moved := must(cl.EnsureLoadBalancer(ctx(), "elsewhere", conflicting)).of(t)
	if moved.Status.VIP == vip.String() {
		t.Fatalf("new load balancer got VIP %s, whose port %d another program holds", vip, taken)
	}
	movedVIP := netip.MustParseAddr(moved.Status.VIP)
	if answer, err := testnet.AskTCP(netip.AddrPortFrom(movedVIP, taken), netip.Addr{}, "hi"); err != nil || answer != "a hi" {
		t.Fatalf("load balancer on the next VIP: %q, %v", answer, err)
	}
	if err := cl.DeleteLoadBalancer(ctx(), "elsewhere"); err != nil {
		t.Fatal(err)
	}

	// An existing load balancer asked to add the taken port keeps its old state.
	orig := must(cl.EnsureLoadBalancer(ctx(), "web", api.LoadBalancerSpec{
		Ports: []api.Port{tcpPort(free, nodePort)}, Backends: []api.Backend{backend("node-a", nodeA)},
	})).of(t)
	if orig.Status.VIP != vip.String() {
		t.Fatalf("VIP %s, want %s: the failed ensure leaked its VIP", orig.Status.VIP, vip)
	}
	if _, err := cl.EnsureLoadBalancer(ctx(), "web", conflicting); statusOf(err) != http.StatusConflict {
		t.Fatalf("update with a taken port: %v, want 409", err)
	}
	got := must(cl.GetLoadBalancer(ctx(), "web")).of(t)
	if len(got.Spec.Ports) != 1 || !got.UpdatedAt.Equal(orig.UpdatedAt) {
		t.Fatalf("failed update changed the stored load balancer: %+v", got.Spec.Ports)
	}
	if answer, err := testnet.AskTCP(netip.AddrPortFrom(vip, free), netip.Addr{}, "still"); err != nil || answer != "a still" {
		t.Fatalf("old listener after the failed update: %q, %v", answer, err)
	}
}

// TestLoadBalancerPoolTakenByOthers checks that when other programs hold the port on
// every free address of the pool, the 409 says so instead of calling the pool full.
func TestLoadBalancerPoolTakenByOthers(t *testing.T) {
	pool := netip.PrefixFrom(testnet.LoopbackPrefix(102).Addr(), 30) // two usable addresses: .1 and .2
	c := startCloud(t, func(cfg *server.Config) { cfg.VIPPool = pool })
	first := pool.Addr().Next()
	addrs := []netip.Addr{first, first.Next()}
	port := testnet.FreePort(t, "tcp", addrs...)
	for _, a := range addrs {
		squatter, err := net.Listen("tcp", netip.AddrPortFrom(a, port).String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = squatter.Close() })
	}
	_, err := c.client.EnsureLoadBalancer(ctx(), "web", api.LoadBalancerSpec{
		Ports:    []api.Port{tcpPort(port, 30080)},
		Backends: []api.Backend{backend("node-a", nodeA)},
	})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != http.StatusConflict {
		t.Fatalf("ensure on a pool whose ports others hold: %v, want 409", err)
	}
	if !strings.Contains(ce.Message, "2 addresses skipped because other programs hold their ports") {
		t.Errorf("409 message %q does not say other programs hold the pool's ports", ce.Message)
	}
	if _, err := c.client.GetLoadBalancer(ctx(), "web"); !cloud.IsNotFound(err) {
		t.Errorf("load balancer stored despite the conflict: %v", err)
	}
}

func TestRestartKeepsEverything(t *testing.T) {
	c := startCloud(t)
	cl := c.client
	vip := c.firstVIP()
	nodePort := testnet.FreePort(t, "tcp", nodeA)
	udpNodePort := testnet.FreePort(t, "udp", nodeA)
	testnet.TCPEcho(t, netip.AddrPortFrom(nodeA, nodePort), "a")
	testnet.UDPEcho(t, netip.AddrPortFrom(nodeA, udpNodePort), "a")
	port, uport := testnet.FreePort(t, "tcp", vip), testnet.FreePort(t, "udp", vip)

	inst := must(cl.CreateInstance(ctx(), api.InstanceSpec{Name: "node-a", Addresses: []api.Address{{Type: api.AddressInternalIP, Address: nodeA.String()}}})).of(t)
	must(cl.TerminateInstance(ctx(), must(cl.CreateInstance(ctx(), api.InstanceSpec{Name: "node-b"})).of(t).ID)).of(t)
	lb := must(cl.EnsureLoadBalancer(ctx(), "web", api.LoadBalancerSpec{
		ClusterName:  "k",
		Ports:        []api.Port{tcpPort(port, nodePort), udpPort(uport, udpNodePort)},
		Backends:     []api.Backend{backend("node-a", nodeA)},
		SourceRanges: []string{"127.0.0.0/30", netip.PrefixFrom(nodeA, 32).String()},
	})).of(t)
	route := must(cl.CreateRoute(ctx(), "k", api.RouteSpec{DestinationCIDR: "10.244.0.0/24", TargetNode: "node-a"})).of(t)
	tcpAddr, udpAddr := netip.AddrPortFrom(vip, port), netip.AddrPortFrom(vip, uport)
	if answer, err := testnet.AskTCP(tcpAddr, netip.Addr{}, "before"); err != nil || answer != "a before" {
		t.Fatalf("before the restart: %q, %v", answer, err)
	}
	instancesBefore := must(cl.ListAllInstances(ctx(), 0)).of(t)

	c.stop()
	if testnet.Listening(tcpAddr) {
		t.Fatal("VIP still listening while the cloud is down")
	}
	c.start()
	cl = c.client

	instancesAfter := must(cl.ListAllInstances(ctx(), 0)).of(t)
	if len(instancesAfter) != 2 || instancesAfter[0].ID != inst.ID || instancesAfter[1].State != api.InstanceTerminated ||
		!instancesAfter[0].CreatedAt.Equal(instancesBefore[0].CreatedAt) {
		t.Fatalf("instances after the restart: %+v", instancesAfter)
	}
	got := must(cl.GetLoadBalancer(ctx(), "web")).of(t)
	if got.Status.VIP != lb.Status.VIP || len(got.Spec.Ports) != 2 || len(got.Spec.SourceRanges) != 2 || got.Status.Error != "" {
		t.Fatalf("load balancer after the restart: %+v", got)
	}
	routes := must(cl.ListRoutes(ctx(), "k")).of(t)
	if len(routes) != 1 || !reflect.DeepEqual(routes[0], *route) {
		t.Fatalf("routes after the restart: %+v, want %+v", routes, route)
	}
	if answer, err := testnet.AskTCP(tcpAddr, netip.Addr{}, "after"); err != nil || answer != "a after" {
		t.Fatalf("TCP after the restart: %q, %v", answer, err)
	}
	if answer := testnet.NewUDPClient(t, nodeA, udpAddr).AskUntil(t, "after"); answer != "a after" {
		t.Fatalf("UDP after the restart: %q", answer)
	}
	if answer, err := testnet.AskTCP(tcpAddr, netip.MustParseAddr("127.0.0.5"), "x"); err == nil {
		t.Fatalf("source ranges not enforced after the restart: %q", answer)
	}
	// New objects continue where the old ones stopped.
	if next := must(cl.CreateInstance(ctx(), api.InstanceSpec{Name: "node-c"})).of(t); next.ID != "i-000000000003" {
		t.Fatalf("instance created after the restart got ID %s", next.ID)
	}
	if second := must(cl.EnsureLoadBalancer(ctx(), "db", api.LoadBalancerSpec{Ports: []api.Port{tcpPort(1, 30001)}})).of(t); second.Status.VIP == lb.Status.VIP {
		t.Fatal("a new load balancer got the VIP held by one from before the restart")
	}
}

func TestRestartWithTakenPortReportsError(t *testing.T) {
	c := startCloud(t)
	vip := c.firstVIP()
	port := testnet.FreePort(t, "tcp", vip)
	must(c.client.EnsureLoadBalancer(ctx(), "web", api.LoadBalancerSpec{Ports: []api.Port{tcpPort(port, 30001)}})).of(t)
	c.stop()
	squatter, err := net.Listen("tcp", netip.AddrPortFrom(vip, port).String())
	if err != nil {
		t.Fatal(err)
	}
	c.start()
	got := must(c.client.GetLoadBalancer(ctx(), "web")).of(t)
	if got.Status.Error == "" {
		t.Fatal("a load balancer whose port was taken during the downtime reports no error")
	}
	if _, err := c.client.EnsureLoadBalancer(ctx(), "web", got.Spec); statusOf(err) != http.StatusConflict {
		t.Fatalf("ensure while the port is still taken: %v, want 409", err)
	}
	_ = squatter.Close()
	fixed := must(c.client.EnsureLoadBalancer(ctx(), "web", got.Spec)).of(t)
	if fixed.Status.Error != "" || !testnet.Listening(netip.AddrPortFrom(vip, port)) {
		t.Fatalf("ensure after the port was freed: error %q", fixed.Status.Error)
	}
}

// TestConcurrentLoadBalancerChanges makes changes to many load balancers at once, as
// the controllers' workers do: creations get distinct VIPs and serve, and of two
// creations asking for the same VIP exactly one gets it.
func TestConcurrentLoadBalancerChanges(t *testing.T) {
	c := startCloud(t)
	const n = 24
	type answer struct {
		lb  *api.LoadBalancer
		err error
	}
	answers := make(chan answer, n)
	for i := range n {
		go func() {
			lb, err := c.client.EnsureLoadBalancer(ctx(), fmt.Sprintf("lb-%d", i), api.LoadBalancerSpec{
				Ports: []api.Port{tcpPort(80, 30080)}, Backends: []api.Backend{backend("node-1", nodeA)},
			})
			answers <- answer{lb, err}
		}()
	}
	vips := map[string]string{}
	for range n {
		a := <-answers
		if a.err != nil {
			t.Fatalf("concurrent ensure: %v", a.err)
		}
		if other, taken := vips[a.lb.Status.VIP]; taken {
			t.Errorf("load balancers %s and %s both got VIP %s", other, a.lb.Name, a.lb.Status.VIP)
		}
		vips[a.lb.Status.VIP] = a.lb.Name
	}
	for vip := range vips {
		// The backend does not listen, so the load balancer may reset the connection
		// at once; only a refusal means nothing listens on the VIP.
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(vip, "80"), 5*time.Second)
		if errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("load balancer on %s does not listen: %v", vip, err)
		}
		if err == nil {
			_ = conn.Close()
		}
	}

	// Two new load balancers ask for one free VIP at once.
	want := c.cfg.VIPPool.Addr().Next()
	for range n {
		want = want.Next()
	}
	for i := range 2 {
		go func() {
			lb, err := c.client.EnsureLoadBalancer(ctx(), fmt.Sprintf("wants-%d", i), api.LoadBalancerSpec{
				Ports: []api.Port{tcpPort(80, 30080)}, Backends: []api.Backend{backend("node-1", nodeA)}, RequestedIP: want.String(),
			})
			answers <- answer{lb, err}
		}()
	}
	won, lost := 0, 0
	for range 2 {
		a := <-answers
		switch {
		case a.err == nil && a.lb.Status.VIP == want.String():
			won++
		case statusOf(a.err) == http.StatusConflict:
			lost++
		default:
			t.Errorf("ensure asking for %s: %+v, %v; want the VIP or a conflict", want, a.lb, a.err)
		}
	}
	if won != 1 || lost != 1 {
		t.Errorf("%d got the requested VIP and %d a conflict, want one each", won, lost)
	}
}

func TestMinimalAnswersToLoadBalancerWrites(t *testing.T) {
	c := startCloud(t)
	minimal, err := client.New(c.srv.URL(), token, client.WithMinimalAnswers())
	if err != nil {
		t.Fatal(err)
	}
	spec := api.LoadBalancerSpec{Ports: []api.Port{tcpPort(80, 30080)}, Backends: []api.Backend{backend("node-1", nodeA), backend("node-2", nodeB)}}
	tests := []struct {
		name  string
		write func(*client.Client) (*api.LoadBalancer, error)
	}{
		{"ensure", func(cl *client.Client) (*api.LoadBalancer, error) { return cl.EnsureLoadBalancer(ctx(), "web", spec) }},
		{"update backends", func(cl *client.Client) (*api.LoadBalancer, error) {
			return cl.UpdateLoadBalancerBackends(ctx(), "web", spec.Backends[:1])
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lb := must(tt.write(minimal)).of(t)
			if lb.Status.VIP == "" || len(lb.Spec.Ports) != 1 || lb.Spec.Backends != nil || lb.Status.Backends != nil {
				t.Errorf("minimal answer %+v: want the VIP and ports without backends", lb)
			}
			full := must(tt.write(c.client)).of(t)
			if full.Status.VIP != lb.Status.VIP || len(full.Spec.Backends) == 0 || len(full.Status.Backends) != len(full.Spec.Backends) {
				t.Errorf("full answer %+v: want the VIP, backends and their health", full)
			}
		})
	}
	// The stored load balancer keeps its backends whatever the answer left out.
	if got := must(c.client.GetLoadBalancer(ctx(), "web")).of(t); len(got.Spec.Backends) != 1 {
		t.Errorf("stored backends %v, want the one of the last update", got.Spec.Backends)
	}
}

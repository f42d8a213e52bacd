package hosts_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/localcloud/hosts"
)

// withVIPs gives the test net a VIP pool, 10.253.<n>.0/24.
func (tn testNet) withVIPs(n int) testNet {
	tn.cfg.VIPPool = netip.MustParsePrefix(fmt.Sprintf("10.253.%d.0/24", n))
	tn.markers = append(tn.markers, fmt.Sprintf("10.253.%d.", n))
	return tn
}

// vip returns the i-th address of the test's VIP pool.
func (tn testNet) vip(i int) netip.Addr {
	a := tn.cfg.VIPPool.Addr()
	for range i {
		a = a.Next()
	}
	return a
}

// vipHost is a host standing in for a node with kube-proxy serving vips.
func vipHost(tn testNet, i int, id, name string, vips ...netip.Addr) hosts.HostSpec {
	boot, env := hoststest.Serving(vips...)
	return hosts.HostSpec{ID: id, Name: name, Address: tn.addr(i), BootCommand: boot, Env: env}
}

// refused checks that a TCP connection to addr is refused at once, and a UDP datagram
// is sent and answered with port unreachable.
func refused(t *testing.T, addr netip.AddrPort) {
	t.Helper()
	start := time.Now()
	_, _, err := hoststest.Ask(addr)
	if !errors.Is(err, syscall.ECONNREFUSED) || time.Since(start) > time.Second {
		t.Errorf("TCP %s: %v after %s, want connection refused at once", addr, err, time.Since(start))
	}
	_, _, err = hoststest.AskUDP(addr)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("UDP %s: %v, want connection refused (ICMP port unreachable), the datagram sent", addr, err)
	}
}

// TestLoadBalancersRouteToHosts runs two hosts that answer on a VIP and routes the
// machine's connections to them: spread over the targets, only to targets, with the
// machine's source address outside the instance range, pinned to one host with
// affinity, by UDP too; refused where nothing listens, outside the source ranges and
// once the load balancer is gone (an open connection is reset); a host without a rule
// for a VIP is refused by the machine instead of looping. The machine is as before at
// the end.
func TestLoadBalancersRouteToHosts(t *testing.T) {
	tn := newTestNet(t, 10).withVIPs(10)
	before := hoststest.Snapshot(t, tn.markers...)
	forward := hoststest.Sysctl(t, "net/ipv4/ip_forward")
	ctx := context.Background()
	func() {
		m := tn.open(t)
		defer closeMachine(t, m)
		vip := tn.vip(1)
		src := m.VIPSource()
		if src != tn.vip(254) || tn.cfg.Range.Contains(src) {
			t.Fatalf("VIPSource %s, want %s, outside %s", src, tn.vip(254), tn.cfg.Range)
		}
		a, b := vipHost(tn, 2, "i-00000000000a", "a", vip), vipHost(tn, 3, "i-00000000000b", "b", vip)
		for _, s := range []hosts.HostSpec{a, b} {
			if err := m.Start(ctx, s); err != nil {
				t.Fatal(err)
			}
			waitLog(t, m, s.ID, "hoststest server serving")
		}
		// Before any load balancer, the pool refuses.
		refused(t, netip.AddrPortFrom(vip, 80))

		web := hosts.LoadBalancer{Name: "web", VIP: vip,
			Ports:    []hosts.LoadBalancerPort{{Protocol: hosts.ProtocolTCP, Port: 80}, {Protocol: hosts.ProtocolUDP, Port: 80}},
			Backends: []netip.Addr{a.Address, b.Address}, Targets: []netip.Addr{a.Address, b.Address}}
		set := func(lbs ...hosts.LoadBalancer) {
			t.Helper()
			if err := m.SetLoadBalancers(ctx, lbs); err != nil {
				t.Fatal(err)
			}
		}
		set(web)
		at80 := netip.AddrPortFrom(vip, 80)
		if got := hoststest.Answers(t, at80, 40, src); got["a"] == 0 || got["b"] == 0 {
			t.Errorf("40 connections went to %v, want both hosts", got)
		}
		udpHosts := map[string]bool{}
		for range 20 {
			host, client, err := hoststest.AskUDP(at80)
			if err != nil || client != src.String() {
				t.Fatalf("UDP through the VIP: %s saw %s, %v; want the client %s", host, client, err, src)
			}
			udpHosts[host] = true
		}
		if len(udpHosts) != 2 {
			t.Errorf("20 UDP flows went to %v, want both hosts", udpHosts)
		}

		// An open connection stays on its host while the host is a backend.
		held, err := net.DialTimeout("tcp", at80.String(), 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = held.Close() }()
		rd := bufio.NewReader(held)
		first, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		heldOn, _, _ := strings.Cut(first, " ")
		echo := func() error {
			_ = held.SetDeadline(time.Now().Add(3 * time.Second))
			if _, err := held.Write([]byte("ping\n")); err != nil {
				return err
			}
			line, err := rd.ReadString('\n')
			if err == nil && line != "ping\n" {
				return fmt.Errorf("echoed %q", line)
			}
			return err
		}

		// Only targets get new connections; a backend that is no target keeps its own.
		only := web
		only.Targets = []netip.Addr{a.Address}
		set(only)
		if got := hoststest.Answers(t, at80, 20, src); got["a"] != 20 {
			t.Errorf("with target a alone, connections went to %v", got)
		}
		if err := echo(); err != nil {
			t.Errorf("the connection held on %s broke when it stopped being a target: %v", heldOn, err)
		}

		// Affinity: one host for every new connection of a client.
		sticky := web
		sticky.AffinityTimeout = time.Hour
		set(sticky)
		if got := hoststest.Answers(t, at80, 20, src); len(got) != 1 {
			t.Errorf("with affinity, connections went to %v, want one host", got)
		}

		// Where nothing listens: another port, another VIP; outside the source ranges.
		refused(t, netip.AddrPortFrom(vip, 81))
		refused(t, netip.AddrPortFrom(tn.vip(7), 80))
		ranged := web
		ranged.SourceRanges = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
		set(ranged)
		refused(t, at80)
		ranged.SourceRanges = append(ranged.SourceRanges, netip.PrefixFrom(src, 32))
		set(ranged)
		hoststest.Answers(t, at80, 5, src)

		// A host without a rule for a VIP sends it to the machine, which refuses it.
		stA, _ := m.Status(a.ID)
		start := time.Now()
		_, err = dial(stA.NetNS, netip.AddrPortFrom(tn.vip(9), 80), 5*time.Second)
		if !errors.Is(err, syscall.ECONNREFUSED) || time.Since(start) > time.Second {
			t.Errorf("a host connecting to a VIP it has no rule for: %v after %s, want refused at once", err, time.Since(start))
		}

		// Gone: refused, and the connection held open is reset.
		set()
		refused(t, at80)
		if err := echo(); err == nil {
			t.Errorf("the connection held on %s still works after its load balancer was deleted", heldOn)
		} else {
			t.Logf("the held connection after the load balancer went: %v", err)
		}
	}()
	tn.checkClean(t, before, forward)
}

// TestLoadBalancersOutliveACrash leaves a machine with a load balancer as a killed cloud
// would (Release): it keeps serving; the next Open takes it back, still serving before
// any SetLoadBalancers; Cleanup of a released machine leaves the machine as before.
func TestLoadBalancersOutliveACrash(t *testing.T) {
	tn := newTestNet(t, 25).withVIPs(25)
	before := hoststest.Snapshot(t, tn.markers...)
	forward := hoststest.Sysctl(t, "net/ipv4/ip_forward")
	ctx := context.Background()
	vip := tn.vip(1)
	at80 := netip.AddrPortFrom(vip, 80)
	a := vipHost(tn, 2, "i-00000000000a", "a", vip)
	web := hosts.LoadBalancer{Name: "web", VIP: vip, Ports: []hosts.LoadBalancerPort{{Protocol: hosts.ProtocolTCP, Port: 80}},
		Backends: []netip.Addr{a.Address}, Targets: []netip.Addr{a.Address}}

	m1, err := hosts.Open(ctx, tn.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m1.Start(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitLog(t, m1, a.ID, "hoststest server serving")
	if err := m1.SetLoadBalancers(ctx, []hosts.LoadBalancer{web}); err != nil {
		t.Fatal(err)
	}
	hoststest.Answers(t, at80, 3, m1.VIPSource())
	if err := m1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Should the test stop before its own Cleanup.
	t.Cleanup(func() { _ = hosts.Cleanup(ctx, tn.cfg.Dir, testlog.New(t, 0)) })
	hoststest.Answers(t, at80, 3, m1.VIPSource())

	m2, err := hosts.Open(ctx, tn.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Reconcile(ctx, []hosts.Desired{{Spec: a, Running: true}}); err != nil {
		t.Fatal(err)
	}
	hoststest.Answers(t, at80, 3, m2.VIPSource())
	if err := m2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := hosts.Cleanup(ctx, tn.cfg.Dir, testlog.New(t, 0)); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "the machine as before", func() error {
		if after := hoststest.Snapshot(t, tn.markers...); after != before {
			return fmt.Errorf("the machine changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		return nil
	})
	tn.checkClean(t, before, forward)
}

// BenchmarkVIPConnect measures connection setup from the machine to a host: through a
// load balancer's VIP (the kernel's route to the node: mangle rules, a mark, a policy
// route) and, for comparison, straight to the host's address. Each iteration connects,
// reads the host's first line and closes.
//
//	go test -run XXX -bench VIPConnect ./localcloud/hosts/
func BenchmarkVIPConnect(b *testing.B) {
	tn := newTestNet(b, 12).withVIPs(12)
	m := tn.open(b)
	vip := tn.vip(1)
	a := vipHost(tn, 2, "i-00000000000a", "a", vip)
	if err := m.Start(context.Background(), a); err != nil {
		b.Fatal(err)
	}
	waitLog(b, m, a.ID, "hoststest server serving")
	web := hosts.LoadBalancer{Name: "web", VIP: vip, Ports: []hosts.LoadBalancerPort{{Protocol: hosts.ProtocolTCP, Port: 80}},
		Backends: []netip.Addr{a.Address}, Targets: []netip.Addr{a.Address}}
	if err := m.SetLoadBalancers(context.Background(), []hosts.LoadBalancer{web}); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		to   netip.AddrPort
	}{{"through the VIP", netip.AddrPortFrom(vip, 80)}, {"straight to the host", netip.AddrPortFrom(a.Address, 80)}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := hoststest.Ask(c.to); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

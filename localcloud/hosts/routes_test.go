package hosts_test

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/localcloud/hosts"
)

// TestRoutesRoute serves on an address of a guarded range inside host b and connects to
// it from host a and from the machine: it is reachable only while a route sends that range
// to b, and a host booted later gets the route too.
func TestRoutesRoute(t *testing.T) {
	tn := newTestNet(t, 4)
	before := hoststest.Snapshot(t, tn.markers...)
	forward := hoststest.Sysctl(t, "net/ipv4/ip_forward")
	ctx := context.Background()
	func() {
		m := tn.open(t)
		defer closeMachine(t, m)
		podCIDR := netip.PrefixFrom(tn.guard(0), 28)
		server := netip.AddrPortFrom(tn.guard(1), 8080)
		a := sleeper(tn, 2, "i-00000000000a", "a")
		b := hosts.HostSpec{
			ID: "i-00000000000b", Name: "b", Address: tn.addr(3),
			BootCommand: []string{"sh", "-c", `ip addr add "$SERVE/32" dev lo && exec "$0" -test.run=none`, os.Args[0]},
			Env:         map[string]string{helperEnv: "listen", "SERVE": server.Addr().String(), "HELPER_ADDR": server.String()},
		}
		for _, s := range []hosts.HostSpec{a, b} {
			if err := m.Start(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		waitLog(t, m, b.ID, "helper listening on "+server.String())
		stA, _ := m.Status(a.ID)

		reachable := func(from string) bool {
			t.Helper()
			got, err := dial(from, server, 5*time.Second)
			if err == nil && got != "hello from b" {
				t.Fatalf("the server answered %q", got)
			}
			if err != nil {
				t.Logf("from %s: %v", from, err)
			}
			return err == nil
		}
		if reachable(stA.NetNS) {
			t.Fatal("host a reaches b's server before any route exists")
		}
		if reachable(hoststest.MachineNetNS()) {
			t.Fatal("the machine reaches b's server before any route exists")
		}

		route := hosts.Route{Destination: podCIDR, Via: b.Address}
		if err := m.SetRoutes(ctx, []hosts.Route{route}); err != nil {
			t.Fatalf("setting the route: %v", err)
		}
		if !reachable(stA.NetNS) {
			t.Error("host a does not reach b's server through the route")
		}
		if !reachable(hoststest.MachineNetNS()) {
			t.Error("the machine does not reach b's server through the route")
		}
		t.Logf("net.ipv4.ip_forward is %s on this machine: host to host and machine to host traffic does not need it", forward)

		// A host booted now gets the route.
		c := sleeper(tn, 4, "i-00000000000c", "c")
		if err := m.Start(ctx, c); err != nil {
			t.Fatal(err)
		}
		stC, _ := m.Status(c.ID)
		if !reachable(stC.NetNS) {
			t.Error("host c, booted after the route, does not reach b's server")
		}

		// A route deleted behind the cloud's back comes back with the next SetRoutes.
		ns := strings.TrimPrefix(stA.NetNS, "/run/netns/")
		if out, err := exec.Command("ip", "-n", ns, "route", "del", podCIDR.String()).CombinedOutput(); err != nil {
			t.Fatalf("deleting the route in host a: %v: %s", err, out)
		}
		if err := m.SetRoutes(ctx, []hosts.Route{route}); err != nil {
			t.Fatal(err)
		}
		if !reachable(stA.NetNS) {
			t.Error("SetRoutes did not repair host a's table")
		}

		if err := m.SetRoutes(ctx, nil); err != nil {
			t.Fatalf("removing the route: %v", err)
		}
		for _, from := range []string{stA.NetNS, stC.NetNS, hoststest.MachineNetNS()} {
			if reachable(from) {
				t.Errorf("%s still reaches b's server after the route was removed", from)
			}
		}
		if out, _ := exec.Command("ip", "-n", ns, "route").Output(); strings.Contains(string(out), podCIDR.String()) {
			t.Errorf("host a's table still holds the route:\n%s", out)
		}

		// Destinations outside the guards, and targets outside the range, are refused.
		for _, r := range []hosts.Route{
			{Destination: netip.MustParsePrefix("198.51.100.0/24"), Via: b.Address},
			{Destination: netip.MustParsePrefix("0.0.0.0/0"), Via: b.Address},
			{Destination: podCIDR, Via: netip.MustParseAddr("198.51.100.1")},
			{Destination: podCIDR, Via: m.Gateway()},
		} {
			if err := m.SetRoutes(ctx, []hosts.Route{r}); err == nil {
				t.Errorf("SetRoutes accepted %s via %s", r.Destination, r.Via)
			}
		}
	}()
	tn.checkClean(t, before, forward)
}

// TestPeersRouteBetweenClouds opens two machines, peers of each other (two local clouds
// of one hybrid cluster) that share a guard CIDR (the pod range), and checks that a host
// of one reaches a host of the other, directly and through the other's route into the
// shared guard; that without the route the guarded address is refused; that each guards
// the other's range, so once one is gone what its hosts were sent is refused on the
// machine; and that closing both leaves the machine as it was. A peer that is no bridge,
// and a peer guarding the shared range at the same metric, are refused.
func TestPeersRouteBetweenClouds(t *testing.T) {
	ta, tb := newTestNet(t, 26), newTestNet(t, 27)
	tb.cfg.Guards = ta.cfg.Guards
	tb.cfg.GuardMetric = hosts.DefaultGuardMetric + 1
	ta.cfg.Peers = []hosts.Peer{{Bridge: tb.cfg.Bridge, Range: tb.cfg.Range}}
	tb.cfg.Peers = []hosts.Peer{{Bridge: ta.cfg.Bridge, Range: ta.cfg.Range}}
	markers := append(ta.markers, tb.markers...)
	before := hoststest.Snapshot(t, markers...)
	forward := hoststest.Sysctl(t, "net/ipv4/ip_forward")
	ctx := context.Background()
	func() {
		ma := ta.open(t)
		defer closeMachine(t, ma)
		same := tb.cfg
		same.GuardMetric = 0
		if m, err := hosts.Open(ctx, same); err == nil {
			closeMachine(t, m)
			t.Fatal("a peer guarding the shared range at the same metric was opened")
		} else if !strings.Contains(err.Error(), "give each peer a guard metric of its own") {
			t.Errorf("opening a peer of the same guard metric: %v", err)
		}
		notBridge := tb.cfg
		notBridge.Peers = []hosts.Peer{{Bridge: "lo", Range: ta.cfg.Range}}
		if m, err := hosts.Open(ctx, notBridge); err == nil {
			closeMachine(t, m)
			t.Fatal("a machine with peer lo was opened")
		} else if !strings.Contains(err.Error(), "peer lo is a network interface that is no bridge") {
			t.Errorf("opening with peer lo: %v", err)
		}
		mb := tb.open(t)
		defer closeMachine(t, mb)
		podCIDR := netip.PrefixFrom(ta.guard(16), 28)
		server := netip.AddrPortFrom(ta.guard(17), 8080)
		a := sleeper(ta, 2, "i-00000000000a", "a")
		b := hosts.HostSpec{
			ID: "i-00000000000b", Name: "b", Address: tb.addr(3),
			BootCommand: []string{"sh", "-c", `ip addr add "$SERVE/32" dev lo && exec "$0" -test.run=none`, os.Args[0]},
			Env:         map[string]string{helperEnv: "listen", "SERVE": server.Addr().String(), "HELPER_ADDR": "0.0.0.0:8080"},
		}
		if err := ma.Start(ctx, a); err != nil {
			t.Fatal(err)
		}
		if err := mb.Start(ctx, b); err != nil {
			t.Fatal(err)
		}
		waitLog(t, mb, b.ID, "helper listening on")
		stA, _ := ma.Status(a.ID)

		reach := func(dst netip.AddrPort) error {
			got, err := dial(stA.NetNS, dst, 5*time.Second)
			if err == nil && got != "hello from b" {
				t.Fatalf("the server answered %q", got)
			}
			return err
		}
		if err := reach(netip.AddrPortFrom(b.Address, 8080)); err != nil {
			t.Errorf("host a does not reach host b of the peer cloud at its address: %v", err)
		}
		start := time.Now()
		if err := reach(server); err == nil {
			t.Error("host a reaches b's pod address before any route to it exists")
		} else if took := time.Since(start); took > 3*time.Second {
			t.Errorf("an unrouted address of the shared guard failed only after %s: it should be refused at once", took)
		}
		if err := mb.SetRoutes(ctx, []hosts.Route{{Destination: podCIDR, Via: b.Address}}); err != nil {
			t.Fatalf("setting the peer's route: %v", err)
		}
		if err := reach(server); err != nil {
			t.Errorf("host a does not reach b's pod address through the peer cloud's route: %v", err)
		}
		// Each machine guards the other's range at its own metric.
		for _, c := range []struct {
			m    testNet
			peer netip.Prefix
		}{{ta, tb.cfg.Range}, {tb, ta.cfg.Range}} {
			out, err := exec.Command("ip", "route", "show", "type", "unreachable", c.peer.String()).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "metric "+strconv.Itoa(metricOf(c.m))) {
				t.Errorf("no guard of metric %d for the peer range %s: %q %v", metricOf(c.m), c.peer, out, err)
			}
		}
		// The second cloud gone, what a host sends its range is refused at once.
		closeMachine(t, mb)
		start = time.Now()
		if err := reach(netip.AddrPortFrom(b.Address, 8080)); err == nil {
			t.Error("host a reaches the gone peer's address")
		} else if took := time.Since(start); took > 3*time.Second {
			t.Errorf("the gone peer's address failed only after %s: it should be refused at once", took)
		}
	}()
	if after := hoststest.Snapshot(t, markers...); after != before {
		t.Errorf("the machine changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := hoststest.Sysctl(t, "net/ipv4/ip_forward"); got != forward {
		t.Errorf("net.ipv4.ip_forward is %s, was %s", got, forward)
	}
}

func metricOf(tn testNet) int {
	if tn.cfg.GuardMetric == 0 {
		return hosts.DefaultGuardMetric
	}
	return tn.cfg.GuardMetric
}

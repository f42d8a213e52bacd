package hosts_test

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
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

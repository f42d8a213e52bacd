package hosts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/localcloud/hosts"
)

// outside is an address outside every range of the test and of the machine's own
// network: TEST-NET-2 (RFC 5737), which no one answers. (TEST-NET-1 is this machine's
// uplink network in some sandboxes.)
var outside = netip.MustParseAddr("198.51.100.1")

// TestNothingLeavesTheMachine connects from inside a host to an address outside every
// range and to an unrouted address of a guard CIDR, and checks that each connection
// fails at once, on the machine, with no packet leaving through any interface (not even
// into the sink): first through the bridge's routing table (the bridge or the sink, where
// the forward chain rejects), then, with that table's rule removed, through the main
// table (the uplink for the outside address, where the forward chain rejects).
// net.ipv4.ip_forward is left as it was. It also
// checks that the machine's routing table sends each guarded range to the bridge or
// nowhere.
func TestNothingLeavesTheMachine(t *testing.T) {
	tn := newTestNet(t, 3)
	before := hoststest.Snapshot(t, tn.markers...)
	forward := hoststest.Sysctl(t, "net/ipv4/ip_forward")
	ctx := context.Background()
	comment := tn.cfg.Bridge + "-leak-counter"
	func() {
		m := tn.open(t)
		defer closeMachine(t, m)
		a := sleeper(tn, 2, "i-000000000001", "a")
		if err := m.Start(ctx, a); err != nil {
			t.Fatal(err)
		}
		running(t, m, a.ID)
		st, _ := m.Status(a.ID)

		// Count every packet to the targets that leaves through any interface.
		targets := []netip.Addr{outside, tn.guard(5)}
		for _, dst := range targets {
			iptables(t, "-t", "mangle", "-I", "POSTROUTING", "1", "-d", dst.String(), "-m", "comment", "--comment", comment)
			defer iptables(t, "-t", "mangle", "-D", "POSTROUTING", "-d", dst.String(), "-m", "comment", "--comment", comment)
		}
		try := func(phase string, targets ...netip.Addr) {
			t.Helper()
			for _, dst := range targets {
				start := time.Now()
				_, err := dial(st.NetNS, netip.AddrPortFrom(dst, 80), 10*time.Second)
				took := time.Since(start)
				if err == nil {
					t.Fatalf("%s: a connection from a host to %s succeeded", phase, dst)
				}
				if took > 3*time.Second {
					t.Errorf("%s: connecting to %s failed only after %s (%v): it should fail on the machine at once", phase, dst, took, err)
				}
				t.Logf("%s: %s refused in %s: %v", phase, dst, took.Round(time.Millisecond), err)
			}
			if n := counter(t, "mangle", "POSTROUTING", comment); n != 0 {
				t.Errorf("%s: %d packets to the targets left through an interface", phase, n)
			}
		}
		rejected := counter(t, "filter", "NEPHELE-FWD-"+tn.cfg.Bridge, "REJECT")
		try("with the bridge's routing table", targets...)
		if n := counter(t, "filter", "NEPHELE-FWD-"+tn.cfg.Bridge, "REJECT"); n <= rejected {
			t.Errorf("the forward chain rejected nothing (%d packets before, %d after)", rejected, n)
		}

		// Second line of defence: without the bridge's routing rule (someone deleted it),
		// what the hosts send off the machine is forwarded toward the uplink and the forward
		// chain rejects it. (The guarded address would meet the unreachable guard route,
		// whose ICMP answer the kernel rate limits per host: not tested here.)
		table := strconv.FormatUint(uint64(tableOf(tn)), 10)
		ipCmd(t, "-4", "rule", "del", "iif", tn.cfg.Bridge, "lookup", table)
		rejected = counter(t, "filter", "NEPHELE-FWD-"+tn.cfg.Bridge, "REJECT")
		try("without the bridge's routing rule", outside)
		if n := counter(t, "filter", "NEPHELE-FWD-"+tn.cfg.Bridge, "REJECT"); n <= rejected {
			t.Errorf("the forward chain rejected nothing (%d packets before, %d after)", rejected, n)
		}
		ipCmd(t, "-4", "rule", "add", "iif", tn.cfg.Bridge, "lookup", table, "priority", "4242")

		// The machine's table: every guarded range goes to the bridge or nowhere.
		for _, p := range append([]netip.Prefix{tn.cfg.Range}, tn.cfg.Guards...) {
			for _, a := range []netip.Addr{p.Addr().Next().Next(), lastAddr(p)} {
				dev, typ := routeGet(t, "", a)
				if dev != tn.cfg.Bridge && typ != "unreachable" {
					t.Errorf("the machine routes %s (in %s) to dev %q type %q, want the bridge %s or unreachable", a, p, dev, typ, tn.cfg.Bridge)
				}
			}
		}
		// A host sends everything to the bridge: its only interface.
		netns := strings.TrimPrefix(st.NetNS, "/run/netns/")
		for _, a := range []netip.Addr{outside, tn.guard(5), tn.cfg.Guards[1].Addr()} {
			if dev, _ := routeGet(t, netns, a); dev != "eth0" {
				t.Errorf("host a routes %s to %q, want eth0 (the bridge)", a, dev)
			}
		}
		// What arrives on the bridge has no route off the machine: it goes back to the
		// bridge or into the sink.
		sink := fmt.Sprintf("nd%08x", tableOf(tn))
		for _, a := range []netip.Addr{outside, tn.guard(5), tn.addr(7)} {
			out, err := exec.Command("ip", "-4", "-o", "route", "get", a.String(), "from", tn.addr(2).String(), "iif", tn.cfg.Bridge).CombinedOutput()
			if err == nil && !strings.Contains(string(out), "dev "+sink) && !strings.Contains(string(out), "dev "+tn.cfg.Bridge) {
				t.Errorf("the machine routes %s arriving on the bridge elsewhere than the bridge or the sink: %s", a, out)
			}
		}
		if out, _ := exec.Command("iptables-save", "-t", "nat").Output(); strings.Contains(string(out), tn.cfg.Bridge) || strings.Contains(string(out), tn.cfg.Range.Addr().String()) {
			t.Errorf("the nat table mentions the hosts:\n%s", out)
		}
	}()
	tn.checkClean(t, before, forward)
}

func iptables(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("iptables %v: %v: %s", args, err, out)
	}
}

// counter returns the packet count of the first rule of chain whose listing contains match.
func counter(t *testing.T, table, chain, match string) int {
	t.Helper()
	out, err := exec.Command("iptables", "-w", "-t", table, "-L", chain, "-v", "-x", "-n").Output()
	if err != nil {
		t.Fatalf("listing %s %s: %v", table, chain, err)
	}
	total := 0
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.Contains(l, match) {
			n, err := strconv.Atoi(f[0])
			if err == nil {
				total += n
			}
		}
	}
	return total
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// tableOf is the bridge's routing table: its gateway as a number.
func tableOf(tn testNet) uint32 {
	a := hosts.Gateway(tn.cfg.Range).As4()
	return uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	host := 32 - p.Bits()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v |= 1<<host - 1
	v-- // not the broadcast address
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// routeGet asks the kernel where a packet to a would go, on the machine (netns "") or
// inside a named network namespace.
func routeGet(t *testing.T, netns string, a netip.Addr) (dev, typ string) {
	t.Helper()
	args := []string{"-j", "-4", "route", "get", a.String()}
	if netns != "" {
		args = append([]string{"-n", netns}, args...)
	}
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		// The kernel answers "unreachable" routes with an error.
		if strings.Contains(string(out), "No route to host") || strings.Contains(string(out), "unreachable") {
			return "", "unreachable"
		}
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
	var r []struct {
		Type string `json:"type"`
		Dev  string `json:"dev"`
	}
	if err := json.Unmarshal(out, &r); err != nil || len(r) == 0 {
		t.Fatalf("ip %v: %q: %v", args, out, err)
	}
	return r[0].Dev, r[0].Type
}

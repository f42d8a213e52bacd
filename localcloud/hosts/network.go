package hosts

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
)

// guardMetric is the metric of the unreachable guard routes: higher than any route the
// kernel or the machine adds, so the bridge's own connected route for the instance range
// wins while the bridge is up, and the guard catches everything else.
const guardMetric = 4242

// linkExists reports whether the machine has a network interface of that name.
func linkExists(name string) bool {
	_, err := os.Stat("/sys/class/net/" + name)
	return err == nil
}

// netnsExists reports whether a named network namespace exists.
func netnsExists(name string) bool {
	_, err := os.Stat(netnsPath(name))
	return err == nil
}

func netnsPath(name string) string { return "/run/netns/" + name }

// machineRoute is one IPv4 route of the machine, as `ip -j route show table all` has it.
type machineRoute struct {
	Type  string `json:"type"`
	Dst   string `json:"dst"`
	Dev   string `json:"dev"`
	Table string `json:"table"`
}

func (r machineRoute) prefix() (netip.Prefix, bool) {
	if r.Dst == "" || r.Dst == "default" {
		return netip.Prefix{}, false
	}
	if !strings.Contains(r.Dst, "/") {
		a, err := netip.ParseAddr(r.Dst)
		if err != nil {
			return netip.Prefix{}, false
		}
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	p, err := netip.ParsePrefix(r.Dst)
	return p, err == nil
}

// checkOverlaps refuses an instance range or guard that overlaps a route of the machine
// that is not the machine's own: the hosts would capture someone's network, or a guard
// would not hold because a more specific route sends part of it out. The default route
// does not count; it is what the guards are for.
func (m *Machine) checkOverlaps(ctx context.Context) error {
	out, err := run(ctx, "", "ip", "-j", "-4", "route", "show", "table", "all")
	if err != nil {
		return fmt.Errorf("reading the machine's routes: %w", err)
	}
	var routes []machineRoute
	if err := json.Unmarshal([]byte(out), &routes); err != nil {
		return fmt.Errorf("reading the machine's routes: %w", err)
	}
	ours := map[netip.Prefix]bool{}
	if n := m.j.Network; n != nil {
		for _, g := range n.Guards {
			if p, err := netip.ParsePrefix(g); err == nil {
				ours[p] = true
			}
		}
		for _, r := range n.Routes {
			ours[r.Destination] = true
		}
	}
	wanted := append([]netip.Prefix{m.cfg.Range}, m.cfg.Guards...)
	for _, r := range routes {
		p, ok := r.prefix()
		if !ok || r.Table == "local" || r.Dev == m.cfg.Bridge || ours[p] && (r.Type == "unreachable" || r.Dev == "") {
			continue
		}
		for i, w := range wanted {
			if !w.Overlaps(p) {
				continue
			}
			what := "instance range"
			if i > 0 {
				what = "guard CIDR"
			}
			via := r.Dev
			if via == "" {
				via = r.Type
			}
			return fmt.Errorf("%s %s overlaps the machine's route to %s (%s): choose a range no route of the machine's uses", what, w, p, via)
		}
	}
	return nil
}

// setupNetwork creates the bridge, the guard routes and the forward chain, or brings
// those of an earlier run of the same directory to the configuration.
func (m *Machine) setupNetwork(ctx context.Context) error {
	gw := netip.PrefixFrom(Gateway(m.cfg.Range), m.cfg.Range.Bits())
	n := m.j.Network
	if n != nil && (n.Bridge != m.cfg.Bridge || n.Gateway != gw.String()) {
		// Another bridge or range: hosts cannot be kept on it.
		m.log.Info("the host network changed since the last run; removing the old one", "oldBridge", n.Bridge, "oldGateway", n.Gateway)
		if err := m.teardownAll(ctx, false); err != nil {
			return err
		}
		n = nil
	}
	if n == nil && linkExists(m.cfg.Bridge) {
		return fmt.Errorf("a network interface named %s exists and this local cloud did not make it: choose another bridge name or remove it (ip link del %s)", m.cfg.Bridge, m.cfg.Bridge)
	}
	if err := m.checkOverlaps(ctx); err != nil {
		return err
	}
	if n == nil {
		n = &networkRecord{Bridge: m.cfg.Bridge, Gateway: gw.String(), GuardMetric: guardMetric}
		m.j.Network = n
		if err := m.save(); err != nil {
			return err
		}
	}

	if !linkExists(m.cfg.Bridge) {
		if _, err := run(ctx, "", "ip", "link", "add", m.cfg.Bridge, "type", "bridge"); err != nil {
			return fmt.Errorf("creating bridge %s: %w", m.cfg.Bridge, err)
		}
	}
	batch := []string{
		"addr replace " + gw.String() + " dev " + m.cfg.Bridge,
		"link set " + m.cfg.Bridge + " up",
	}
	if _, err := run(ctx, strings.Join(batch, "\n")+"\n", "ip", "-batch", "-"); err != nil {
		return fmt.Errorf("configuring bridge %s: %w", m.cfg.Bridge, err)
	}
	// IPv6 is off on the bridge: the hosts speak IPv4 only, and the machine has no
	// business answering or routing anything else for them.
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+m.cfg.Bridge+"/disable_ipv6", []byte("1"), 0o644)

	if err := m.setGuards(ctx, append([]netip.Prefix{m.cfg.Range}, m.cfg.Guards...)); err != nil {
		return err
	}
	return m.setChain(ctx)
}

// setGuards makes the unreachable routes exactly want.
func (m *Machine) setGuards(ctx context.Context, want []netip.Prefix) error {
	n := m.j.Network
	var keep []string
	wantS := make([]string, len(want))
	for i, p := range want {
		wantS[i] = p.String()
	}
	for _, g := range n.Guards {
		if slices.Contains(wantS, g) {
			keep = append(keep, g)
			continue
		}
		if err := delRoute(ctx, "", "unreachable "+g+" metric "+strconv.Itoa(n.GuardMetric)); err != nil {
			return fmt.Errorf("removing guard route %s: %w", g, err)
		}
	}
	n.Guards = keep
	for _, g := range wantS {
		if !slices.Contains(n.Guards, g) {
			n.Guards = append(n.Guards, g)
			if err := m.save(); err != nil {
				return err
			}
		}
		if _, err := run(ctx, "", "ip", "route", "replace", "unreachable", g, "metric", strconv.Itoa(n.GuardMetric)); err != nil {
			return fmt.Errorf("adding guard route %s: %w", g, err)
		}
	}
	return m.save()
}

// delRoute deletes a route of the machine (netns "") or of a namespace; a route already
// gone is not an error.
func delRoute(ctx context.Context, netns string, spec string) error {
	args := []string{"route", "del"}
	if netns != "" {
		args = append([]string{"-n", netns}, args...)
	}
	_, err := run(ctx, "", "ip", append(args, strings.Fields(spec)...)...)
	if err != nil && !said(err, "No such process", "Cannot find device", "No such file or directory", "Invalid") {
		return err
	}
	return nil
}

// setChain makes the forward chain: traffic between hosts on the bridge passes, anything
// forwarded between the bridge and another interface is rejected (never sent out, never
// let in), and FORWARD jumps to it first.
func (m *Machine) setChain(ctx context.Context) error {
	n := m.j.Network
	chain := chainName(m.cfg.Bridge)
	if n.Chain == "" {
		n.Chain = chain
		if err := m.save(); err != nil {
			return err
		}
	}
	if _, err := run(ctx, "", "iptables", "-w", "-N", chain); err != nil && !said(err, "exists") {
		return fmt.Errorf("creating iptables chain %s: %w", chain, err)
	}
	br := m.cfg.Bridge
	rules := [][]string{
		{"-F", chain},
		{"-A", chain, "-i", br, "-o", br, "-j", "ACCEPT"},
		{"-A", chain, "-i", br, "-j", "REJECT", "--reject-with", "icmp-net-unreachable"},
		{"-A", chain, "-o", br, "-j", "REJECT", "--reject-with", "icmp-net-unreachable"},
	}
	for _, r := range rules {
		if _, err := run(ctx, "", "iptables", append([]string{"-w"}, r...)...); err != nil {
			return fmt.Errorf("programming iptables chain %s: %w", chain, err)
		}
	}
	if _, err := run(ctx, "", "iptables", "-w", "-C", "FORWARD", "-j", chain); err != nil {
		if _, err := run(ctx, "", "iptables", "-w", "-I", "FORWARD", "1", "-j", chain); err != nil {
			return fmt.Errorf("jumping to %s from FORWARD: %w", chain, err)
		}
	}
	return nil
}

// teardownNetwork removes what the network record names: routes, guards, the chain and
// the bridge. It goes on after a failure and returns every error.
func teardownNetwork(ctx context.Context, n *networkRecord) []error {
	var errs []error
	for _, r := range n.Routes {
		if err := delRoute(ctx, "", r.Destination.String()+" via "+r.Via.String()); err != nil {
			errs = append(errs, fmt.Errorf("removing route %s: %w", r.Destination, err))
		}
	}
	for _, g := range n.Guards {
		if err := delRoute(ctx, "", "unreachable "+g+" metric "+strconv.Itoa(n.GuardMetric)); err != nil {
			errs = append(errs, fmt.Errorf("removing guard route %s: %w", g, err))
		}
	}
	if n.Chain != "" {
		for range 100 {
			if _, err := run(ctx, "", "iptables", "-w", "-D", "FORWARD", "-j", n.Chain); err != nil {
				break
			}
		}
		for _, op := range []string{"-F", "-X"} {
			if _, err := run(ctx, "", "iptables", "-w", op, n.Chain); err != nil && !said(err, "No chain", "does not exist", "not found") {
				errs = append(errs, fmt.Errorf("removing iptables chain %s: %w", n.Chain, err))
			}
		}
	}
	if linkExists(n.Bridge) {
		if _, err := run(ctx, "", "ip", "link", "del", n.Bridge); err != nil && !said(err, "Cannot find device") {
			errs = append(errs, fmt.Errorf("removing bridge %s: %w", n.Bridge, err))
		}
	}
	return errs
}

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

// linkExists reports whether the machine has a network interface of that name.
func linkExists(name string) bool {
	_, err := os.Stat("/sys/class/net/" + name)
	return err == nil
}

// deleteLink removes network interface name. One that is not there, or that goes away
// while it is removed (see linkGone), is removed; so is the none an empty name names
// (linkExists would find /sys/class/net itself).
func (m *Machine) deleteLink(ctx context.Context, name string) error {
	if name == "" || !linkExists(name) {
		return nil
	}
	if _, err := m.exec(ctx, "", "ip", "link", "del", name); err != nil && !linkGone(err) {
		return err
	}
	return nil
}

// deleteBridge removes bridge name like deleteLink, but leaves a link that is not a
// bridge: the journal's bridge and sink are bridges a local cloud made, and a name that
// is now a machine's own interface (eth0) must not be deleted for it.
func (m *Machine) deleteBridge(ctx context.Context, name string) error {
	if name != "" && linkExists(name) && !isBridge(name) {
		return fmt.Errorf("%s is not a bridge, as the one a local cloud made is: left alone", name)
	}
	return m.deleteLink(ctx, name)
}

// isBridge reports whether link name is a bridge.
func isBridge(name string) bool {
	_, err := os.Stat("/sys/class/net/" + name + "/bridge")
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
	Type   string `json:"type"`
	Dst    string `json:"dst"`
	Dev    string `json:"dev"`
	Table  string `json:"table"`
	Metric int    `json:"metric"`
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
	out, err := m.exec(ctx, "", "ip", "-j", "-4", "route", "show", "table", "all")
	if err != nil {
		return fmt.Errorf("reading the machine's routes: %w", err)
	}
	var routes []machineRoute
	if err := json.Unmarshal([]byte(out), &routes); err != nil {
		return fmt.Errorf("reading the machine's routes: %w", err)
	}
	ours := map[netip.Prefix]bool{}
	ourTables := map[string]bool{}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := m.j.Network; n != nil {
		for _, g := range n.Guards {
			if p, err := netip.ParsePrefix(g); err == nil {
				ours[p] = true
			}
		}
		for _, r := range n.Routes {
			ours[r.Destination] = true
		}
		if v := n.VIP; v != nil {
			// The data plane's tables route the pool, to the hosts and to lo.
			ourTables[strconv.FormatUint(uint64(v.RejectTable), 10)] = true
			for _, nd := range v.Nodes {
				ourTables[strconv.FormatUint(uint64(nd.Table), 10)] = true
			}
		}
	}
	guarded := m.cfg.guarded()
	wanted := make([]netip.Prefix, len(guarded))
	for i, g := range guarded {
		wanted[i] = g.prefix
	}
	peers := map[string]bool{}
	for _, p := range m.cfg.Peers {
		peers[p.Bridge] = true
	}
	// A peer is another local cloud's bridge, which may not exist yet: never an
	// interface that leads off the machine.
	for _, r := range routes {
		if r.Dst == "default" && peers[r.Dev] {
			return fmt.Errorf("peer %s carries the machine's default route: a peer must be another local cloud's bridge", r.Dev)
		}
	}
	for _, p := range m.cfg.Peers {
		if linkExists(p.Bridge) && !isBridge(p.Bridge) {
			return fmt.Errorf("peer %s is a network interface that is no bridge: a peer must be another local cloud's bridge", p.Bridge)
		}
	}
	for _, r := range routes {
		p, ok := r.prefix()
		if !ok || r.Table == "local" || ourTables[r.Table] || r.Dev == m.cfg.Bridge || ours[p] && (r.Type == "unreachable" || r.Dev == "") {
			continue
		}
		if len(peers) > 0 && r.Type == "unreachable" && slices.Contains(wanted, p) {
			// A peer's guard of a range the clouds share. At this cloud's own metric
			// it would be one route for both, and the first to stop would remove it.
			if r.Metric == m.cfg.GuardMetric {
				return fmt.Errorf("another local cloud guards %s at metric %d, this one's guard metric: give each peer a guard metric of its own", p, r.Metric)
			}
			continue
		}
		// A peer's bridge, and its routes into the ranges the clouds share.
		if peers[r.Dev] {
			continue
		}
		for _, w := range guarded {
			if !w.prefix.Overlaps(p) {
				continue
			}
			via := r.Dev
			if via == "" {
				via = r.Type
			}
			return fmt.Errorf("%s %s overlaps the machine's route to %s (%s): choose a range no route of the machine's uses", w.what, w.prefix, p, via)
		}
	}
	return nil
}

// setupNetwork creates the bridge, the guard routes and the forward chain, or brings
// those of an earlier run of the same directory to the configuration. It runs in Open,
// which has the machine to itself.
func (m *Machine) setupNetwork(ctx context.Context) error {
	gw := netip.PrefixFrom(Gateway(m.cfg.Range), m.cfg.Range.Bits())
	n := m.j.Network
	if n != nil && (n.Bridge != m.cfg.Bridge || n.Gateway != gw.String() || n.GuardMetric != m.cfg.GuardMetric) {
		// Another bridge or range: hosts cannot be kept on it. (Another guard metric:
		// the routes of the old one would stay behind.)
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
		n = &networkRecord{Bridge: m.cfg.Bridge, Gateway: gw.String(), GuardMetric: m.cfg.GuardMetric}
		if err := m.record(func() { m.j.Network = n }); err != nil {
			return err
		}
	}

	if !linkExists(m.cfg.Bridge) {
		if _, err := m.exec(ctx, "", "ip", "link", "add", m.cfg.Bridge, "type", "bridge"); err != nil {
			return fmt.Errorf("creating bridge %s: %w", m.cfg.Bridge, err)
		}
	}
	batch := []string{
		"addr replace " + gw.String() + " dev " + m.cfg.Bridge,
		"link set " + m.cfg.Bridge + " up",
	}
	if _, err := m.exec(ctx, strings.Join(batch, "\n")+"\n", "ip", "-batch", "-"); err != nil {
		return fmt.Errorf("configuring bridge %s: %w", m.cfg.Bridge, err)
	}
	// IPv6 is off on the bridge: the hosts speak IPv4 only, and the machine has no
	// business answering or routing anything else for them.
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+m.cfg.Bridge+"/disable_ipv6", []byte("1"), 0o644)

	var guards []netip.Prefix
	for _, g := range m.cfg.guarded() {
		guards = append(guards, g.prefix)
	}
	// A rule no longer wanted goes before the guard it relied on.
	if err := m.setPeerRules(ctx, false); err != nil {
		return err
	}
	if err := m.setGuards(ctx, guards); err != nil {
		return err
	}
	// The chain before the table that forwards to the sink: nothing is forwarded
	// before it is rejected.
	if err := m.setChain(ctx); err != nil {
		return err
	}
	if err := m.setBridgeTable(ctx, gw); err != nil {
		return err
	}
	if err := m.setPeerRules(ctx, true); err != nil {
		return err
	}
	if err := m.setupVIP(ctx); err != nil {
		return err
	}
	// Forwarding on the bridge alone (not net.ipv4.ip_forward): with it off the machine
	// drops what the hosts send to addresses it has no business with silently, and a
	// connection hangs until it times out; with it on, the bridge's table answers at once
	// with an ICMP unreachable. The setting goes with the bridge.
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+m.cfg.Bridge+"/forwarding", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("turning on forwarding for bridge %s: %w", m.cfg.Bridge, err)
	}
	return nil
}

// peerRulePriority is the priority of the rules sending what arrives on the bridge for
// a peer's range or a guard CIDR to the main table: before the bridge's table.
const peerRulePriority = bridgeRulePriority - 1

// setPeerRules makes, when the cloud has peers, the rules that route what arrives on
// the bridge for a peer's range or a guard CIDR by the main table: it holds the peers'
// connected ranges, every cloud's routes into the guards (SetRoutes adds them there too)
// and the guard routes, so a destination no cloud routes is unreachable, as in the
// bridge's own table. It removes the rules no longer wanted, and with add adds the
// wanted ones, each recorded before it is added: setupNetwork removes before it changes
// the guards and adds once they stand.
func (m *Machine) setPeerRules(ctx context.Context, add bool) error {
	n := m.j.Network
	var want []string
	if len(m.cfg.Peers) > 0 {
		for _, p := range m.cfg.Peers {
			want = append(want, p.Range.String())
		}
		for _, g := range m.cfg.Guards {
			want = append(want, g.String())
		}
	}
	prio := strconv.Itoa(peerRulePriority)
	for _, to := range n.PeerRules {
		if !slices.Contains(want, to) {
			if err := m.delRules(ctx, "iif", n.Bridge, "to", to, "lookup", "main", "priority", strconv.Itoa(n.PeerRulePriority)); err != nil {
				return fmt.Errorf("removing the peer rule to %s: %w", to, err)
			}
		}
	}
	if err := m.record(func() {
		n.PeerRules = slices.DeleteFunc(n.PeerRules, func(to string) bool { return !slices.Contains(want, to) })
	}); err != nil {
		return err
	}
	if !add {
		return nil
	}
	if err := m.record(func() {
		for _, to := range want {
			if !slices.Contains(n.PeerRules, to) {
				n.PeerRules = append(n.PeerRules, to)
			}
		}
		n.PeerRulePriority = peerRulePriority
	}); err != nil {
		return err
	}
	for _, to := range want {
		have, err := m.exec(ctx, "", "ip", "-4", "rule", "show", "iif", m.cfg.Bridge, "to", to, "lookup", "main", "priority", prio)
		if err != nil {
			return fmt.Errorf("reading routing rules: %w", err)
		}
		if strings.TrimSpace(have) != "" {
			continue
		}
		if _, err := m.exec(ctx, "", "ip", "-4", "rule", "add", "iif", m.cfg.Bridge, "to", to, "lookup", "main", "priority", prio); err != nil {
			return fmt.Errorf("adding the peer rule of bridge %s to %s: %w", m.cfg.Bridge, to, err)
		}
	}
	return nil
}

// bridgeRulePriority is the priority of the rule sending what arrives on the bridge to
// the bridge's table: before the main table (32766), after the local one (0), so the
// machine's own addresses stay reachable from the hosts.
const bridgeRulePriority = 4242

// tableID is the bridge's routing table: the gateway address as a number, unique on the
// machine because instance ranges may not overlap.
func tableID(gw netip.Addr) uint32 {
	a := gw.As4()
	return uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
}

// sinkName is the interface the bridge's table sends everything else to: a bridge with no
// port, which drops whatever it is given (the dummy driver would do, but is not built into
// every kernel).
func sinkName(gw netip.Addr) string {
	a := gw.As4()
	return fmt.Sprintf("nd%02x%02x%02x%02x", a[0], a[1], a[2], a[3])
}

// setBridgeTable makes the bridge's table and the rule that sends everything arriving on
// the bridge to it. The table holds the instance range on the bridge (SetRoutes adds
// its routes) and a default route into the sink, a dead end: what the hosts send
// anywhere else is forwarded there, where the forward chain answers it at once (a TCP
// reset, an ICMP unreachable otherwise) and the sink drops whatever the chain lets by.
// An unreachable default route would answer with ICMP alone, which the kernel rate
// limits per host, so connections would hang instead of failing.
func (m *Machine) setBridgeTable(ctx context.Context, gw netip.Prefix) error {
	n := m.j.Network
	table := strconv.FormatUint(uint64(tableID(gw.Addr())), 10)
	sink := sinkName(gw.Addr())
	if n.Table == 0 || n.Sink == "" {
		err := m.record(func() { n.Table, n.RulePriority, n.Sink = tableID(gw.Addr()), bridgeRulePriority, sink })
		if err != nil {
			return err
		}
	}
	if !linkExists(sink) {
		if _, err := m.exec(ctx, "", "ip", "link", "add", sink, "type", "bridge"); err != nil {
			return fmt.Errorf("creating sink interface %s: %w", sink, err)
		}
	}
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+sink+"/disable_ipv6", []byte("1"), 0o644)
	lines := []string{
		"link set " + sink + " up",
		"route replace " + m.cfg.Range.String() + " dev " + m.cfg.Bridge + " src " + gw.Addr().String() + " table " + table,
		"route replace default dev " + sink + " table " + table,
	}
	if _, err := m.exec(ctx, strings.Join(lines, "\n")+"\n", "ip", "-batch", "-"); err != nil {
		return fmt.Errorf("programming the routing table of bridge %s: %w", m.cfg.Bridge, err)
	}
	rules, err := m.exec(ctx, "", "ip", "-4", "rule", "show", "iif", m.cfg.Bridge, "table", table)
	if err != nil {
		return fmt.Errorf("reading routing rules: %w", err)
	}
	if strings.TrimSpace(rules) == "" {
		if _, err := m.exec(ctx, "", "ip", "-4", "rule", "add", "iif", m.cfg.Bridge, "lookup", table, "priority", strconv.Itoa(n.RulePriority)); err != nil {
			return fmt.Errorf("adding the routing rule of bridge %s: %w", m.cfg.Bridge, err)
		}
	}
	return nil
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
		if err := m.delRoute(ctx, "", "unreachable "+g+" metric "+strconv.Itoa(n.GuardMetric)); err != nil {
			return fmt.Errorf("removing guard route %s: %w", g, err)
		}
	}
	if err := m.record(func() { n.Guards = keep }); err != nil {
		return err
	}
	for _, g := range wantS {
		if !slices.Contains(n.Guards, g) {
			if err := m.record(func() { n.Guards = append(n.Guards, g) }); err != nil {
				return err
			}
		}
		if _, err := m.exec(ctx, "", "ip", "route", "replace", "unreachable", g, "metric", strconv.Itoa(n.GuardMetric)); err != nil {
			return fmt.Errorf("adding guard route %s: %w", g, err)
		}
	}
	return nil
}

// delRoute deletes a route of the machine (netns "") or of a namespace; a route already
// gone is not an error.
// delRules deletes every IPv4 routing rule that selector matches (an earlier run may
// have added one twice); none is no error.
func (m *Machine) delRules(ctx context.Context, selector ...string) error {
	for range 100 {
		if _, err := m.exec(ctx, "", "ip", append([]string{"-4", "rule", "del"}, selector...)...); err != nil {
			if said(err, "No such file or directory", "No such process") {
				return nil
			}
			return err
		}
	}
	return fmt.Errorf("rule %s: still there after 100 deletions", strings.Join(selector, " "))
}

func (m *Machine) delRoute(ctx context.Context, netns string, spec string) error {
	args := []string{"route", "del"}
	if netns != "" {
		args = append([]string{"-n", netns}, args...)
	}
	_, err := m.exec(ctx, "", "ip", append(args, strings.Fields(spec)...)...)
	if err != nil && !said(err, "No such process", "Cannot find device", "No such file or directory", "Invalid") {
		return err
	}
	return nil
}

// setChain makes the forward chain: traffic between hosts on the bridge passes, anything
// forwarded between the bridge and another interface is rejected (never sent out, never
// let in; TCP with a reset, which no rate limit delays), and FORWARD jumps to it first.
func (m *Machine) setChain(ctx context.Context) error {
	n := m.j.Network
	chain := chainName(m.cfg.Bridge)
	if n.Chain == "" {
		if err := m.record(func() { n.Chain = chain }); err != nil {
			return err
		}
	}
	if _, err := m.exec(ctx, "", "iptables", "-w", "-N", chain); err != nil && !said(err, "exists") {
		return fmt.Errorf("creating iptables chain %s: %w", chain, err)
	}
	br := m.cfg.Bridge
	rules := [][]string{
		{"-F", chain},
		{"-A", chain, "-i", br, "-o", br, "-j", "ACCEPT"},
	}
	// Peers' hosts are nodes of the same cluster: traffic between the bridges passes.
	for _, p := range m.cfg.Peers {
		rules = append(rules,
			[]string{"-A", chain, "-i", br, "-o", p.Bridge, "-j", "ACCEPT"},
			[]string{"-A", chain, "-i", p.Bridge, "-o", br, "-j", "ACCEPT"})
	}
	rules = append(rules, []string{"-A", chain, "-i", br, "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"})
	if m.cfg.VIPPool.IsValid() {
		// A host whose kube-proxy has no rule for a VIP yet sends to the machine: that
		// VIP refuses it, as the machine's own clients are refused where no listener is.
		rules = append(rules, []string{"-A", chain, "-i", br, "-d", m.cfg.VIPPool.String(), "-j", "REJECT", "--reject-with", "icmp-port-unreachable"})
	}
	rules = append(rules, [][]string{
		{"-A", chain, "-i", br, "-j", "REJECT", "--reject-with", "icmp-net-unreachable"},
		{"-A", chain, "-o", br, "-j", "REJECT", "--reject-with", "icmp-net-unreachable"},
	}...)
	for _, r := range rules {
		if _, err := m.exec(ctx, "", "iptables", append([]string{"-w"}, r...)...); err != nil {
			return fmt.Errorf("programming iptables chain %s: %w", chain, err)
		}
	}
	if _, err := m.exec(ctx, "", "iptables", "-w", "-C", "FORWARD", "-j", chain); err != nil {
		if _, err := m.exec(ctx, "", "iptables", "-w", "-I", "FORWARD", "1", "-j", chain); err != nil {
			return fmt.Errorf("jumping to %s from FORWARD: %w", chain, err)
		}
	}
	return nil
}

// teardownNetwork removes what the network record names: routes, the peer rules, guards,
// the chain and the bridge. It goes on after a failure and returns every error.
func (m *Machine) teardownNetwork(ctx context.Context, n *networkRecord) []error {
	var errs []error
	// The load balancers first: nothing is sent to a host through them any more.
	if n.VIP != nil {
		errs = append(errs, m.teardownVIP(ctx, n.VIP, n.Bridge)...)
	}
	// The bridge next: with it go its forwarding and every route through it, so
	// nothing is forwarded while the guards come down.
	if err := m.deleteBridge(ctx, n.Bridge); err != nil {
		errs = append(errs, fmt.Errorf("removing bridge %s: %w", n.Bridge, err))
	}
	if n.Table != 0 {
		table := strconv.FormatUint(uint64(n.Table), 10)
		if err := m.delRules(ctx, "iif", n.Bridge, "lookup", table, "priority", strconv.Itoa(n.RulePriority)); err != nil {
			errs = append(errs, fmt.Errorf("removing the routing rule of bridge %s: %w", n.Bridge, err))
		}
		if _, err := m.exec(ctx, "", "ip", "-4", "route", "flush", "table", table); err != nil && !said(err, "FIB table does not exist") {
			errs = append(errs, fmt.Errorf("removing routing table %s: %w", table, err))
		}
	}
	if err := m.deleteBridge(ctx, n.Sink); err != nil {
		errs = append(errs, fmt.Errorf("removing sink interface %s: %w", n.Sink, err))
	}
	for _, to := range n.PeerRules {
		if err := m.delRules(ctx, "iif", n.Bridge, "to", to, "lookup", "main", "priority", strconv.Itoa(n.PeerRulePriority)); err != nil {
			errs = append(errs, fmt.Errorf("removing the peer rule of bridge %s to %s: %w", n.Bridge, to, err))
		}
	}
	for _, r := range n.Routes {
		if err := m.delRoute(ctx, "", r.Destination.String()+" via "+r.Via.String()); err != nil {
			errs = append(errs, fmt.Errorf("removing route %s: %w", r.Destination, err))
		}
	}
	for _, g := range n.Guards {
		if err := m.delRoute(ctx, "", "unreachable "+g+" metric "+strconv.Itoa(n.GuardMetric)); err != nil {
			errs = append(errs, fmt.Errorf("removing guard route %s: %w", g, err))
		}
	}
	if n.Chain != "" {
		for range 100 {
			if _, err := m.exec(ctx, "", "iptables", "-w", "-D", "FORWARD", "-j", n.Chain); err != nil {
				break
			}
		}
		for _, op := range []string{"-F", "-X"} {
			if _, err := m.exec(ctx, "", "iptables", "-w", op, n.Chain); err != nil && !said(err, "No chain", "does not exist", "not found") {
				errs = append(errs, fmt.Errorf("removing iptables chain %s: %w", n.Chain, err))
			}
		}
	}
	return errs
}

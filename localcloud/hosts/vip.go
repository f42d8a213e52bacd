package hosts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The machine's load balancer data plane ("route to node", as MetalLB and kube-vip do
// it): a connection the machine opens to a VIP is sent, unchanged (the VIP stays its
// destination, the client address its source), to one host chosen per connection;
// kube-proxy on that host then does what the Service asks (endpoints,
// externalTrafficPolicy, source ranges, session affinity inside the node), as it does
// for any ingress IP of ipMode VIP.
//
// How, on the machine (Config.VIPPool set):
//   - The bridge gets one more address, VIPSource: the pool's last address but its
//     broadcast. The pool is routed on the bridge with that source, so the hosts see the
//     machine's clients as VIPSource, outside the instance range (upstream's source-IP
//     test wants a client outside the first node's /16), and reply through their default
//     route, the machine.
//   - mangle OUTPUT jumps to a chain of the machine's own for the pool. Per listener
//     (VIP, protocol, port, and each source range) it jumps to the load balancer's
//     chain, which restores the connection's mark (CONNMARK); a connection already on
//     one of the load balancer's hosts keeps it; a new one (a TCP SYN, or a UDP flow
//     whose host left) gets a host's mark, chosen at random among the targets
//     (statistic), or the host a client address was last sent to within the affinity
//     timeout (recent), and the mark is saved on the connection.
//   - A rule per host, `to <pool> fwmark <host's mark> lookup <host's table>`, with a
//     route of the pool via the host in that table: the kernel re-routes the marked
//     packet to the host when mangle OUTPUT changed its mark.
//   - Everything else for the pool (a VIP without a load balancer, a port without a
//     listener, a client outside the source ranges, a load balancer without hosts, a
//     TCP connection whose host left) gets the reject mark and is delivered on the
//     machine, where filter INPUT rejects it: TCP with a reset, the rest with ICMP port
//     unreachable, as a cloud answers where nothing listens. Rejecting in OUTPUT would
//     fail the client's send with EPERM instead, which clients (upstream's e2e among
//     them) take for another error than "nothing listens". A new flow is sent to
//     VIPSource (nat OUTPUT): an ICMP error needs a source address of the machine's,
//     which a VIP is not, and conntrack gives the error the VIP back on its way to the
//     client. Later packets of a flow are routed by the reject mark's rule to a local
//     route of the pool (the kernel's TCP reset needs no address of the machine's).
//
// Packets for the pool that arrive on the bridge (a host whose kube-proxy has no rule
// for a VIP yet sends it to its default route, the machine) are never sent back: the
// bridge's table has no route for the pool, so they go to the sink, and the forward
// chain rejects them. There is no loop and no NAT.

// vipRulePriority is the priority of the rules routing marked VIP packets: before the
// bridge's rule and the main table.
const vipRulePriority = bridgeRulePriority - 1

// vipMarkMask is the part of the packet and connection marks the data plane uses: the
// high half, clear of kube-proxy's bits (0x4000, 0x8000) should one run on the machine.
// A host's mark is its offset in the instance range there, so a host beyond the
// 65,535th address cannot be a target (Routable).
const (
	vipMarkMask  uint32 = 0xffff0000
	vipMarkShift uint32 = 16
)

// DefaultVIPPool is a usual VIP pool for a cloud with hosts: beside DefaultRange,
// outside 127.0.0.0/8, and outside the pod (10.244.0.0/16) and Service (10.96.0.0/12)
// ranges clusters usually have.
var DefaultVIPPool = netip.MustParsePrefix("10.89.0.0/16")

// ValidateVIPPool checks a VIP pool for a machine's load balancer data plane.
func ValidateVIPPool(p netip.Prefix) error {
	switch {
	case !p.IsValid() || !p.Addr().Is4():
		return fmt.Errorf("VIP pool %s: want an IPv4 range such as %s", p, DefaultVIPPool)
	case p.Bits() == 0:
		return fmt.Errorf("VIP pool %s: want a range of the project's own such as %s", p, DefaultVIPPool)
	case p.Bits() > 30:
		return fmt.Errorf("VIP pool %s: too small for a VIP and the machine's source address; want at most a /30", p)
	case loopback.Overlaps(p):
		return fmt.Errorf("VIP pool %s: VIPs routed to hosts need a range outside 127.0.0.0/8 (every host has its own loopback there), such as %s", p, DefaultVIPPool)
	}
	return nil
}

// VIPSource returns the machine's source address for VIP traffic: the pool's last
// address but its broadcast one. It is never a VIP.
func VIPSource(pool netip.Prefix) netip.Addr {
	a := pool.Masked().Addr().As4()
	host := uint32(1)<<(32-pool.Bits()) - 1
	n := (uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])) | host
	n--
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// Protocols of LoadBalancerPort.
const (
	ProtocolTCP = "tcp"
	ProtocolUDP = "udp"
)

// LoadBalancerPort is one listener of a load balancer: its protocol (ProtocolTCP or
// ProtocolUDP) and port on the VIP.
type LoadBalancerPort struct {
	Protocol string
	Port     uint16
}

// LoadBalancer is one load balancer of the machine's data plane (SetLoadBalancers).
type LoadBalancer struct {
	// Name is the load balancer's name, unique in the cloud.
	Name string
	// VIP is its address, inside the VIP pool and not VIPSource.
	VIP netip.Addr
	// Ports are its listeners; one listener per protocol and port.
	Ports []LoadBalancerPort
	// Backends are the addresses of its hosts (Routable): connections already on one of
	// them stay there.
	Backends []netip.Addr
	// Targets are the backends new connections go to, such as the healthy ones. None
	// refuses new connections.
	Targets []netip.Addr
	// SourceRanges are the client prefixes allowed; empty allows all. Others are refused.
	SourceRanges []netip.Prefix
	// AffinityTimeout, when positive, sends a client address's new connections to the
	// target its last one went to, when that was less than this long ago (sessionAffinity
	// ClientIP). Zero spreads every new connection at random.
	AffinityTimeout time.Duration
}

// vipRecord is the journal's record of the load balancer data plane.
type vipRecord struct {
	Pool string `json:"pool"`
	// Source is VIPSource with its length, on the bridge.
	Source string `json:"source"`
	// Mask is the part of the marks the data plane uses; RejectMark routes a packet to
	// RejectTable, whose local route of the pool delivers it to filter INPUT's chain.
	Mask         uint32 `json:"mask"`
	RejectMark   uint32 `json:"rejectMark"`
	RejectTable  uint32 `json:"rejectTable"`
	RulePriority int    `json:"rulePriority"`
	// MangleChain is jumped to from mangle OUTPUT, NATChain from nat OUTPUT,
	// FilterChain from filter INPUT.
	MangleChain string `json:"mangleChain"`
	NATChain    string `json:"natChain"`
	FilterChain string `json:"filterChain"`
	// Chains are the load balancers' chains in the mangle table.
	Chains []string `json:"chains,omitempty"`
	// Nodes are the hosts with a rule and a routing table.
	Nodes []vipNode `json:"nodes,omitempty"`
}

// vipNode is a host packets are routed to: marked Mark, looked up in Table, which
// routes the pool via Addr.
type vipNode struct {
	Addr  netip.Addr `json:"addr"`
	Mark  uint32     `json:"mark"`
	Table uint32     `json:"table"`
}

func mangleChainName(bridge string) string { return "NEPHELE-LB-" + bridge }
func filterChainName(bridge string) string { return "NEPHELE-VIP-" + bridge }

// vipJump is a jump from a built-in chain to one of the data plane's, for the pool.
type vipJump struct{ table, hook, chain string }

func (v *vipRecord) jumps() []vipJump {
	return []vipJump{{"mangle", "OUTPUT", v.MangleChain}, {"nat", "OUTPUT", v.NATChain}, {"filter", "INPUT", v.FilterChain}}
}

// vipMark returns the mark routing packets to address a of instance range r, and false
// when a cannot have one (outside r, or beyond the mark's 16 bits).
func vipMark(r netip.Prefix, a netip.Addr) (uint32, bool) {
	if !a.Is4() || !r.Contains(a) {
		return 0, false
	}
	off := addrNum(a) - addrNum(r.Masked().Addr())
	if off == 0 || off > vipMarkMask>>vipMarkShift {
		return 0, false
	}
	return off << vipMarkShift, true
}

func addrNum(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// VIPPool returns the VIP pool; not valid when the machine has no load balancer data
// plane.
func (m *Machine) VIPPool() netip.Prefix { return m.cfg.VIPPool }

// VIPSource returns the machine's source address for VIP traffic (see VIPSource); not
// valid without a VIP pool.
func (m *Machine) VIPSource() netip.Addr {
	if !m.cfg.VIPPool.IsValid() {
		return netip.Addr{}
	}
	return VIPSource(m.cfg.VIPPool)
}

// Routable reports whether SetLoadBalancers can send connections to address a: a host
// address of the instance range with a mark.
func (m *Machine) Routable(a netip.Addr) bool {
	_, ok := vipMark(m.cfg.Range, a)
	return ok && a != m.Gateway() && a != lastAddr(m.cfg.Range)
}

func lastAddr(p netip.Prefix) netip.Addr {
	n := addrNum(p.Masked().Addr()) | (uint32(1)<<(32-p.Bits()) - 1)
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// setupVIP makes the load balancer data plane's fixed part, or takes back that of an
// earlier run of the same directory (keeping its load balancers' rules until the first
// SetLoadBalancers, so a restarting cloud does not cut its VIPs' connections), or
// removes it when the pool changed or is gone. It runs in Open.
func (m *Machine) setupVIP(ctx context.Context) error {
	n := m.j.Network
	if n.VIP != nil && n.VIP.Pool != m.cfg.VIPPool.String() {
		if errs := m.teardownVIP(ctx, n.VIP, n.Bridge); len(errs) > 0 {
			return fmt.Errorf("removing the load balancer data plane of VIP pool %s: %w", n.VIP.Pool, errors.Join(errs...))
		}
		if err := m.record(func() { n.VIP = nil }); err != nil {
			return err
		}
	}
	if !m.cfg.VIPPool.IsValid() {
		return nil
	}
	pool, src, br := m.cfg.VIPPool, VIPSource(m.cfg.VIPPool), m.cfg.Bridge
	v := n.VIP
	if v == nil {
		v = &vipRecord{
			Pool: pool.String(), Source: netip.PrefixFrom(src, 32).String(),
			Mask: vipMarkMask, RejectMark: 1 << vipMarkShift, RejectTable: addrNum(m.cfg.Range.Masked().Addr()),
			RulePriority: vipRulePriority, MangleChain: mangleChainName(br), NATChain: filterChainName(br), FilterChain: filterChainName(br),
		}
		if err := m.record(func() { n.VIP = v }); err != nil {
			return err
		}
	}
	lines := []string{
		"addr replace " + v.Source + " dev " + br,
		"route replace " + pool.String() + " dev " + br + " src " + src.String(),
		"route replace local " + pool.String() + " dev lo table " + strconv.FormatUint(uint64(v.RejectTable), 10),
	}
	if _, err := m.exec(ctx, strings.Join(lines, "\n")+"\n", "ip", "-batch", "-"); err != nil {
		return fmt.Errorf("routing VIP pool %s: %w", pool, err)
	}
	if err := m.addVIPRule(ctx, v, v.RejectMark, v.RejectTable); err != nil {
		return err
	}
	// The mangle chain of an earlier run keeps its rules: the first SetLoadBalancers
	// rewrites them. A new one refuses everything until then.
	fresh := ""
	if _, err := m.exec(ctx, "", "iptables", "-w", "-t", "mangle", "-S", v.MangleChain); err != nil {
		fresh = fmt.Sprintf("*mangle\n:%s - [0:0]\n%sCOMMIT\n", v.MangleChain, vipPlan{v: v}.topHead()+vipPlan{v: v}.topTail())
	}
	reject := fmt.Sprintf("%#x/%#x", v.RejectMark, v.Mask)
	fixed := fmt.Sprintf("*nat\n:%s - [0:0]\n"+
		"-A %[1]s -m mark --mark %[2]s -j DNAT --to-destination %[3]s\n"+
		"COMMIT\n"+
		"*filter\n:%[4]s - [0:0]\n"+
		"-A %[4]s -m mark --mark %[2]s -p tcp -j REJECT --reject-with tcp-reset\n"+
		"-A %[4]s -m mark --mark %[2]s -j REJECT --reject-with icmp-port-unreachable\n"+
		"COMMIT\n", v.NATChain, reject, src, v.FilterChain)
	if _, err := m.exec(ctx, fresh+fixed, "iptables-restore", "-w", "--noflush"); err != nil {
		return fmt.Errorf("programming the chains of VIP pool %s: %w", pool, err)
	}
	for _, j := range v.jumps() {
		if _, err := m.exec(ctx, "", "iptables", "-w", "-t", j.table, "-C", j.hook, "-d", pool.String(), "-j", j.chain); err == nil {
			continue
		}
		if _, err := m.exec(ctx, "", "iptables", "-w", "-t", j.table, "-I", j.hook, "1", "-d", pool.String(), "-j", j.chain); err != nil {
			return fmt.Errorf("jumping to %s from %s %s: %w", j.chain, j.table, j.hook, err)
		}
	}
	return nil
}

// addVIPRule adds the rule routing packets marked mark for the pool to table, unless it
// exists.
func (m *Machine) addVIPRule(ctx context.Context, v *vipRecord, mark, table uint32) error {
	_, err := m.exec(ctx, "", "ip", "-4", "rule", "add", "priority", strconv.Itoa(v.RulePriority), "to", v.Pool,
		"fwmark", fmt.Sprintf("%#x/%#x", mark, v.Mask), "lookup", strconv.FormatUint(uint64(table), 10))
	if err != nil && !said(err, "File exists") {
		return fmt.Errorf("adding the routing rule of VIP pool %s for mark %#x: %w", v.Pool, mark, err)
	}
	return nil
}

// delVIPRule removes that rule; one already gone is removed.
func (m *Machine) delVIPRule(ctx context.Context, v *vipRecord, mark, table uint32) error {
	_, err := m.exec(ctx, "", "ip", "-4", "rule", "del", "priority", strconv.Itoa(v.RulePriority), "to", v.Pool,
		"fwmark", fmt.Sprintf("%#x/%#x", mark, v.Mask), "lookup", strconv.FormatUint(uint64(table), 10))
	if err != nil && !said(err, "No such file or directory", "No such process") {
		return fmt.Errorf("removing the routing rule of VIP pool %s for mark %#x: %w", v.Pool, mark, err)
	}
	return nil
}

// teardownVIP removes what a record of the data plane names: the jumps, the chains
// (with them the rules' recent lists), the rules and tables, the pool's route and the
// source address. It goes on after a failure and returns every error.
func (m *Machine) teardownVIP(ctx context.Context, v *vipRecord, bridge string) []error {
	var errs []error
	for _, j := range v.jumps() {
		for range 100 {
			if _, err := m.exec(ctx, "", "iptables", "-w", "-t", j.table, "-D", j.hook, "-d", v.Pool, "-j", j.chain); err != nil {
				break
			}
		}
	}
	// The top chain first: it jumps to the others.
	chains := v.jumps()
	for _, c := range v.Chains {
		chains = append(chains, vipJump{table: "mangle", chain: c})
	}
	for _, op := range []string{"-F", "-X"} {
		for _, c := range chains {
			if c.chain == "" {
				continue // a journal from before the chain existed
			}
			if _, err := m.exec(ctx, "", "iptables", "-w", "-t", c.table, op, c.chain); err != nil && !said(err, "No chain", "does not exist", "not found") {
				errs = append(errs, fmt.Errorf("removing iptables chain %s: %w", c.chain, err))
			}
		}
	}
	nodes := append(slices.Clone(v.Nodes), vipNode{Mark: v.RejectMark, Table: v.RejectTable})
	for _, nd := range nodes {
		if err := m.delVIPRule(ctx, v, nd.Mark, nd.Table); err != nil {
			errs = append(errs, err)
		}
		table := strconv.FormatUint(uint64(nd.Table), 10)
		if _, err := m.exec(ctx, "", "ip", "-4", "route", "flush", "table", table); err != nil && !said(err, "FIB table does not exist") {
			errs = append(errs, fmt.Errorf("removing routing table %s: %w", table, err))
		}
	}
	if linkExists(bridge) {
		if err := m.delRoute(ctx, "", v.Pool+" dev "+bridge); err != nil {
			errs = append(errs, fmt.Errorf("removing the route of VIP pool %s: %w", v.Pool, err))
		}
		if _, err := m.exec(ctx, "", "ip", "addr", "del", v.Source, "dev", bridge); err != nil && !said(err, "Cannot assign", "Cannot find device") {
			errs = append(errs, fmt.Errorf("removing address %s from bridge %s: %w", v.Source, bridge, err))
		}
	}
	return errs
}

// SetLoadBalancers makes the machine's load balancer data plane exactly lbs: what
// follows for each is described at the top of vip.go. It replaces every load balancer's
// rules in one iptables transaction, so a client address's affinity (its recent list)
// and connections in flight outlive the change. A machine without a VIP pool refuses.
func (m *Machine) SetLoadBalancers(ctx context.Context, lbs []LoadBalancer) error {
	if !m.cfg.VIPPool.IsValid() {
		return errors.New("this machine has no VIP pool: load balancers need Config.VIPPool")
	}
	lbs = slices.Clone(lbs)
	slices.SortFunc(lbs, func(a, b LoadBalancer) int { return strings.Compare(a.Name, b.Name) })
	want := map[netip.Addr]vipNode{}
	for i := range lbs {
		if err := m.checkLoadBalancer(&lbs[i]); err != nil {
			return err
		}
		for _, a := range lbs[i].Backends {
			mark, _ := vipMark(m.cfg.Range, a)
			want[a] = vipNode{Addr: a, Mark: mark, Table: addrNum(a)}
		}
	}
	m.vipMu.Lock()
	defer m.vipMu.Unlock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return errClosed
	}
	v := m.j.Network.VIP
	m.mu.Unlock()
	plan := vipPlan{v: v, bridge: m.cfg.Bridge, rng: m.cfg.Range}
	chains := make([]string, 0, len(lbs))
	for _, lb := range lbs {
		chains = append(chains, plan.lbChain(lb.Name))
	}
	nodes := make([]vipNode, 0, len(want))
	for _, nd := range want {
		nodes = append(nodes, nd)
	}
	slices.SortFunc(nodes, func(a, b vipNode) int { return a.Addr.Compare(b.Addr) })
	var staleChains []string
	var staleNodes []vipNode
	// Record what is about to exist before it does.
	err := m.record(func() {
		for _, c := range v.Chains {
			if !slices.Contains(chains, c) {
				staleChains = append(staleChains, c)
			}
		}
		for _, nd := range v.Nodes {
			if _, ok := want[nd.Addr]; !ok {
				staleNodes = append(staleNodes, nd)
			}
		}
		v.Chains = append(slices.Clone(chains), staleChains...)
		v.Nodes = append(slices.Clone(nodes), staleNodes...)
	})
	if err != nil {
		return err
	}
	// Routes to the hosts before the marks that use them.
	if len(nodes) > 0 {
		var lines []string
		for _, nd := range nodes {
			lines = append(lines, fmt.Sprintf("route replace %s via %s dev %s onlink table %d", v.Pool, nd.Addr, m.cfg.Bridge, nd.Table))
		}
		if _, err := m.exec(ctx, strings.Join(lines, "\n")+"\n", "ip", "-batch", "-"); err != nil {
			return fmt.Errorf("routing VIP pool %s to hosts: %w", v.Pool, err)
		}
		have, err := m.vipRules(ctx, v)
		if err != nil {
			return err
		}
		for _, nd := range nodes {
			if !have[nd.Table] {
				if err := m.addVIPRule(ctx, v, nd.Mark, nd.Table); err != nil {
					return err
				}
			}
		}
	}
	if _, err := m.exec(ctx, plan.render(lbs, staleChains), "iptables-restore", "-w", "--noflush"); err != nil {
		return fmt.Errorf("programming the load balancers of VIP pool %s: %w", v.Pool, err)
	}
	var errs []error
	var left []vipNode
	for _, nd := range staleNodes {
		err := m.delVIPRule(ctx, v, nd.Mark, nd.Table)
		if err == nil {
			_, err = m.exec(ctx, "", "ip", "-4", "route", "flush", "table", strconv.FormatUint(uint64(nd.Table), 10))
			if said(err, "FIB table does not exist") {
				err = nil
			}
		}
		if err != nil {
			errs = append(errs, err)
			left = append(left, nd)
		}
	}
	return errors.Join(append(errs, m.record(func() {
		v.Chains = chains
		v.Nodes = append(nodes, left...)
	}))...)
}

// CheckLoadBalancer says why SetLoadBalancers would refuse lb, nil when it would not.
func (m *Machine) CheckLoadBalancer(lb LoadBalancer) error {
	if !m.cfg.VIPPool.IsValid() {
		return errors.New("this machine has no VIP pool: load balancers need Config.VIPPool")
	}
	return m.checkLoadBalancer(&lb)
}

// checkLoadBalancer refuses a load balancer the data plane cannot program.
func (m *Machine) checkLoadBalancer(lb *LoadBalancer) error {
	src := VIPSource(m.cfg.VIPPool)
	if !lb.VIP.Is4() || !m.cfg.VIPPool.Contains(lb.VIP) || lb.VIP == src || lb.VIP == m.cfg.VIPPool.Masked().Addr() || lb.VIP == lastAddr(m.cfg.VIPPool) {
		return fmt.Errorf("load balancer %s: VIP %s is not an address of VIP pool %s that a load balancer may have", lb.Name, lb.VIP, m.cfg.VIPPool)
	}
	for _, p := range lb.Ports {
		if p.Protocol != ProtocolTCP && p.Protocol != ProtocolUDP {
			return fmt.Errorf("load balancer %s: protocol %q: want %s or %s", lb.Name, p.Protocol, ProtocolTCP, ProtocolUDP)
		}
		if p.Port == 0 {
			return fmt.Errorf("load balancer %s: port 0", lb.Name)
		}
	}
	for _, a := range lb.Backends {
		if !m.Routable(a) {
			return fmt.Errorf("load balancer %s: backend %s is not a host address of the instance range %s", lb.Name, a, m.cfg.Range)
		}
	}
	for _, a := range lb.Targets {
		if !slices.Contains(lb.Backends, a) {
			return fmt.Errorf("load balancer %s: target %s is not one of its backends", lb.Name, a)
		}
	}
	for _, r := range lb.SourceRanges {
		if !r.IsValid() || !r.Addr().Is4() {
			return fmt.Errorf("load balancer %s: source range %s: want an IPv4 CIDR", lb.Name, r)
		}
	}
	if lb.AffinityTimeout < 0 {
		return fmt.Errorf("load balancer %s: negative affinity timeout %s", lb.Name, lb.AffinityTimeout)
	}
	return nil
}

// vipRules returns the tables of the pool's rules at the data plane's priority.
func (m *Machine) vipRules(ctx context.Context, v *vipRecord) (map[uint32]bool, error) {
	out, err := m.exec(ctx, "", "ip", "-j", "-4", "rule", "show", "priority", strconv.Itoa(v.RulePriority))
	if err != nil {
		return nil, fmt.Errorf("reading routing rules: %w", err)
	}
	var rules []struct {
		Dst    string `json:"dst"`
		DstLen int    `json:"dstlen"`
		Table  string `json:"table"`
	}
	if strings.TrimSpace(out) != "" {
		if err := json.Unmarshal([]byte(out), &rules); err != nil {
			return nil, fmt.Errorf("reading routing rules: %w", err)
		}
	}
	have := map[uint32]bool{}
	for _, r := range rules {
		if fmt.Sprintf("%s/%d", r.Dst, r.DstLen) != v.Pool {
			continue
		}
		if t, err := strconv.ParseUint(r.Table, 10, 32); err == nil {
			have[uint32(t)] = true
		}
	}
	return have, nil
}

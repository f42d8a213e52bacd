package hosts

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// Defaults of Config's optional fields. DefaultStopTimeout is systemd's stop timeout
// (DefaultTimeoutStopSec): a boot command is a machine's init, and the node runtime
// (kubenode.ShutdownBudget, 75s at most) must be able to stop a loaded node before the
// host kills it.
const (
	DefaultBridge            = "nephele0"
	DefaultStopTimeout       = 90 * time.Second
	DefaultRestartBackoff    = time.Second
	DefaultMaxRestartBackoff = 30 * time.Second
	DefaultMaxLogSize        = 64 << 20
)

// DefaultRange is a usual instance range for hosts: the bridge gets 10.88.0.1/16.
var DefaultRange = netip.MustParsePrefix("10.88.0.0/16")

// loopback is where host addresses cannot be: Linux routes all of it to lo.
var loopback = netip.MustParsePrefix("127.0.0.0/8")

// Config configures a Machine.
type Config struct {
	// Dir holds the journal, the hosts' namespace files and each host's state directory.
	// Required; created if missing.
	Dir string
	// Bridge is the name of the bridge the machine creates and attaches hosts to; it must
	// not exist unless an earlier run of the same Dir made it. Default DefaultBridge.
	Bridge string
	// Range is the instance range: the bridge gets its first address, the gateway of
	// every host; hosts get the others. IPv4, outside 127.0.0.0/8, at most a /30, and
	// overlapping no route of the machine's. Required.
	Range netip.Prefix
	// Guards are CIDRs that must not leave the machine, such as a cluster's pod and
	// Service ranges: each gets an unreachable route on the machine, so a missing route
	// fails here instead of following the default route out. Routes (SetRoutes) may
	// only send destinations inside them.
	Guards []netip.Prefix
	// Peers are the networks of other local clouds on this machine whose hosts this
	// cloud's hosts exchange traffic with: the nodes of one cluster spread over two
	// clouds. Forwarding between the bridges passes, and what arrives on this bridge for
	// a peer's range or a guard CIDR (the pod range the clouds share) is routed by the
	// machine's main table, which holds every cloud's routes (SetRoutes) and guard
	// routes. Each peer's range is guarded here too, so that nothing sent to it leaves
	// the machine once the peer is gone.
	Peers []Peer
	// GuardMetric is the metric of the guard routes; default DefaultGuardMetric. Peers
	// that guard the same CIDRs need a metric each, so that each removes only its own.
	GuardMetric int
	// StopTimeout is how long a stopping host's boot process has after SIGTERM before
	// every process of the host is killed. Default DefaultStopTimeout.
	StopTimeout time.Duration
	// RestartBackoff is the first wait before a boot command that exited is started
	// again; the wait doubles up to MaxRestartBackoff and starts over after a boot that
	// lasted MaxRestartBackoff. Defaults DefaultRestartBackoff, DefaultMaxRestartBackoff.
	RestartBackoff, MaxRestartBackoff time.Duration
	// MaxLogSize caps each host's boot log: once it is larger (the machine looks every
	// few seconds, and at each boot), its content moves to boot.log.1, replacing the one
	// before. Default DefaultMaxLogSize.
	MaxLogSize int64
	// VIPPool, when set, turns on the machine's load balancer data plane: load balancer
	// VIPs come from it, and SetLoadBalancers routes their connections to hosts,
	// unchanged (see vip.go). IPv4, outside 127.0.0.0/8, at most a /30, overlapping
	// neither Range nor a guard nor a route of the machine's. Its last address but the
	// broadcast one (VIPSource) is the machine's own source address for VIP traffic and
	// never a VIP.
	VIPPool netip.Prefix
	// Owner names what the directory's hosts belong to, such as a local cloud's state
	// file: Open records it in the journal and refuses a directory recorded for another
	// owner (an OwnerError), whose hosts Reconcile would otherwise remove as unknown.
	// Empty accepts any directory.
	Owner string
	// Logger receives the machine's logs.
	Logger logr.Logger
}

// Peer is another local cloud's network on the machine (Config.Peers).
type Peer struct {
	// Bridge is the peer's bridge.
	Bridge string
	// Range is the peer's instance range.
	Range netip.Prefix
}

// guardedRange is a range the machine guards, and what it is, for messages.
type guardedRange struct {
	prefix netip.Prefix
	what   string
}

// guarded returns every range the machine keeps from leaving it, each with an
// unreachable route: the instance range, the guard CIDRs, the VIP pool and the peers'
// ranges (their own routes are the peers').
func (c *Config) guarded() []guardedRange {
	out := []guardedRange{{c.Range, "instance range"}}
	for _, g := range c.Guards {
		out = append(out, guardedRange{g, "guard CIDR"})
	}
	if c.VIPPool.IsValid() {
		out = append(out, guardedRange{c.VIPPool, "VIP pool"})
	}
	for _, p := range c.Peers {
		out = append(out, guardedRange{p.Range, "peer " + p.Bridge + "'s range"})
	}
	return out
}

// DefaultGuardMetric is the default Config.GuardMetric: higher than any route the
// kernel or the machine adds, so the bridge's own connected route for the instance range
// wins while the bridge is up, and the guard catches everything else.
const DefaultGuardMetric = 4242

// complete checks the configuration and fills in the defaults.
func (c *Config) complete() error {
	if c.Dir == "" {
		return errors.New("the host directory is required")
	}
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return fmt.Errorf("host directory %s: %w", c.Dir, err)
	}
	c.Dir = dir
	if c.Bridge == "" {
		c.Bridge = DefaultBridge
	}
	if err := ValidateBridgeName(c.Bridge); err != nil {
		return err
	}
	if err := ValidateRange(c.Range); err != nil {
		return err
	}
	c.Range = c.Range.Masked()
	guards := map[netip.Prefix]bool{}
	for _, g := range c.Guards {
		if !g.IsValid() || !g.Addr().Is4() {
			return fmt.Errorf("guard CIDR %s: want an IPv4 CIDR", g)
		}
		if g.Bits() == 0 {
			return fmt.Errorf("guard CIDR %s would make the whole IPv4 space unreachable", g)
		}
		if g.Overlaps(c.Range) {
			// A route into a guard inside the range would be more specific than the
			// bridge's own route and take other hosts' addresses away from them.
			return fmt.Errorf("guard CIDR %s overlaps the instance range %s: guard the pod and Service ranges, which must lie outside it", g, c.Range)
		}
		guards[g.Masked()] = true
	}
	c.Guards = slices.SortedFunc(maps.Keys(guards), comparePrefix)
	c.Peers = slices.Clone(c.Peers)
	seen := map[string]bool{}
	for i, p := range c.Peers {
		if err := ValidateBridgeName(p.Bridge); err != nil {
			return fmt.Errorf("peer %s: %w", p.Bridge, err)
		}
		switch {
		case p.Bridge == c.Bridge:
			return fmt.Errorf("peer %s: the bridge is this cloud's own", p.Bridge)
		case seen[p.Bridge]:
			return fmt.Errorf("peer %s: named twice", p.Bridge)
		}
		seen[p.Bridge] = true
		if err := ValidateRange(p.Range); err != nil {
			return fmt.Errorf("peer %s: %w", p.Bridge, err)
		}
		c.Peers[i].Range = p.Range.Masked()
		for _, q := range append([]netip.Prefix{c.Range}, c.Guards...) {
			if q.Overlaps(p.Range) {
				return fmt.Errorf("peer %s: its range %s overlaps %s of this cloud's", p.Bridge, p.Range, q)
			}
		}
		for _, q := range c.Peers[:i] {
			if q.Range.Overlaps(p.Range) {
				return fmt.Errorf("peer %s: its range %s overlaps peer %s's %s", p.Bridge, p.Range, q.Bridge, q.Range)
			}
		}
	}
	if c.GuardMetric == 0 {
		c.GuardMetric = DefaultGuardMetric
	}
	if c.GuardMetric < 1 || c.GuardMetric > math.MaxInt32 {
		return fmt.Errorf("guard metric %d: want 1 to %d", c.GuardMetric, math.MaxInt32)
	}
	if c.VIPPool.IsValid() {
		if err := ValidateVIPPool(c.VIPPool); err != nil {
			return err
		}
		c.VIPPool = c.VIPPool.Masked()
		others := append([]netip.Prefix{c.Range}, c.Guards...)
		for _, p := range c.Peers {
			others = append(others, p.Range)
		}
		for _, p := range others {
			if p.Overlaps(c.VIPPool) {
				return fmt.Errorf("VIP pool %s overlaps %s: VIPs must be addresses no host, pod or Service has", c.VIPPool, p)
			}
		}
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	if c.RestartBackoff <= 0 {
		c.RestartBackoff = DefaultRestartBackoff
	}
	if c.MaxRestartBackoff <= 0 {
		c.MaxRestartBackoff = DefaultMaxRestartBackoff
	}
	if c.MaxLogSize <= 0 {
		c.MaxLogSize = DefaultMaxLogSize
	}
	if c.MaxRestartBackoff < c.RestartBackoff {
		c.MaxRestartBackoff = c.RestartBackoff
	}
	return nil
}

// ValidateBridgeName checks a bridge name: an interface name of letters, digits, '-',
// '_' and '.', at most 15 characters.
func ValidateBridgeName(name string) error {
	if name == "" || len(name) > 15 {
		return fmt.Errorf("bridge name %q: want 1-15 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("bridge name %q: want letters, digits, '-', '_' and '.'", name)
		}
	}
	return nil
}

// ValidateRange checks an instance range for hosts.
func ValidateRange(p netip.Prefix) error {
	switch {
	case !p.IsValid() || !p.Addr().Is4():
		return fmt.Errorf("instance range %s: host instances need an IPv4 range such as %s", p, DefaultRange)
	case p.Bits() > 30:
		return fmt.Errorf("instance range %s: too small for a gateway and a host; want at most a /30", p)
	case p.Bits() == 0:
		return fmt.Errorf("instance range %s: want a range of the project's own such as %s", p, DefaultRange)
	case loopback.Overlaps(p):
		return fmt.Errorf("instance range %s: host instances need a range outside 127.0.0.0/8 (Linux routes it all to lo), such as %s", p, DefaultRange)
	}
	return nil
}

// Gateway returns the bridge's address in the instance range: its first address.
func Gateway(r netip.Prefix) netip.Addr { return r.Masked().Addr().Next() }

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// Names of what a machine makes. Instance IDs are unique per cloud and bridges per
// machine, so the pair is unique per machine; veths are named after the host's address,
// which is unique because instance ranges may not overlap.

func netnsName(bridge, id string) string { return bridge + "-" + id }

func vethName(addr netip.Addr) string {
	a := addr.As4()
	return fmt.Sprintf("nv%02x%02x%02x%02x", a[0], a[1], a[2], a[3])
}

func chainName(bridge string) string { return "NEPHELE-FWD-" + bridge }

func cgroupPath(bridge, id string) string { return cgroupRoot + "/" + bridge + "/" + id }

// ValidateID checks that an instance ID can name a namespace, a cgroup and a directory.
func ValidateID(id string) error {
	if id == "" || len(id) > 64 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" || id[0] == '-' {
		return fmt.Errorf("instance ID %q: want lower-case letters, digits and '-'", id)
	}
	return nil
}

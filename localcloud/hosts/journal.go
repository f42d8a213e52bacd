package hosts

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/nephele-dev/nephele/internal/atomicfile"
)

// journalVersion is written into new journals; a newer one is refused rather than misread.
// Version 2 added the load balancer data plane (networkRecord.VIP) and version 3 the
// volumes' loop devices (Disks), which an older cloud would not know to remove.
const journalVersion = 3

// journalName and lockName are files in the machine's directory.
const (
	journalName = "journal.json"
	lockName    = "lock"
)

// journal is the durable record of every change a Machine made to the machine. Each
// change is written here before it is made, so after a crash the journal names a superset
// of what exists, and undoing it is idempotent.
type journal struct {
	Version int `json:"version"`
	// Owner is what the hosts belong to (Config.Owner), once one was given.
	Owner   string                 `json:"owner,omitempty"`
	Network *networkRecord         `json:"network,omitempty"`
	Hosts   map[string]*hostRecord `json:"hosts,omitempty"`
	// CreatedDirs are directories created on the machine's file system as mount points
	// of private paths; they are removed, if empty, once no host is up.
	CreatedDirs []string `json:"createdDirs,omitempty"`
	// Disks are the volumes attached to hosts, by volume ID: a loop device over the
	// volume's file and a link to it in the host's directory.
	Disks map[string]*diskRecord `json:"disks,omitempty"`
}

// networkRecord is the shared network: the bridge, its guards and the routes on the
// machine.
type networkRecord struct {
	Bridge string `json:"bridge"`
	// Gateway is the bridge's address with the instance range's length, "10.88.0.1/16".
	Gateway string `json:"gateway"`
	// Guards are the CIDRs with an unreachable route of GuardMetric on the machine.
	Guards      []string `json:"guards,omitempty"`
	GuardMetric int      `json:"guardMetric"`
	// Chain is the iptables chain jumped to from FORWARD.
	Chain string `json:"chain,omitempty"`
	// Table is the routing table of everything that arrives on the bridge, looked up
	// by a rule of RulePriority: the instance range, the route table, and a default
	// route into Sink, an interface that drops whatever reaches it, so nothing from
	// the hosts has a route off the machine.
	Table        uint32 `json:"table,omitempty"`
	RulePriority int    `json:"rulePriority,omitempty"`
	Sink         string `json:"sink,omitempty"`
	// PeerRules are the destinations ("10.89.0.0/24") of the rules, of
	// PeerRulePriority, that route what arrives on the bridge for them by the main
	// table: the peers' ranges and the guards (Config.Peers).
	PeerRules        []string `json:"peerRules,omitempty"`
	PeerRulePriority int      `json:"peerRulePriority,omitempty"`
	// NSDir is the directory holding the hosts' mount and UTS namespace files,
	// bind-mounted on itself and made private (a namespace file cannot live on a shared
	// mount).
	NSDir string `json:"nsDir,omitempty"`
	// Routes are the routes installed on the machine (SetRoutes).
	Routes []Route `json:"routes,omitempty"`
	// VIP is the load balancer data plane, when the machine has a VIP pool.
	VIP *vipRecord `json:"vip,omitempty"`
}

// hostRecord is one host. Up is set while its namespaces exist.
type hostRecord struct {
	ID   string    `json:"id"`
	Name string    `json:"name"`
	Dir  string    `json:"dir"`
	Up   *upRecord `json:"up,omitempty"`
}

// upRecord names everything of a host that is up.
type upRecord struct {
	NetNS   string `json:"netns"`
	Veth    string `json:"veth"`
	Address string `json:"address"`
	MountNS string `json:"mountns"`
	UTSNS   string `json:"utsns"`
	// Cgroup is the host's cgroup path relative to each hierarchy's root.
	Cgroup string `json:"cgroup"`
	// BootPID and BootStart identify the running boot process (0 when none).
	BootPID   int    `json:"bootPID,omitempty"`
	BootStart uint64 `json:"bootStart,omitempty"`
	// Routes are the routes installed in the host's network namespace.
	Routes []Route `json:"routes,omitempty"`
}

// empty reports whether the journal records nothing left on the machine but host
// directories.
func (j *journal) empty() bool {
	if j.Network != nil || len(j.CreatedDirs) > 0 || len(j.Disks) > 0 {
		return false
	}
	for _, h := range j.Hosts {
		if h.Up != nil {
			return false
		}
	}
	return true
}

// loadJournal reads the journal in dir; a missing file is an empty journal.
func loadJournal(dir string) (*journal, error) {
	path := filepath.Join(dir, journalName)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &journal{Version: journalVersion, Hosts: map[string]*hostRecord{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the host journal: %w", err)
	}
	var j journal
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("decoding the host journal %s: %w", path, err)
	}
	if j.Version > journalVersion {
		return nil, fmt.Errorf("host journal %s has version %d; this localcloud understands version %d or older", path, j.Version, journalVersion)
	}
	if j.Hosts == nil {
		j.Hosts = map[string]*hostRecord{}
	}
	if err := j.validate(dir); err != nil {
		return nil, err
	}
	return &j, nil
}

// save writes the journal atomically and durably: a crash leaves the old or the new one.
func (j *journal) save(dir string) error {
	j.Version = journalVersion
	raw, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the host journal: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, journalName), append(raw, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing the host journal: %w", err)
	}
	return nil
}

// lockDir takes the exclusive lock of a machine directory, so that one process at a time
// changes what its journal records.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking host directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("host directory %s is in use by another local cloud", dir)
		}
		return nil, fmt.Errorf("locking host directory %s: %w", dir, err)
	}
	return f, nil
}

// systemDirs are directories no host's private path creates: a journal that says a
// local cloud created one is not one of its journals.
var systemDirs = []string{"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/media", "/mnt", "/opt",
	"/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var", "/var/lib", "/var/log", "/var/run", "/var/tmp"}

// reservedTables are the kernel's routing tables (unspec, default, main, local) and the
// range below 256 that other software numbers its tables in; nephele's tables are
// addresses read as numbers, above all of them.
const maxReservedTable = 255

// validate checks every entry against what a Machine in dir would have written, before
// anything acts on it as root. Cleanup and Open delete links, flush routing tables and
// iptables chains, unmount and remove directories by what the journal names: a journal
// someone else wrote, or a damaged one, must not name the main table, INPUT, eth0 or /.
// Every name is derived again from the recorded bridge, gateway, host IDs and addresses
// and must match; every path must be the one a Machine makes inside dir.
func (j *journal) validate(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	table := func(field string, got, want uint32) {
		if got <= maxReservedTable || got != want {
			bad(field, "routing table %d, not the %d a local cloud makes", got, want)
		}
	}
	samePath := func(field, got, want string) {
		g, err := filepath.Abs(got)
		if err != nil || g != want {
			bad(field, "%q, not %q", got, want)
		}
	}
	bridge := ""
	nsDir := ""
	if n := j.Network; n != nil {
		bridge, nsDir = n.Bridge, n.NSDir
		if err := ValidateBridgeName(n.Bridge); err != nil {
			bad("network.bridge", "%v", err)
		}
		gw, err := netip.ParsePrefix(n.Gateway)
		gwOK := err == nil && gw.Addr().Is4()
		if !gwOK {
			bad("network.gateway", "%q is not an IPv4 address with its prefix length", n.Gateway)
		} else {
			if n.Table != 0 {
				table("network.table", n.Table, tableID(gw.Addr()))
			}
			if n.Sink != "" && n.Sink != sinkName(gw.Addr()) {
				bad("network.sink", "%q, not %q", n.Sink, sinkName(gw.Addr()))
			}
		}
		if n.RulePriority != 0 && n.RulePriority != bridgeRulePriority {
			bad("network.rulePriority", "%d, not %d", n.RulePriority, bridgeRulePriority)
		}
		if n.Chain != "" && n.Chain != chainName(n.Bridge) {
			bad("network.chain", "%q, not %q", n.Chain, chainName(n.Bridge))
		}
		if n.NSDir != "" {
			samePath("network.nsDir", n.NSDir, filepath.Join(abs, nsDirName))
		}
		var guards []netip.Prefix
		for i, g := range n.Guards {
			p, err := netip.ParsePrefix(g)
			if err != nil {
				bad(fmt.Sprintf("network.guards[%d]", i), "%q is not a CIDR", g)
				continue
			}
			guards = append(guards, p)
		}
		// The machine's routes send a guarded destination to a host: never anything
		// else (a default route, the machine's own network).
		for i, r := range n.Routes {
			field := fmt.Sprintf("network.routes[%d]", i)
			if !slices.ContainsFunc(guards, func(g netip.Prefix) bool {
				return g.Contains(r.Destination.Addr()) && g.Bits() <= r.Destination.Bits()
			}) {
				bad(field+".destination", "%s is inside no guard CIDR %v", r.Destination, n.Guards)
			}
			if !gwOK || !gw.Masked().Contains(r.Via) || r.Via == gw.Addr() {
				bad(field+".via", "%s is no host address of the instance range %s", r.Via, n.Gateway)
			}
		}
		if v := n.VIP; v != nil {
			pool, err := netip.ParsePrefix(v.Pool)
			if err != nil || !pool.Addr().Is4() {
				bad("network.vip.pool", "%q is not an IPv4 CIDR", v.Pool)
			}
			if gwOK {
				table("network.vip.rejectTable", v.RejectTable, addrNum(gw.Masked().Addr()))
			}
			if v.RulePriority != vipRulePriority {
				bad("network.vip.rulePriority", "%d, not %d", v.RulePriority, vipRulePriority)
			}
			if v.MangleChain != mangleChainName(n.Bridge) {
				bad("network.vip.mangleChain", "%q, not %q", v.MangleChain, mangleChainName(n.Bridge))
			}
			if v.FilterChain != filterChainName(n.Bridge) {
				bad("network.vip.filterChain", "%q, not %q", v.FilterChain, filterChainName(n.Bridge))
			}
			// Empty in a journal from before the chain existed.
			if v.NATChain != "" && v.NATChain != filterChainName(n.Bridge) {
				bad("network.vip.natChain", "%q, not %q", v.NATChain, filterChainName(n.Bridge))
			}
			for i, c := range v.Chains {
				if h, ok := strings.CutPrefix(c, "NEPHELE-LB-"); !ok || len(h) != 16 || strings.Trim(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") != "" {
					bad(fmt.Sprintf("network.vip.chains[%d]", i), "%q is not a load balancer chain of a local cloud (NEPHELE-LB- and 16 base32 letters)", c)
				}
			}
			for i, nd := range v.Nodes {
				if !nd.Addr.Is4() {
					bad(fmt.Sprintf("network.vip.nodes[%d].addr", i), "%q is not an IPv4 address", nd.Addr)
					continue
				}
				table(fmt.Sprintf("network.vip.nodes[%d].table", i), nd.Table, addrNum(nd.Addr))
			}
		}
	}
	for key, h := range j.Hosts {
		field := fmt.Sprintf("hosts[%q]", key)
		if h == nil {
			bad(field, "empty")
			continue
		}
		if err := ValidateID(h.ID); err != nil || h.ID != key {
			bad(field+".id", "%q: want the key, an instance ID", h.ID)
			continue
		}
		samePath(field+".dir", h.Dir, HostDir(abs, h.ID))
		if up := h.Up; up != nil {
			addr, err := netip.ParsePrefix(up.Address)
			if err != nil || !addr.Addr().Is4() {
				bad(field+".up.address", "%q is not an IPv4 address with its prefix length", up.Address)
			} else if up.Veth != vethName(addr.Addr()) {
				bad(field+".up.veth", "%q, not %q", up.Veth, vethName(addr.Addr()))
			}
			if up.NetNS != netnsName(bridge, h.ID) {
				bad(field+".up.netns", "%q, not %q", up.NetNS, netnsName(bridge, h.ID))
			}
			if up.Cgroup != cgroupPath(bridge, h.ID) {
				bad(field+".up.cgroup", "%q, not %q", up.Cgroup, cgroupPath(bridge, h.ID))
			}
			if nsDir != "" {
				samePath(field+".up.mountns", up.MountNS, mountNSFile(nsDir, h.ID))
				samePath(field+".up.utsns", up.UTSNS, utsNSFile(nsDir, h.ID))
			}
		}
	}
	for key, d := range j.Disks {
		if err := d.validate(key); err != nil {
			bad(fmt.Sprintf("disks[%q]", key), "%v", err)
		}
	}
	for i, d := range j.CreatedDirs {
		// Removed with every empty directory below it: never one of the system's own.
		if !filepath.IsAbs(d) || filepath.Clean(d) != d || slices.Contains(systemDirs, d) {
			bad(fmt.Sprintf("createdDirs[%d]", i), "%q is not an absolute, clean path below the system's own directories", d)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("the host journal in %s names what a local cloud would not have made; nothing was changed on the machine. "+
			"Remove what it records by hand, then the journal: %w", dir, errors.Join(errs...))
	}
	return nil
}

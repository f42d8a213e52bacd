package hosts

import (
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
)

// validJournal is what a Machine in dir with one host up and a VIP data plane records.
func validJournal(dir string) *journal {
	gw := netip.MustParseAddr("10.250.40.1")
	host := netip.MustParseAddr("10.250.40.2")
	br := "nphj40"
	ns := filepath.Join(dir, nsDirName)
	return &journal{
		Version: journalVersion,
		Network: &networkRecord{
			Bridge: br, Gateway: "10.250.40.1/24", Guards: []string{"10.251.40.0/24", "10.244.0.0/16"}, GuardMetric: 4242,
			Chain: chainName(br), Table: tableID(gw), RulePriority: bridgeRulePriority, Sink: sinkName(gw), NSDir: ns,
			Routes: []Route{{Destination: netip.MustParsePrefix("10.244.1.0/24"), Via: host}},
			VIP: &vipRecord{
				Pool: "10.87.40.0/24", Source: "10.87.40.254/24", Mask: vipMarkMask, RejectMark: 1 << vipMarkShift,
				RejectTable: addrNum(netip.MustParseAddr("10.250.40.0")), RulePriority: vipRulePriority,
				MangleChain: mangleChainName(br), NATChain: filterChainName(br), FilterChain: filterChainName(br),
				Chains: []string{"NEPHELE-LB-" + hashName(br+"/web")},
				Nodes:  []vipNode{{Addr: host, Mark: 2 << vipMarkShift, Table: addrNum(host)}},
			},
		},
		Hosts: map[string]*hostRecord{"i-000000000001": {
			ID: "i-000000000001", Name: "node-1", Dir: HostDir(dir, "i-000000000001"),
			Up: &upRecord{
				NetNS: netnsName(br, "i-000000000001"), Veth: vethName(host), Address: "10.250.40.2/24",
				MountNS: filepath.Join(ns, "i-000000000001.mnt"), UTSNS: filepath.Join(ns, "i-000000000001.uts"),
				Cgroup: cgroupPath(br, "i-000000000001"),
			},
		}},
		Disks: map[string]*diskRecord{"vol-000000000001": {
			Volume: "vol-000000000001", Host: "i-000000000001", File: "/var/lib/cloud/state.db.volumes/vol-000000000001.img", Device: "/dev/loop7",
		}},
	}
}

// TestJournalRefusesWhatNepheleWouldNotMake: a journal is checked entry by entry
// against the names a Machine makes before Open or Cleanup act on it as root; each
// forgery below would have made Cleanup flush the main routing table or INPUT, delete
// eth0, or remove a directory outside the host directory.
func TestJournalRefusesWhatNepheleWouldNotMake(t *testing.T) {
	host := func(j *journal) *hostRecord { return j.Hosts["i-000000000001"] }
	tests := []struct {
		name  string
		forge func(j *journal)
		field string // "" for a journal that must load
	}{
		{"as a Machine writes it", func(*journal) {}, ""},
		{"no network", func(j *journal) { j.Network = nil; host(j).Up = nil }, ""},
		{"the main table", func(j *journal) { j.Network.Table = 254 }, "network.table"},
		{"a gateway whose number is the main table", func(j *journal) {
			j.Network.Gateway, j.Network.Table = "0.0.0.254/24", 254
		}, "network.table"},
		{"another table", func(j *journal) { j.Network.Table++ }, "network.table"},
		{"INPUT as the forward chain", func(j *journal) { j.Network.Chain = "INPUT" }, "network.chain"},
		{"eth0 as the sink", func(j *journal) { j.Network.Sink = "eth0" }, "network.sink"},
		{"a bad bridge name", func(j *journal) { j.Network.Bridge = "br0;reboot" }, "network.bridge"},
		{"the namespace directory elsewhere", func(j *journal) { j.Network.NSDir = "/proc" }, "network.nsDir"},
		{"a guard that is not a CIDR", func(j *journal) { j.Network.Guards = []string{"default"} }, "network.guards[0]"},
		{"the VIP reject table is main", func(j *journal) { j.Network.VIP.RejectTable = 254 }, "network.vip.rejectTable"},
		{"a VIP node's table is local", func(j *journal) { j.Network.VIP.Nodes[0].Table = 255 }, "network.vip.nodes[0].table"},
		{"filter INPUT as the VIP chain", func(j *journal) { j.Network.VIP.FilterChain = "INPUT" }, "network.vip.filterChain"},
		{"a load balancer chain that is not ours", func(j *journal) { j.Network.VIP.Chains = []string{"OUTPUT"} }, "network.vip.chains[0]"},
		{"the VIP rule priority", func(j *journal) { j.Network.VIP.RulePriority = 0 }, "network.vip.rulePriority"},
		{"a host directory of /", func(j *journal) { host(j).Dir = "/" }, `hosts["i-000000000001"].dir`},
		{"a host directory outside", func(j *journal) { host(j).Dir = "/var/lib/kubelet" }, `hosts["i-000000000001"].dir`},
		{"a host ID that is a path", func(j *journal) {
			j.Hosts["../.."] = &hostRecord{ID: "../..", Dir: "/"}
		}, `hosts["../.."].id`},
		{"eth0 as a host's veth", func(j *journal) { host(j).Up.Veth = "eth0" }, `hosts["i-000000000001"].up.veth`},
		{"another namespace", func(j *journal) { host(j).Up.NetNS = "cni-1234" }, `hosts["i-000000000001"].up.netns`},
		{"a cgroup outside /nephele", func(j *journal) { host(j).Up.Cgroup = "/system.slice" }, `hosts["i-000000000001"].up.cgroup`},
		{"a mount namespace file outside", func(j *journal) { host(j).Up.MountNS = "/proc/1/ns/mnt" }, `hosts["i-000000000001"].up.mountns`},
		{"a journal from before the NAT chain", func(j *journal) { j.Network.VIP.NATChain = "" }, ""},
		{"a created mount point", func(j *journal) { j.CreatedDirs = []string{"/var/lib/kubelet"} }, ""},
		{"the machine's default route", func(j *journal) {
			j.Network.Routes = []Route{{Destination: netip.MustParsePrefix("0.0.0.0/0"), Via: netip.MustParseAddr("10.250.40.2")}}
		}, "network.routes[0].destination"},
		{"a route via the machine's network", func(j *journal) { j.Network.Routes[0].Via = netip.MustParseAddr("192.168.1.1") }, "network.routes[0].via"},
		{"a route via the bridge itself", func(j *journal) { j.Network.Routes[0].Via = netip.MustParseAddr("10.250.40.1") }, "network.routes[0].via"},
		{"another bridge's top chain", func(j *journal) { j.Network.VIP.Chains = []string{"NEPHELE-LB-nphother"} }, "network.vip.chains[0]"},
		{"a reject table of another range", func(j *journal) { j.Network.VIP.RejectTable++ }, "network.vip.rejectTable"},
		{"/run as a created directory", func(j *journal) { j.CreatedDirs = []string{"/run"} }, "createdDirs[0]"},
		{"a relative created directory", func(j *journal) { j.CreatedDirs = []string{"var/lib/x"} }, "createdDirs[0]"},
		{"/ as a created directory", func(j *journal) { j.CreatedDirs = []string{"/"} }, "createdDirs[0]"},
		{"a disk being bound", func(j *journal) { j.Disks["vol-000000000001"].Device = "" }, ""},
		{"a disk device that is no loop device", func(j *journal) { j.Disks["vol-000000000001"].Device = "/dev/sda" }, `disks["vol-000000000001"]`},
		{"a disk file that is no volume's", func(j *journal) { j.Disks["vol-000000000001"].File = "/etc/shadow" }, `disks["vol-000000000001"]`},
		{"a relative disk file", func(j *journal) {
			j.Disks["vol-000000000001"].File = "../vol-000000000001.img"
		}, `disks["vol-000000000001"]`},
		{"a disk under another key", func(j *journal) { j.Disks["vol-000000000002"] = j.Disks["vol-000000000001"] }, `disks["vol-000000000002"]`},
		{"a disk of a host that is a path", func(j *journal) { j.Disks["vol-000000000001"].Host = "../.." }, `disks["vol-000000000001"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			j := validJournal(dir)
			tt.forge(j)
			writeJournal(t, dir, j)
			_, err := loadJournal(dir)
			switch {
			case tt.field == "" && err != nil:
				t.Fatalf("a journal a Machine writes is refused: %v", err)
			case tt.field != "" && (err == nil || !strings.Contains(err.Error(), tt.field+":")):
				t.Fatalf("loadJournal = %v, want a refusal naming %s", err, tt.field)
			}
		})
	}
}

// TestCleanupLeavesWhatAForgedJournalNames: Cleanup of a directory whose journal names
// a directory outside it (as a user who could write the state directory would plant)
// refuses before touching anything, and the directory survives. Needs no root: the
// check comes before any change.
func TestCleanupLeavesWhatAForgedJournalNames(t *testing.T) {
	dir, victim := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(victim, "precious"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	j := validJournal(dir)
	j.Network = nil
	j.Hosts["i-000000000001"].Up = nil
	j.Hosts["i-000000000001"].Dir = victim
	writeJournal(t, dir, j)
	err := Cleanup(t.Context(), dir, logr.Discard())
	if err == nil || !strings.Contains(err.Error(), "nothing was changed") {
		t.Errorf("Cleanup = %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(victim, "precious")); err != nil {
		t.Errorf("Cleanup removed a directory the journal named outside the host directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, journalName)); err != nil {
		t.Errorf("the refused journal is gone: %v", err)
	}
}

func writeJournal(t *testing.T, dir string, j *journal) {
	t.Helper()
	raw, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, journalName), raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCleanupLeavesALinkThatIsNoBridge runs as root: a journal whose bridge names an
// interface that is not a bridge (as a machine's eth0 is not) passes the journal's
// checks, which cannot know the machine's links, but Cleanup leaves that link alone.
func TestCleanupLeavesALinkThatIsNoBridge(t *testing.T) {
	hoststest.RequireRoot(t)
	const link, peer = "nphjtst0", "nphjtst1"
	if out, err := exec.Command("ip", "link", "add", link, "type", "veth", "peer", "name", peer).CombinedOutput(); err != nil {
		t.Fatalf("ip link add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", link).Run() })
	dir := t.TempDir()
	j := validJournal(dir)
	j.Network.Bridge = link
	j.Network.Chain, j.Network.VIP = chainName(link), nil
	j.Hosts = nil
	writeJournal(t, dir, j)
	err := Cleanup(t.Context(), dir, logr.Discard())
	if err == nil || !strings.Contains(err.Error(), link+" is not a bridge") {
		t.Errorf("Cleanup = %v, want it to say %s is not a bridge", err, link)
	}
	if _, err := os.Stat("/sys/class/net/" + link); err != nil {
		t.Errorf("Cleanup deleted %s, which is not a bridge: %v", link, err)
	}
}

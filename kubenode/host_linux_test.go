package kubenode

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/cgroupfs"
	"github.com/nephele-dev/nephele/internal/mountinfo"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/localcloud/hosts"
)

// The test's host machine: a bridge, an instance range and a pod range of its own,
// outside every default of nephele's (hosts.DefaultRange, the default pod and Service
// ranges) and every other test's, so that neither a running cluster nor another test
// meets its routes. The pod range is the machine's guard: a route to a node's pods is
// allowed only inside it, and nothing in it can leave the machine.
const (
	testBridge      = "nphkubenode"
	testRange       = "10.247.0.0/24"
	testClusterCIDR = "10.245.0.0/16"
)

// testNodeIP is the address of the test's host.
var testNodeIP = netip.MustParseAddr("10.247.0.2")

// openMachine opens the test's host machine in dir, as a local cloud does; it is
// closed, cleaned up and checked to have left the machine as it was when the test ends.
func openMachine(t *testing.T, dir string) *hosts.Machine {
	t.Helper()
	hoststest.RequireRoot(t)
	markers := []string{testBridge, "10.247.0.", "10.245.", "nv0af700", "nd0af700", dir}
	before := hoststest.Snapshot(t, markers...)
	forward := hoststest.Sysctl(t, "net/ipv4/ip_forward")
	m, err := hosts.Open(t.Context(), hosts.Config{
		Dir:    dir,
		Bridge: testBridge,
		Range:  netip.MustParsePrefix(testRange),
		Guards: []netip.Prefix{netip.MustParsePrefix(testClusterCIDR)},
		Logger: testlog.New(t, 0),
	})
	if err != nil {
		t.Fatalf("opening the host machine: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hosts.DefaultStopTimeout+time.Minute)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("closing the host machine: %v", err)
		}
		if err := hosts.Cleanup(ctx, dir, testlog.New(t, 0)); err != nil {
			t.Errorf("cleaning up the host machine: %v", err)
		}
		if after := hoststest.Snapshot(t, markers...); after != before {
			t.Errorf("the machine changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		if got := hoststest.Sysctl(t, "net/ipv4/ip_forward"); got != forward {
			t.Errorf("net.ipv4.ip_forward is %s, was %s", got, forward)
		}
	})
	return m
}

// observer is a process holding a host's network and mount namespaces from outside its
// cgroup, so that they outlive the host's stop and the test can look at what the node
// left in them.
type observer struct {
	p *proctest.Process
	// net and mnt are the namespaces' identities, e.g. "net:[4026532301]".
	net, mnt string
}

// observe starts an observer of the host whose status is st.
func observe(t *testing.T, st hosts.Status) *observer {
	t.Helper()
	p := proctest.Exec(t, "observer", "nsenter", "--net="+st.NetNS, "--mount="+st.MountNS, "--", "sleep", "infinity")
	o := &observer{p: p}
	proc := "/proc/" + strconv.Itoa(p.Pid()) + "/ns/"
	poll.Eventually(t, "the observer to enter the host's namespaces", func() error {
		for _, ns := range []struct{ file, host string }{{"net", st.NetNS}, {"mnt", st.MountNS}} {
			if !sameFile(proc+ns.file, ns.host) {
				return fmt.Errorf("process %d is not in %s yet", p.Pid(), ns.host)
			}
		}
		return nil
	})
	var err error
	if o.net, err = os.Readlink(proc + "net"); err == nil {
		o.mnt, err = os.Readlink(proc + "mnt")
	}
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// sameFile reports whether two paths are the same inode: a process's namespace and a
// namespace file.
func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// run runs a command in the observed network namespace.
func (o *observer) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	args = append([]string{"--target", strconv.Itoa(o.p.Pid()), "--net", "--", name}, args...)
	out, err := exec.Command("nsenter", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("nsenter %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// processes returns the processes in the observed namespaces, other than the observer.
func (o *observer) processes() []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == o.p.Pid() {
			continue
		}
		for _, ns := range []struct{ file, want string }{{"net", o.net}, {"mnt", o.mnt}} {
			if got, _ := os.Readlink("/proc/" + e.Name() + "/ns/" + ns.file); got == ns.want {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// mounts returns the observed mount table.
func (o *observer) mounts(t *testing.T) []mountinfo.Mount {
	t.Helper()
	m, err := mountinfo.ReadFile("/proc/" + strconv.Itoa(o.p.Pid()) + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// cgroupDirs returns the directories of cgroup path root that exist in any hierarchy.
func cgroupDirs(t *testing.T, root string) []string {
	t.Helper()
	fs, err := cgroupfs.Discover()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, dir := range fs.Dirs(root) {
		if _, err := os.Stat(dir); err == nil {
			out = append(out, dir)
		}
	}
	return out
}

// bootLog returns host id's boot log from its last line starting with from on ("" for
// all of it).
func bootLog(m *hosts.Machine, id, from string) string {
	raw, _ := os.ReadFile(m.LogPath(id))
	log := string(raw)
	if i := strings.LastIndex(log, from); from != "" && i >= 0 {
		return log[i:]
	}
	return log
}

// selfPath is the test binary's absolute path: a host's boot command runs elsewhere.
func selfPath(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHostInitName keeps the name kubenode looks for as a host's init the one the local
// cloud's hosts run their init under.
func TestHostInitName(t *testing.T) {
	if hostInitName != hosts.InitName {
		t.Errorf("kubenode looks for a host init named %q; localcloud/hosts runs it as %q", hostInitName, hosts.InitName)
	}
}

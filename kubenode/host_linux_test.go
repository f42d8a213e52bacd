package kubenode

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/cgroupfs"
	"github.com/nephele-dev/nephele/internal/mountinfo"
	"github.com/nephele-dev/nephele/internal/poll"
)

// testHost stands in for a local cloud host in this package's tests, until the local
// cloud's own hosts are used: a process holding a network and a mount namespace of
// their own (unshare), a veth pair to the machine with a /30 between them, and a default
// route to the machine inside. Its cleanup kills everything left in its namespaces and
// removes the veth and the routes added through it.
type testHost struct {
	pid    int
	holder *exec.Cmd
	veth   string // the machine's end
	hostIP string // the machine's address on the veth
	nodeIP string // the host's address
	mntNS  string // the holder's namespace identities, e.g. "mnt:[4026532301]"
	netNS  string
	routes []string
}

// newTestHost makes a host whose /30 is hostIP (the machine's side) and nodeIP.
func newTestHost(t *testing.T, hostIP, nodeIP string) *testHost {
	t.Helper()
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	h := &testHost{veth: "kn" + hex.EncodeToString(suffix), hostIP: hostIP, nodeIP: nodeIP}
	h.holder = exec.Command("unshare", "--net", "--mount", "--propagation", "slave", "--", "sleep", "infinity")
	h.holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := h.holder.Start(); err != nil {
		t.Fatalf("start the host's namespace holder: %v", err)
	}
	h.pid = h.holder.Process.Pid
	t.Cleanup(func() { h.destroy(t) })
	self, _ := os.Readlink("/proc/self/ns/net")
	poll.Eventually(t, "the host's namespaces", func() error {
		ns, err := os.Readlink("/proc/" + strconv.Itoa(h.pid) + "/ns/net")
		if err != nil || ns == self {
			return errors.New("unshare has not created them yet")
		}
		h.netNS = ns
		h.mntNS, err = os.Readlink("/proc/" + strconv.Itoa(h.pid) + "/ns/mnt")
		return err
	})
	pid := strconv.Itoa(h.pid)
	run(t, "ip", "link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", pid)
	run(t, "ip", "addr", "add", hostIP+"/30", "dev", h.veth)
	run(t, "ip", "link", "set", h.veth, "up")
	h.run(t, "ip", "link", "set", "lo", "up")
	h.run(t, "ip", "addr", "add", nodeIP+"/30", "dev", "eth0")
	h.run(t, "ip", "link", "set", "eth0", "up")
	h.run(t, "ip", "route", "add", "default", "via", hostIP)
	return h
}

// run runs a command on the machine and fails the test if it fails.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// run runs a command in the host's network namespace.
func (h *testHost) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	return run(t, "nsenter", append([]string{"--target", strconv.Itoa(h.pid), "--net", "--", name}, args...)...)
}

// enter returns the nsenter arguments that run a program in the host's network and
// mount namespaces, as a local cloud host runs its boot command.
func (h *testHost) enter(program ...string) []string {
	return append([]string{"--target", strconv.Itoa(h.pid), "--net", "--mount", "--"}, program...)
}

// addRoute routes dst through the host, as the local cloud's route table will.
func (h *testHost) addRoute(t *testing.T, dst string) {
	t.Helper()
	run(t, "ip", "route", "add", dst, "via", h.nodeIP, "dev", h.veth)
	h.routes = append(h.routes, dst)
}

// processes returns the processes in the host's namespaces, other than its holder.
func (h *testHost) processes() []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == h.pid {
			continue
		}
		for _, ns := range []struct{ file, want string }{{"net", h.netNS}, {"mnt", h.mntNS}} {
			if got, _ := os.Readlink("/proc/" + e.Name() + "/ns/" + ns.file); got == ns.want {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// mounts returns the host's mount table.
func (h *testHost) mounts(t *testing.T) []mountinfo.Mount {
	t.Helper()
	m, err := mountinfo.ReadFile("/proc/" + strconv.Itoa(h.pid) + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// destroy kills what is left in the host, then the holder, and removes the veth and
// routes. It is the test's cleanup; a test may call it early to check the machine after.
func (h *testHost) destroy(t *testing.T) {
	if h.holder == nil {
		return
	}
	for range 50 {
		left := h.processes()
		if len(left) == 0 {
			break
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = h.holder.Process.Kill()
	_ = h.holder.Wait()
	h.holder = nil
	for _, dst := range h.routes {
		_ = exec.Command("ip", "route", "del", dst, "via", h.nodeIP).Run()
	}
	if err := exec.Command("ip", "link", "del", h.veth).Run(); err != nil {
		// Gone with the network namespace, as it should be.
		_ = err
	}
	if out, _ := exec.Command("ip", "link", "show", h.veth).CombinedOutput(); !bytes.Contains(out, []byte("does not exist")) {
		t.Errorf("veth %s still exists after the host was destroyed: %s", h.veth, out)
	}
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

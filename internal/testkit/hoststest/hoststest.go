// Package hoststest helps tests of host instances: it requires root the way the project's
// integration tests require their binaries (a failure under CI=true, a skip with the reason
// elsewhere), runs code inside a host's network namespace, and takes the part of the
// machine's state a test's hosts could leave behind, to compare before and after.
package hoststest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nephele-dev/nephele/internal/cgroupfs"
	"github.com/nephele-dev/nephele/internal/nsrun"
)

// tools are the programs host instances need.
var tools = []string{"ip", "iptables", "iptables-save", "nsenter", "unshare", "mount"}

// RequireRoot stops a test that cannot make hosts: without root, or without the tools
// hosts need. Under CI=true that is a failure naming what is missing; elsewhere the test
// is skipped with the reason.
func RequireRoot(t testing.TB) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (namespaces, a bridge, routes, iptables, mounts and cgroups)")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return
	}
	Unavailable(t, "host instance tests need "+strings.Join(missing, ", ")+"; run them as root on Linux with iproute2, iptables and util-linux installed")
}

// Unavailable ends a test whose dependency (root, a program, a package) is missing, msg
// saying which and how to get it: under CI=true it fails, since CI never skips an
// integration test; elsewhere it skips.
func Unavailable(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: not skipped)")
	}
	t.Skip(msg)
}

// machineNetNS is the network namespace the test binary started in, held open from init,
// when the main thread is certainly still in it: a goroutine that exits while locked to
// the main thread after a setns leaves that thread, and so /proc/self/ns/net, in another
// namespace.
// The file stays referenced here, or its finalizer would close it.
var machineNetNS, machineNetNSErr = os.Open("/proc/thread-self/ns/net")

// MachineNetNS returns a path to the machine's network namespace, the one the test
// binary started in, for InNetNS.
func MachineNetNS() string {
	if machineNetNSErr != nil {
		return "/proc/1/ns/net"
	}
	return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), machineNetNS.Fd())
}

// InNetNS runs fn with a thread in the network namespace at path (such as
// /run/netns/<name>): sockets fn opens belong to that namespace. The thread comes back
// and lives on (nsrun.In says why: a test that entered a namespace on a thread that had
// started the cluster's kube-scheduler killed that scheduler when the thread ended).
func InNetNS(path string, fn func() error) error {
	return nsrun.In(unix.CLONE_NEWNET, path, fn)
}

// Snapshot returns the lines of the machine's state that contain one of markers (a
// bridge name, a directory, a CIDR, a veth prefix): network namespaces, links, routes of
// every table, routing rules, mounts, iptables rules of every table, and cgroup
// directories. Two
// snapshots with the same markers, before and after a test, must be equal.
func Snapshot(t testing.TB, markers ...string) string {
	t.Helper()
	var lines []string
	add := func(what string, text string) {
		sc := bufio.NewScanner(strings.NewReader(text))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			for _, m := range markers {
				if m != "" && strings.Contains(l, m) {
					lines = append(lines, what+": "+strings.TrimSpace(l))
					break
				}
			}
		}
	}
	for _, c := range []struct {
		what string
		args []string
	}{
		{"netns", []string{"ip", "netns", "list"}},
		{"link", []string{"ip", "-o", "link", "show"}},
		{"route", []string{"ip", "-4", "route", "show", "table", "all"}},
		{"rule", []string{"ip", "-4", "rule", "show"}},
		{"iptables", []string{"iptables-save"}},
	} {
		out, err := exec.Command(c.args[0], c.args[1:]...).Output()
		if err != nil {
			t.Fatalf("%s: %v", strings.Join(c.args, " "), err)
		}
		// iptables-save's counters and comments change on their own.
		if c.what == "iptables" {
			out = stripCounters(out)
		}
		add(c.what, string(out))
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	add("mount", string(mounts))
	hierarchies, err := cgroupfs.Discover()
	if err != nil {
		t.Fatal(err)
	}
	var cgroups []string
	for _, dir := range hierarchies.Dirs("/nephele") {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				cgroups = append(cgroups, p)
			}
			return nil
		})
	}
	add("cgroup", strings.Join(cgroups, "\n"))
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func stripCounters(out []byte) []byte {
	var b bytes.Buffer
	for _, l := range bytes.Split(out, []byte("\n")) {
		if len(l) > 0 && (l[0] == '#' || l[0] == ':') {
			continue
		}
		b.Write(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// ServeEnv, in a host's environment, makes a test binary whose TestMain calls Serve a
// server on the address it names.
const ServeEnv = "HOSTSTEST_SERVE"

// Serve, called first in a TestMain, turns the test binary into a server when ServeEnv
// is set, and then never returns: on that address (TCP on its port of every address), it answers
// "<instance name> <client address>" (and then echoes what a TCP client sends, so a
// test can hold a connection open), standing in for kube-proxy and a Service's pods on
// a node. Without ServeEnv it returns at once.
func Serve() {
	addr := os.Getenv(ServeEnv)
	if addr == "" {
		return
	}
	// TCP on every address of the host (the VIP and its own), UDP on addr alone, so
	// that its answers come from the address the datagram was sent to, as kube-proxy's
	// DNAT does.
	_, port, _ := net.SplitHostPort(addr)
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hoststest server:", err)
		os.Exit(1)
	}
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hoststest server:", err)
		os.Exit(1)
	}
	name := os.Getenv("NEPHELE_INSTANCE_NAME")
	go func() {
		buf := make([]byte, 512)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(name+" "+from.(*net.UDPAddr).IP.String()+"\n"), from)
		}
	}()
	fmt.Println("hoststest server serving on", addr)
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		go func() {
			defer func() { _ = c.Close() }()
			if _, err := fmt.Fprintf(c, "%s %s\n", name, c.RemoteAddr().(*net.TCPAddr).IP); err == nil {
				_, _ = io.Copy(c, c)
			}
		}()
	}
}

// Serving is what makes a host a stand-in for a node whose kube-proxy serves VIPs:
// the boot command puts each VIP on the host's loopback interface (as kube-proxy takes
// a VIP's packets for itself) and runs this test binary as Serve's server on port 80 of
// the first, and the environment to give it. The test binary's TestMain must call Serve.
func Serving(vips ...netip.Addr) (boot []string, env map[string]string) {
	var script []string
	for _, v := range vips {
		script = append(script, "ip addr add "+v.String()+"/32 dev lo")
	}
	script = append(script, `exec "$0" -test.run=none`)
	return []string{"sh", "-c", strings.Join(script, " && "), os.Args[0]},
		map[string]string{ServeEnv: netip.AddrPortFrom(vips[0], 80).String()}
}

// Ask connects to addr, where Serve answers, and returns the host that answered and the
// client address it saw.
func Ask(addr netip.AddrPort) (host, client string, err error) {
	c, err := net.DialTimeout("tcp", addr.String(), 3*time.Second)
	if err != nil {
		return "", "", err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", "", err
	}
	host, client, _ = strings.Cut(strings.TrimSpace(line), " ")
	return host, client, nil
}

// AskUDP sends a datagram to addr, where Serve answers, and returns the answer's host
// and client address.
func AskUDP(addr netip.AddrPort) (host, client string, err error) {
	c, err := net.Dial("udp", addr.String())
	if err != nil {
		return "", "", err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("hello\n")); err != nil {
		return "", "", fmt.Errorf("write: %w", err)
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		return "", "", err
	}
	host, client, _ = strings.Cut(strings.TrimSpace(string(buf[:n])), " ")
	return host, client, nil
}

// Answers asks addr n times (Ask) and counts the hosts that answered; every answer must
// have seen the client address want.
func Answers(t testing.TB, addr netip.AddrPort, n int, want netip.Addr) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		host, client, err := Ask(addr)
		if err != nil {
			t.Fatalf("connecting to %s: %v", addr, err)
		}
		if client != want.String() {
			t.Fatalf("%s saw the client as %s, want %s", host, client, want)
		}
		got[host]++
	}
	return got
}

// Sysctl reads a sysctl such as "net/ipv4/ip_forward".
func Sysctl(t testing.TB, name string) string {
	t.Helper()
	raw, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(raw))
}

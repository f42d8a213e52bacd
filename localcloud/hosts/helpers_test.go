package hosts_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/procstat"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/localcloud/hosts"
)

// helperEnv makes the test binary a helper program when set: the boot command of a host
// in the tests that need a server inside it.
const helperEnv = "NEPHELE_HOSTS_TEST_HELPER"

func TestMain(m *testing.M) {
	hoststest.Serve()
	if os.Getenv(helperEnv) == "listen" {
		os.Exit(listen(os.Getenv("HELPER_ADDR")))
	}
	os.Exit(m.Run())
}

// listen serves "hello from <instance name>" on addr until killed.
func listen(addr string) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	fmt.Println("helper listening on", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		_, _ = fmt.Fprintf(c, "hello from %s\n", os.Getenv("NEPHELE_INSTANCE_NAME"))
		_ = c.Close()
	}
}

// testNet is one test's share of the machine: its bridge, ranges and directory. n keeps
// tests (and test binaries running at once) apart.
type testNet struct {
	cfg     hosts.Config
	markers []string
}

func newTestNet(t testing.TB, n int) testNet {
	t.Helper()
	hoststest.RequireRoot(t)
	dir := t.TempDir()
	cfg := hosts.Config{
		Dir:               dir,
		Bridge:            fmt.Sprintf("nphtest%d", n),
		Range:             netip.MustParsePrefix(fmt.Sprintf("10.250.%d.0/24", n)),
		Guards:            []netip.Prefix{netip.MustParsePrefix(fmt.Sprintf("10.251.%d.0/24", n)), netip.MustParsePrefix(fmt.Sprintf("10.252.%d.0/24", n))},
		StopTimeout:       2 * time.Second,
		RestartBackoff:    100 * time.Millisecond,
		MaxRestartBackoff: time.Second,
		Logger:            testlog.New(t, 1),
	}
	return testNet{cfg: cfg, markers: []string{
		cfg.Bridge, dir, fmt.Sprintf("10.250.%d.", n), fmt.Sprintf("10.251.%d.", n), fmt.Sprintf("10.252.%d.", n),
		fmt.Sprintf("nv0afa%02x", n),
	}}
}

// addr returns the i-th address of the test's range.
func (tn testNet) addr(i int) netip.Addr {
	a := tn.cfg.Range.Addr()
	for range i {
		a = a.Next()
	}
	return a
}

// guard returns the i-th address of the test's first guard.
func (tn testNet) guard(i int) netip.Addr {
	a := tn.cfg.Guards[0].Addr()
	for range i {
		a = a.Next()
	}
	return a
}

// checkClean fails the test when the machine holds anything of the test's after fn
// (which ends with the machine closed) that it did not hold before.
func (tn testNet) checkClean(t testing.TB, before string, forward string) {
	t.Helper()
	if after := hoststest.Snapshot(t, tn.markers...); after != before {
		t.Errorf("the machine changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := hoststest.Sysctl(t, "net/ipv4/ip_forward"); got != forward {
		t.Errorf("net.ipv4.ip_forward is %s, was %s", got, forward)
	}
}

// open opens a machine that is closed, and cleaned up, when the test ends.
func (tn testNet) open(t testing.TB) *hosts.Machine {
	t.Helper()
	m, err := hosts.Open(context.Background(), tn.cfg)
	if err != nil {
		t.Fatalf("opening the machine: %v", err)
	}
	t.Cleanup(func() { closeMachine(t, m) })
	return m
}

func closeMachine(t testing.TB, m *hosts.Machine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		t.Errorf("closing the machine: %v", err)
	}
	if err := hosts.Cleanup(ctx, m.Dir(), testlog.New(t, 0)); err != nil {
		t.Errorf("cleaning up: %v", err)
	}
}

// readLog returns a host's boot log.
func readLog(m *hosts.Machine, id string) string {
	raw, _ := os.ReadFile(m.LogPath(id))
	return string(raw)
}

// waitLog waits until the host's boot log contains want.
func waitLog(t testing.TB, m *hosts.Machine, id, want string) {
	t.Helper()
	poll.Eventually(t, fmt.Sprintf("host %s's boot log to say %q", id, want), func() error {
		if log := readLog(m, id); !strings.Contains(log, want) {
			return fmt.Errorf("it holds:\n%s", log)
		}
		return nil
	})
}

// running waits for the host's boot process and returns its PID.
func running(t testing.TB, m *hosts.Machine, id string) int {
	t.Helper()
	var pid int
	poll.Eventually(t, "host "+id+"'s boot process", func() error {
		st, _ := m.Status(id)
		if pid = st.BootPID; st.Phase != hosts.PhaseRunning || pid == 0 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	return pid
}

// gone waits until process pid has ended.
func gone(t testing.TB, what string, pid int) {
	t.Helper()
	poll.Eventually(t, what+" to end", func() error {
		if s, err := procstat.Read(pid); err == nil && s.Alive() {
			return fmt.Errorf("process %d runs: %+v", pid, s)
		}
		return nil
	})
}

// dial connects to addr from inside netns and returns the first line it reads.
func dial(netns string, addr netip.AddrPort, timeout time.Duration) (string, error) {
	var line string
	err := hoststest.InNetNS(netns, func() error {
		c, err := net.DialTimeout("tcp", addr.String(), timeout)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(timeout))
		line, err = bufio.NewReader(c).ReadString('\n')
		return err
	})
	return strings.TrimSpace(line), err
}

// sameFile reports whether two paths are the same inode: a process's namespace and a
// namespace file.
func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

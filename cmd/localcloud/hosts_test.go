package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/nephele-dev/nephele/internal/procstat"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
	"github.com/nephele-dev/nephele/localcloud/api"
)

func TestHostFlagsRejected(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	tokenFile := writeToken(t, dir)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "bridge without hosts", args: []string{"--state", state, "--token-file", tokenFile, "--bridge", "br9"}, want: "need --hosts"},
		{name: "guard without hosts", args: []string{"--state", state, "--token-file", tokenFile, "--guard-cidr", "10.244.0.0/16"}, want: "need --hosts"},
		{name: "bad guard", args: []string{"--state", state, "--token-file", tokenFile, "--hosts", "--guard-cidr", "10.244.0.0"}, want: "--guard-cidr"},
		{name: "guard of everything", args: []string{"--state", state, "--token-file", tokenFile, "--hosts", "--guard-cidr", "0.0.0.0/0"}, want: "--guard-cidr"},
		{name: "loopback range for hosts", args: []string{"--state", state, "--token-file", tokenFile, "--hosts", "--instance-cidr", "127.200.0.0/16"}, want: "127.0.0.0/8"},
		{name: "IPv6 range for hosts", args: []string{"--state", state, "--token-file", tokenFile, "--hosts", "--instance-cidr", "fd00::/64"}, want: "IPv4"},
		{name: "long bridge name", args: []string{"--state", state, "--token-file", tokenFile, "--hosts", "--bridge", "a-bridge-name-too-long"}, want: "--bridge"},
		{name: "peer without hosts", args: []string{"--state", state, "--token-file", tokenFile, "--peer", "br9=10.89.0.0/24"}, want: "need --hosts"},
		{name: "guard metric without hosts", args: []string{"--state", state, "--token-file", tokenFile, "--guard-metric", "7"}, want: "need --hosts"},
		{name: "peer without a range", args: []string{"--state", state, "--token-file", tokenFile, "--hosts", "--peer", "br9"}, want: `--peer "br9": want BRIDGE=CIDR`},
		{name: "peer without a bridge", args: []string{"--state", state, "--token-file", tokenFile, "--hosts", "--peer", "=10.89.0.0/24"}, want: "want BRIDGE=CIDR"},
		{name: "peer bridge name too long", args: []string{"--state", state, "--token-file", tokenFile, "--hosts", "--peer", "a-bridge-name-too-long=10.89.0.0/24"}, want: "--peer"},
		{name: "guard metric zero", args: []string{"--state", state, "--token-file", tokenFile, "--hosts", "--guard-metric", "0"}, want: "--guard-metric 0"},
		{name: "bad stop timeout", args: []string{"--state", state, "--token-file", tokenFile, "--hosts", "--host-stop-timeout", "0s"}, want: "--host-stop-timeout"},
		{name: "cleanup with serving flags", args: []string{"--state", state, "--token-file", tokenFile, "--cleanup"}, want: "--cleanup takes no other flags"},
		{name: "cleanup of nothing", args: []string{"--cleanup"}, want: "--cleanup needs --state"},
	}
	if os.Geteuid() != 0 {
		tests = append(tests, struct {
			name string
			args []string
			want string
		}{name: "hosts without root", args: []string{"--state", state, "--token-file", tokenFile, "--hosts"}, want: "need root"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run(%q) = %v, want an error mentioning %q", tt.args, err, tt.want)
			}
		})
	}
	// Cleaning up a directory that does not exist succeeds.
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"--cleanup", "--state", state}, &stdout, &stderr); err != nil {
		t.Fatalf("--cleanup of a state without hosts: %v", err)
	}
}

// TestKilledCloudAdoptsItsHosts kills a cloud running two hosts with SIGKILL, kills one
// host's boot process while no cloud runs, and starts the cloud again on the same state:
// the living host is adopted (same boot process, no second copy), the other is booted
// again. It then kills the cloud once more and removes everything with --cleanup, and
// checks that the machine is as it was.
func TestKilledCloudAdoptsItsHosts(t *testing.T) {
	hoststest.RequireRoot(t)
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "addr")
	state := filepath.Join(dir, "state.db")
	markers := []string{"nphcmd21", "10.250.21.", "10.251.21.", "nv0afa15", dir}
	before := hoststest.Snapshot(t, markers...)
	forward := hoststest.Sysctl(t, "net/ipv4/ip_forward")
	args := []string{
		"--state", state, "--token-file", writeToken(t, dir), "--listen", "127.0.0.1:0", "--address-file", addrFile,
		"--hosts", "--bridge", "nphcmd21", "--instance-cidr", "10.250.21.0/24", "--guard-cidr", "10.251.21.0/24",
		"--host-stop-timeout", "2s",
	}
	ctx := context.Background()
	boot := []string{"sh", "-c", `echo "ready $NEPHELE_INSTANCE_NAME"; exec sleep 1000`}

	p := proctest.Start(t, "localcloud", args...)
	c := readAddress(t, addrFile, "s3cret")
	var ids []string
	var pids []int
	for _, name := range []string{"node-1", "node-2"} {
		inst, err := c.CreateInstance(ctx, api.InstanceSpec{Name: name, Kind: api.InstanceHost, BootCommand: boot})
		if err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
		ids, pids = append(ids, inst.ID), append(pids, inst.Host.BootPID)
	}
	p.Kill()
	_ = os.Remove(addrFile)
	if !alive(pids[0]) || !alive(pids[1]) {
		t.Fatalf("the hosts' boot processes died with the cloud")
	}
	if err := syscall.Kill(pids[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	// A start that fails (its port is taken) leaves the hosts it adopted running.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	busyArgs := slices.Clone(args)
	busyArgs[slices.Index(busyArgs, "--listen")+1] = busy.Addr().String()
	var stdout, stderr bytes.Buffer
	err = run(ctx, busyArgs, &stdout, &stderr)
	_ = busy.Close()
	if err == nil || !strings.Contains(err.Error(), "keep running") {
		t.Errorf("a start on a busy port: %v, want an error saying the hosts keep running", err)
	}
	if !alive(pids[0]) {
		t.Fatalf("a start that failed stopped the host it had adopted")
	}

	p = proctest.Start(t, "localcloud", args...)
	c = readAddress(t, addrFile, "s3cret")
	n1, err := c.GetInstance(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if n1.Host == nil || n1.Host.BootPID != pids[0] || n1.Host.Phase != "running" {
		t.Errorf("node-1 after the restart: %+v, want its boot process %d adopted", n1.Host, pids[0])
	}
	n2, err := c.GetInstance(ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if n2.Host == nil || n2.Host.BootPID == 0 || n2.Host.BootPID == pids[1] {
		t.Errorf("node-2 after the restart: %+v, want a new boot process", n2.Host)
	}
	if n := countProcs(t, "sleep 1000", pids[0]); n != 1 {
		t.Errorf("%d copies of node-1's boot process run, want 1", n)
	}

	// Killed again; --cleanup removes everything it left.
	p.Kill()
	stdout.Reset()
	stderr.Reset()
	if err := run(ctx, []string{"--cleanup", "--state", state}, &stdout, &stderr); err != nil {
		t.Fatalf("--cleanup: %v (%s)", err, stderr.String())
	}
	if alive(pids[0]) || alive(n2.Host.BootPID) {
		t.Errorf("boot processes outlived --cleanup")
	}
	if got := hoststest.Snapshot(t, markers...); got != before {
		t.Errorf("the machine changed:\nbefore:\n%s\nafter:\n%s", before, got)
	}
	if got := hoststest.Sysctl(t, "net/ipv4/ip_forward"); got != forward {
		t.Errorf("ip_forward is %s, was %s", got, forward)
	}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	s, err := procstat.Read(pid)
	return err == nil && s.Alive()
}

// countProcs counts living processes whose command line is cmdline and that are pid or
// share its parent: copies of one host's boot process.
func countProcs(t *testing.T, cmdline string, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	ns, _ := os.Readlink("/proc/" + itoa(pid) + "/ns/net")
	n := 0
	for _, e := range entries {
		raw, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || strings.ReplaceAll(strings.TrimRight(string(raw), "\x00"), "\x00", " ") != cmdline {
			continue
		}
		if other, _ := os.Readlink("/proc/" + e.Name() + "/ns/net"); other == ns && alive(atoi(e.Name())) {
			n++
		}
	}
	return n
}

func itoa(n int) string { return strconv.Itoa(n) }

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

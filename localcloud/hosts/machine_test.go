package hosts_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/cgroupfs"
	"github.com/nephele-dev/nephele/internal/procstat"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/localcloud/hosts"
)

// TestHostLifecycle boots a host and checks that its boot command runs inside it (its
// network, mount and UTS namespaces, its cgroup, its private directory, its environment),
// that an exit boots it again, that stop, start and remove do what they say, and that
// closing the machine leaves nothing of it behind.
func TestHostLifecycle(t *testing.T) {
	tn := newTestNet(t, 1)
	before := hoststest.Snapshot(t, tn.markers...)
	forward := hoststest.Sysctl(t, "net/ipv4/ip_forward")
	private := "/var/lib/nephele-hosts-test/" + filepath.Base(tn.cfg.Dir)
	tn.markers = append(tn.markers, "/var/lib/nephele-hosts-test")
	if _, err := os.Stat("/var/lib/nephele-hosts-test"); err == nil {
		t.Fatalf("/var/lib/nephele-hosts-test exists before the test; remove it")
	}
	ctx := context.Background()
	func() {
		m := tn.open(t)
		defer closeMachine(t, m)
		spec := hosts.HostSpec{
			ID:      "i-000000000001",
			Name:    "node-1",
			Address: tn.addr(2),
			BootCommand: []string{"sh", "-c", `ip -4 -o addr show dev eth0; echo "hostname=$(hostname)"; ` +
				`echo "env=$NEPHELE_INSTANCE_ID,$NEPHELE_INSTANCE_NAME,$NEPHELE_INSTANCE_ADDRESS,$NEPHELE_HOST_CGROUP,$GREETING"; ` +
				`echo "dir=$NEPHELE_HOST_DIR pwd=$(pwd)"; echo "route=$(ip -4 route show default)"; ` +
				`touch "$PRIVATE/inside"; ip netns add nphinner1; echo "ready-$NEPHELE_INSTANCE_NAME"; exec sleep 1000`},
			Env:          map[string]string{"GREETING": "hi", "PRIVATE": private},
			PrivatePaths: []string{private},
		}
		if err := m.Start(ctx, spec); err != nil {
			t.Fatalf("starting the host: %v", err)
		}
		waitLog(t, m, spec.ID, "\nready-node-1")
		log := readLog(m, spec.ID)
		for _, want := range []string{
			"inet " + tn.addr(2).String() + "/24",
			"hostname=node-1",
			fmt.Sprintf("env=i-000000000001,node-1,%s,/nephele/%s/i-000000000001,hi", tn.addr(2), tn.cfg.Bridge),
			"dir=" + m.HostDir(spec.ID) + " pwd=" + m.HostDir(spec.ID),
			"route=default via " + m.Gateway().String() + " dev eth0",
		} {
			if !strings.Contains(log, want) {
				t.Errorf("boot log lacks %q:\n%s", want, log)
			}
		}
		pid := running(t, m, spec.ID)
		st, _ := m.Status(spec.ID)
		if !sameFile(fmt.Sprintf("/proc/%d/ns/net", pid), st.NetNS) || !sameFile(fmt.Sprintf("/proc/%d/ns/mnt", pid), st.MountNS) {
			t.Errorf("the boot process %d is not in the host's network and mount namespaces", pid)
		}
		if sameFile(fmt.Sprintf("/proc/%d/ns/net", pid), hoststest.MachineNetNS()) {
			t.Errorf("the boot process runs in the machine's network namespace")
		}
		if fs, err := cgroupfs.Discover(); err != nil {
			t.Error(err)
		} else if where, err := fs.Locate(pid); err != nil {
			t.Error(err)
		} else {
			for mount, rel := range where {
				if rel != st.Cgroup {
					t.Errorf("the boot process is in %s, not %s, in the hierarchy at %s", rel, st.Cgroup, mount)
				}
			}
		}
		if _, err := os.Stat(filepath.Join(m.HostDir(spec.ID), "private", private, "inside")); err != nil {
			t.Errorf("the file written to the private path is not in the host's directory: %v", err)
		}
		if _, err := os.Stat(filepath.Join(private, "inside")); err == nil {
			t.Errorf("the file written to the private path shows on the machine")
		}
		// Named network namespaces made inside a host stay in it.
		if _, err := os.Stat("/run/netns/nphinner1"); err == nil {
			t.Errorf("a network namespace made inside the host shows on the machine")
		}
		if _, err := os.Stat(filepath.Join(m.HostDir(spec.ID), "private/run/netns/nphinner1")); err != nil {
			t.Errorf("a network namespace made inside the host is not in its private /run/netns: %v", err)
		}

		// An exit boots the host again, and the old boot's processes are gone.
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, "a second boot", func() error {
			st, _ := m.Status(spec.ID)
			if st.Boots != 2 || st.BootPID == 0 || st.BootPID == pid || strings.Count(readLog(m, spec.ID), "\nready-node-1") != 2 {
				return fmt.Errorf("status %+v, log:\n%s", st, readLog(m, spec.ID))
			}
			return nil
		})
		now, _ := m.Status(spec.ID)
		if err := onlyBoot(t, st.Cgroup, now.BootPID); err != nil {
			t.Errorf("after a restart: %v", err)
		}
		if !strings.Contains(readLog(m, spec.ID), "next boot in") {
			t.Errorf("the boot log does not tell of the restart:\n%s", readLog(m, spec.ID))
		}

		// Stop ends every process and takes the namespaces down; the directory stays.
		pid = running(t, m, spec.ID)
		if err := m.Stop(ctx, spec.ID); err != nil {
			t.Fatalf("stopping: %v", err)
		}
		st, _ = m.Status(spec.ID)
		if st.Phase != hosts.PhaseStopped || st.BootPID != 0 || st.NetNS != "" {
			t.Errorf("status after stop: %+v", st)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			if s, err := procstat.Read(pid); err == nil && s.Alive() {
				t.Errorf("the boot process %d outlived stop", pid)
			}
		}
		if _, err := os.Stat("/run/netns/" + tn.cfg.Bridge + "-" + spec.ID); err == nil {
			t.Errorf("the network namespace outlived stop")
		}
		if _, err := os.Stat(filepath.Join(m.HostDir(spec.ID), "private", private, "inside")); err != nil {
			t.Errorf("the host's directory did not survive stop: %v", err)
		}

		// Start boots it again, in fresh namespaces.
		if err := m.Start(ctx, spec); err != nil {
			t.Fatalf("starting again: %v", err)
		}
		running(t, m, spec.ID)
		if err := m.Stop(ctx, spec.ID); err != nil {
			t.Fatal(err)
		}
		if err := m.Start(ctx, spec); err != nil {
			t.Fatal(err)
		}
		running(t, m, spec.ID)

		// Remove takes the directory too.
		if err := m.Remove(ctx, spec.ID); err != nil {
			t.Fatalf("removing: %v", err)
		}
		if _, err := os.Stat(m.HostDir(spec.ID)); !os.IsNotExist(err) {
			t.Errorf("the host's directory outlived remove: %v", err)
		}
		if _, ok := m.Status(spec.ID); ok {
			t.Errorf("a removed host still has a status")
		}
		// A second host is running when the machine closes.
		spec.ID, spec.Name, spec.Address = "i-000000000002", "node-2", tn.addr(3)
		if err := m.Start(ctx, spec); err != nil {
			t.Fatal(err)
		}
		running(t, m, spec.ID)
	}()
	tn.checkClean(t, before, forward)
}

// cgroupProcs returns the processes in the cgroup rel and below, in any hierarchy.
func cgroupProcs(t *testing.T, rel string) []int {
	t.Helper()
	fs, err := cgroupfs.Discover()
	if err != nil {
		t.Fatal(err)
	}
	procs, err := fs.Procs(rel)
	if err != nil {
		t.Fatalf("reading the host's cgroup: %v", err)
	}
	return procs
}

// TestStopKillsWhatIgnoresSIGTERM: a boot command that ignores SIGTERM, and the children
// it started, are killed once the stop timeout has passed.
func TestStopKillsWhatIgnoresSIGTERM(t *testing.T) {
	tn := newTestNet(t, 6)
	ctx := context.Background()
	m := tn.open(t)
	spec := hosts.HostSpec{
		ID: "i-000000000001", Name: "stubborn", Address: tn.addr(2),
		BootCommand: []string{"sh", "-c", `trap "" TERM; sleep 1000 & sleep 1000 & echo "children $!"; wait; wait`},
	}
	if err := m.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	waitLog(t, m, spec.ID, "\nchildren ")
	st, _ := m.Status(spec.ID)
	procs := cgroupProcs(t, st.Cgroup)
	if len(procs) != 4 {
		t.Fatalf("the host's cgroup holds %v, want the host's init, the shell and its two children", procs)
	}
	start := time.Now()
	if err := m.Stop(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if took < tn.cfg.StopTimeout || took > tn.cfg.StopTimeout+5*time.Second {
		t.Errorf("stop took %s, want the stop timeout %s and a little", took, tn.cfg.StopTimeout)
	}
	for _, pid := range procs {
		if s, err := procstat.Read(pid); err == nil && s.Alive() {
			t.Errorf("process %d outlived stop: %+v", pid, s)
		}
	}
	if log := readLog(m, spec.ID); !strings.Contains(log, "killed 4 processes left in it") {
		t.Errorf("the boot log does not say what the stop killed:\n%s", log)
	}
}

// onlyBoot says why the host's cgroup holds anything but its boot process (the host's
// init, bootPID) and one child of it, the boot command; nil when it holds just those.
func onlyBoot(t *testing.T, cgroup string, bootPID int) error {
	procs := cgroupProcs(t, cgroup)
	if len(procs) != 2 || !slices.Contains(procs, bootPID) {
		return fmt.Errorf("the host's cgroup holds %v, want only the boot process %d and its boot command", procs, bootPID)
	}
	for _, pid := range procs {
		if s, err := procstat.Read(pid); pid != bootPID && (err != nil || s.PPID != bootPID) {
			return fmt.Errorf("process %d in the host's cgroup is not the boot process's child: %+v %v", pid, s, err)
		}
	}
	return nil
}

package hosts_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/localcloud/hosts"
)

func sleeper(tn testNet, i int, id, name string) hosts.HostSpec {
	return hosts.HostSpec{ID: id, Name: name, Address: tn.addr(i), BootCommand: []string{"sleep", "1000"}}
}

// TestReopenAdoptsOrReboots leaves three hosts behind as a killed cloud would, then opens
// the directory again: the host whose boot process lives is adopted (same process), the
// one whose boot process died is booted again, the one no longer wanted is removed.
func TestReopenAdoptsOrReboots(t *testing.T) {
	tn := newTestNet(t, 2)
	before := hoststest.Snapshot(t, tn.markers...)
	forward := hoststest.Sysctl(t, "net/ipv4/ip_forward")
	ctx := context.Background()
	a, b, c := sleeper(tn, 2, "i-00000000000a", "a"), sleeper(tn, 3, "i-00000000000b", "b"), sleeper(tn, 4, "i-00000000000c", "c")

	m1, err := hosts.Open(ctx, tn.cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []hosts.HostSpec{a, b, c} {
		if err := m1.Start(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	pidA, pidB := running(t, m1, a.ID), running(t, m1, b.ID)
	running(t, m1, c.ID)
	if during := hoststest.Snapshot(t, tn.markers...); during == before {
		t.Fatalf("the snapshot does not see the hosts:\n%s", during)
	}
	if err := m1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pidB, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	func() {
		m2 := tn.open(t)
		defer closeMachine(t, m2)
		err := m2.Reconcile(ctx, []hosts.Desired{{Spec: a, Running: true}, {Spec: b, Running: true}})
		if err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		if got := running(t, m2, a.ID); got != pidA {
			t.Errorf("host a runs boot process %d, want the adopted %d", got, pidA)
		}
		if got := running(t, m2, b.ID); got == pidB {
			t.Errorf("host b was not booted again")
		}
		if _, ok := m2.Status(c.ID); ok {
			t.Errorf("host c, no longer wanted, still has a status")
		}
		if _, err := os.Stat(m2.HostDir(c.ID)); !os.IsNotExist(err) {
			t.Errorf("host c's directory is still there: %v", err)
		}
		if _, err := os.Stat("/run/netns/" + tn.cfg.Bridge + "-" + c.ID); !os.IsNotExist(err) {
			t.Errorf("host c's network namespace is still there: %v", err)
		}
		// Reconcile again is a no-op: nothing is duplicated.
		if err := m2.Reconcile(ctx, []hosts.Desired{{Spec: a, Running: true}, {Spec: b, Running: false}}); err != nil {
			t.Fatal(err)
		}
		if got := running(t, m2, a.ID); got != pidA {
			t.Errorf("a second reconcile replaced host a's boot process")
		}
		if st, _ := m2.Status(b.ID); st.Phase != hosts.PhaseStopped {
			t.Errorf("host b wanted stopped is %s", st.Phase)
		}
		// The adopted host stops like any other.
		if err := m2.Stop(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
		gone(t, "the adopted boot process", pidA)
	}()
	tn.checkClean(t, before, forward)
}

// TestCleanupRemovesWhatAKilledCloudLeft leaves a running host behind and removes it
// with Cleanup alone.
func TestCleanupRemovesWhatAKilledCloudLeft(t *testing.T) {
	tn, m, before, forward := openToKill(t, 5)
	ctx := context.Background()
	spec := sleeper(tn, 2, "i-000000000001", "n1")
	spec.PrivatePaths = []string{"/run/nephele-hosts-test-cleanup/x"}
	tn.markers = append(tn.markers, "/run/nephele-hosts-test-cleanup")
	if err := m.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	pid := running(t, m, spec.ID)
	if _, err := hosts.Open(ctx, tn.cfg); err == nil {
		t.Fatal("a second Open of a directory in use succeeded")
	}
	if err := hosts.Cleanup(ctx, tn.cfg.Dir, testlog.New(t, 0)); err == nil {
		t.Fatal("Cleanup of a directory in use succeeded")
	}
	if err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := hosts.Cleanup(ctx, tn.cfg.Dir, testlog.New(t, 0)); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	gone(t, "the boot process", pid)
	if _, err := os.Stat(tn.cfg.Dir); !os.IsNotExist(err) {
		t.Errorf("the host directory is still there: %v", err)
	}
	if _, err := os.Stat("/run/nephele-hosts-test-cleanup"); !os.IsNotExist(err) {
		t.Errorf("the mount point the cloud created is still there: %v", err)
	}
	tn.checkClean(t, before, forward)
}

// TestCleanupDetachesADiskAKilledCloudLeftMounted: a cloud killed while a host had a disk
// mounted (a pod's volume) leaves the device busy in the host's mount namespace; Cleanup
// takes the host down first, so the device is released and detached, and nothing is left.
func TestCleanupDetachesADiskAKilledCloudLeftMounted(t *testing.T) {
	for _, tool := range []string{"mkfs.ext4", "losetup"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (make node-deps): %v", tool, err)
		}
	}
	tn, m, before, forward := openToKill(t, 24)
	ctx := context.Background()
	spec := sleeper(tn, 2, "i-000000000001", "disk")
	// Inside the host: wait for the disk, format it, mount it in the host's mount
	// namespace, and stay.
	spec.BootCommand = []string{"sh", "-c", `disk="$NEPHELE_HOST_DIR/disks/vol-000000000001"
while [ ! -e "$disk" ]; do sleep 0.05; done
mkfs.ext4 -q "$disk" && mkdir -p "$NEPHELE_HOST_DIR/mnt" && mount "$disk" "$NEPHELE_HOST_DIR/mnt" && echo "mounted-$((6*7))"
exec sleep 1000`}
	if err := m.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "vol-000000000001"+hosts.DiskFileSuffix)
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, 64<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AttachDisk(ctx, hosts.DiskSpec{Volume: "vol-000000000001", Host: spec.ID, File: file}); err != nil {
		t.Fatal(err)
	}
	waitLog(t, m, spec.ID, "mounted-42")
	if err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := hosts.Cleanup(ctx, tn.cfg.Dir, testlog.New(t, 0)); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if out, _ := exec.Command("losetup", "-j", file).CombinedOutput(); len(out) > 0 {
		t.Errorf("a loop device is still bound to the volume's file: %s", out)
	}
	tn.checkClean(t, before, forward)
}

// openToKill opens a machine on test net n that the test will leave as a killed cloud
// does (Release), and returns the machine's state before it for the comparison after
// Cleanup: the snapshot and ip_forward.
func openToKill(t *testing.T, n int) (tn testNet, m *hosts.Machine, before, forward string) {
	t.Helper()
	tn = newTestNet(t, n)
	before = hoststest.Snapshot(t, tn.markers...)
	forward = hoststest.Sysctl(t, "net/ipv4/ip_forward")
	m, err := hosts.Open(context.Background(), tn.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tn, m, before, forward
}

package hosts_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/nephele-dev/nephele/internal/procstat"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

// pidnsBoot is a boot command that says what it sees of its host through /proc and its
// PID there, starts a sleep it leaves behind when it ends, leaves
// an orphan that exits at once (the host's init must reap it), says "booted", and ends
// with "term" and exit status 0 on SIGTERM. The orphan's parent exits before it, so the
// orphan's end is the init's to collect.
const pidnsBoot = `echo "procs=$(ls /proc | grep -c '^[0-9]')"
echo "self=$$"
sleep 1000 &
echo "init-mnt=$(readlink /proc/1/ns/mnt)"
echo "proc-mounts=$(grep -c ' /proc ' /proc/self/mountinfo)"
sh -c 'sleep 0.2 & exit 0'
trap 'echo term; exit 0' TERM
echo "booted-$((6*7))"
while :; do sleep 1; done`

// TestHostIsItsOwnPIDNamespace: a host's boot process is PID 1 of a PID namespace of its
// own and in the host's mount namespace, as a machine's init is; the host's /proc shows
// its processes only, and the machine finds them by their PIDs there; the init reaps
// orphans, passes SIGTERM on, says what the boot command left, ends as the boot command
// ended, and leaves no /proc behind for the next boot.
func TestHostIsItsOwnPIDNamespace(t *testing.T) {
	tn := newTestNet(t, 23)
	ctx := context.Background()
	m := tn.open(t)
	spec := sleeper(tn, 2, "i-000000000001", "pidns")
	spec.BootCommand = []string{"sh", "-c", pidnsBoot}
	if err := m.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	boot := running(t, m, spec.ID)
	waitLog(t, m, spec.ID, "booted-42")
	st, _ := m.Status(spec.ID)

	// From the machine: the boot process is in the host's mount namespace and in a PID
	// namespace that is not the machine's.
	if !sameFile(fmt.Sprintf("/proc/%d/ns/mnt", boot), st.MountNS) {
		t.Errorf("boot process %d is not in the host's mount namespace %s", boot, st.MountNS)
	}
	if sameFile(fmt.Sprintf("/proc/%d/ns/pid", boot), "/proc/self/ns/pid") {
		t.Errorf("boot process %d is in the machine's PID namespace", boot)
	}
	// From inside: a handful of processes, and PID 1 in the host's mount namespace.
	log := readLog(m, spec.ID)
	procs, err := strconv.Atoi(field(log, "procs"))
	if err != nil || procs < 2 || procs > 8 {
		t.Errorf("the host's /proc shows %q processes; want its own few (the init, the boot command, ls):\n%s", field(log, "procs"), log)
	}
	var mnt syscall.Stat_t
	if err := syscall.Stat(st.MountNS, &mnt); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("mnt:[%d]", mnt.Ino); field(log, "init-mnt") != want {
		t.Errorf("inside the host, /proc/1/ns/mnt is %q; want the host's %s:\n%s", field(log, "init-mnt"), want, log)
	}

	// The machine finds the host's processes by their PIDs inside: the init is 1, the
	// boot command its child.
	machine, err := procstat.ByInnerPID(st.MountNS)
	if err != nil {
		t.Fatal(err)
	}
	if got := machine[1]; got != boot {
		t.Errorf("ByInnerPID(the host's mount namespace)[1] = %d; want the boot process %d (all: %v)", got, boot, machine)
	}
	self, _ := strconv.Atoi(field(log, "self"))
	if got, ok := machine[self]; !ok {
		t.Errorf("ByInnerPID(the host's mount namespace) has no %d, the boot command: %v", self, machine)
	} else if s, err := procstat.Read(got); err != nil || s.PPID != boot {
		t.Errorf("ByInnerPID found process %d for the boot command (%d inside): %+v, %v; want the boot process's child", got, self, s, err)
	}

	// The orphan (its parent gone, itself exited) is reaped: no zombie in the host.
	poll.Eventually(t, "the host's orphan to be reaped", func() error {
		for _, pid := range cgroupProcs(t, st.Cgroup) {
			if s, err := procstat.Read(pid); err == nil && s.State == 'Z' {
				return fmt.Errorf("process %d is a zombie: %+v", pid, s)
			}
		}
		return nil
	})

	// A boot command that ends is booted again, SIGTERM passed on to it by the init;
	// after an init killed outright as well. Each boot sees as many /proc mounts as the
	// first: none an earlier init left stays over the machine's.
	first := field(log, "proc-mounts")
	for i, tc := range []struct {
		sig  syscall.Signal
		exit string
	}{{syscall.SIGTERM, "exit status 0"}, {syscall.SIGKILL, "signal: killed"}} {
		st, _ := m.Status(spec.ID)
		if err := syscall.Kill(st.BootPID, tc.sig); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, fmt.Sprintf("the host to boot again after %s", tc.sig), func() error {
			if now, _ := m.Status(spec.ID); now.Boots < i+2 || now.BootPID == 0 || now.BootPID == st.BootPID {
				return fmt.Errorf("status %+v", now)
			}
			if n := strings.Count(readLog(m, spec.ID), "booted-42"); n < i+2 {
				return fmt.Errorf("%d boots logged", n)
			}
			return nil
		})
		if now, _ := m.Status(spec.ID); now.LastExit != tc.exit {
			t.Errorf("after %s the boot ended with %q; want %q:\n%s", tc.sig, now.LastExit, tc.exit, readLog(m, spec.ID))
		}
		lines := strings.Split(readLog(m, spec.ID), "proc-mounts=")
		if again := strings.Fields(lines[len(lines)-1])[0]; again != first {
			t.Errorf("after %s the next boot sees %s /proc mounts, the first %s: a boot left its /proc behind", tc.sig, again, first)
		}
	}
	if !strings.Contains(readLog(m, spec.ID), "\nterm\n") {
		t.Errorf("the boot command did not get the init's SIGTERM:\n%s", readLog(m, spec.ID))
	}

	if !strings.Contains(readLog(m, spec.ID), "processes; they end with the host's init") {
		t.Errorf("the init did not say what the boot command left (its sleep):\n%s", readLog(m, spec.ID))
	}

	// A stop passes SIGTERM on as well.
	if err := m.Stop(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.Status(spec.ID); st.LastExit != "exit status 0" {
		t.Errorf("the stopped boot ended with %q; want exit status 0 (SIGTERM passed to the boot command)", st.LastExit)
	}

	// A stop at once after a start, perhaps before the init has set its traps (the
	// kernel drops a signal to a namespace's PID 1 without a handler): the stop sends
	// SIGTERM again, and the host ends by it, not killed after the stop timeout.
	if err := m.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.Status(spec.ID); st.LastExit == "signal: killed" {
		t.Errorf("a stop at once after the start ended the boot with %q; want it ended by SIGTERM", st.LastExit)
	}
}

// field returns the value of the first "key=value" line of log.
func field(log, key string) string {
	for _, line := range strings.Split(log, "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

package hosts_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/localcloud/hosts"
)

// TestUnrecordedBootIsSupervised: when the journal cannot be written as a boot process
// starts, the process is still the host's one supervised boot process (its status
// names it and the error), not left running while another is booted.
func TestUnrecordedBootIsSupervised(t *testing.T) {
	tn := newTestNet(t, 7)
	ctx := context.Background()
	m := tn.open(t)
	spec := sleeper(tn, 2, "i-000000000001", "a")
	if err := m.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	first := running(t, m, spec.ID)
	st, _ := m.Status(spec.ID)

	// The journal is a mount point (itself bound on itself): no file can be renamed
	// over it, so every write of the journal fails.
	journal := filepath.Join(m.Dir(), "journal.json")
	if err := syscall.Mount(journal, journal, "", syscall.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	bound := true
	unbind := func() {
		if bound {
			if err := syscall.Unmount(journal, 0); err != nil {
				t.Fatal(err)
			}
			bound = false
		}
	}
	defer unbind()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var now hosts.Status
	poll.Eventually(t, "a boot that cannot be recorded", func() error {
		now, _ = m.Status(spec.ID)
		if !strings.Contains(now.Error, "host journal") {
			return fmt.Errorf("status %+v", now)
		}
		return nil
	})
	if now.BootPID == 0 || now.Boots != 2 || !strings.Contains(now.Error, "recording its boot process") {
		t.Errorf("status %+v: want the second boot process supervised, and its recording's failure", now)
	}
	// The boot process joins the cgroup when its script runs, which may come after the
	// status shows it started. It is the host's init: the boot command is its child.
	poll.Eventually(t, "the boot process and its boot command alone in the host's cgroup", func() error {
		return onlyBoot(t, st.Cgroup, now.BootPID)
	})
	unbind()
	if err := m.Stop(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	gone(t, "the unrecorded boot process", now.BootPID)
}

// TestBootLogIsCapped: a boot process that keeps writing does not grow its boot log
// past the cap; what came before is in boot.log.1.
func TestBootLogIsCapped(t *testing.T) {
	tn := newTestNet(t, 9)
	tn.cfg.MaxLogSize = 64 << 10
	m := tn.open(t)
	spec := sleeper(tn, 2, "i-000000000001", "chatty")
	spec.BootCommand = []string{"sh", "-c", `head -c 1000000 /dev/zero | tr '\0' x; echo; echo written; exec sleep 1000`}
	if err := m.Start(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	log := m.LogPath(spec.ID)
	poll.Eventually(t, "the boot log to be trimmed", func() error {
		old, err := os.Stat(log + ".1")
		if err != nil {
			return err
		}
		now, err := os.Stat(log)
		if err != nil {
			return err
		}
		if old.Size() < 1000000 || now.Size() > tn.cfg.MaxLogSize {
			return fmt.Errorf("boot.log has %d bytes, boot.log.1 %d", now.Size(), old.Size())
		}
		return nil
	})
	if raw, _ := os.ReadFile(log); !strings.Contains(string(raw), "boot.log.1") {
		t.Errorf("the trimmed boot log does not say where the rest went:\n%s", raw)
	}
}

package nsrun_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nephele-dev/nephele/internal/nsrun"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
)

// TestInRefusesBadInput: another kind of namespace, or a namespace file that is not
// there, is an error naming it, and fn does not run.
func TestInRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, path, mention string
		kind                int
	}{
		{"a PID namespace", "/proc/self/ns/pid", "want unix.CLONE_NEWNET or unix.CLONE_NEWNS", unix.CLONE_NEWPID},
		{"a missing file", filepath.Join(t.TempDir(), "missing"), "missing", unix.CLONE_NEWNET},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			err := nsrun.In(tc.kind, tc.path, func() error { ran = true; return nil })
			if err == nil || !strings.Contains(err.Error(), tc.mention) || ran {
				t.Errorf("In(%s) = %v, fn ran: %v; want an error mentioning %q and fn not run", tc.path, err, ran, tc.mention)
			}
		})
	}
}

// TestInMountNamespaceComesBack: fn runs at the namespace's root (entering a mount
// namespace moves the thread there); afterwards the thread that ran it lives on (a thread
// that ended would take its Pdeathsig children along) with the caller's working directory
// and mount namespace; fn's error comes back.
func TestInMountNamespaceComesBack(t *testing.T) {
	hoststest.RequireRoot(t)
	before, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	var inside string
	var tid int
	want := os.ErrClosed
	err = nsrun.In(unix.CLONE_NEWNS, "/proc/self/ns/mnt", func() error {
		inside, _ = os.Getwd()
		tid = unix.Gettid()
		return want
	})
	if err != want {
		t.Errorf("In returned %v; want fn's error %v", err, want)
	}
	if inside != "/" {
		t.Errorf("inside, the working directory was %q; want the namespace's root", inside)
	}
	task := fmt.Sprintf("/proc/self/task/%d/", tid)
	if cwd, err := os.Readlink(task + "cwd"); err != nil || cwd != before {
		t.Errorf("after In, thread %d works in %q (%v); want it alive, in %q", tid, cwd, err, before)
	}
	mnt, err := os.Readlink(task + "ns/mnt")
	if own, _ := os.Readlink("/proc/self/ns/mnt"); err != nil || mnt != own {
		t.Errorf("after In, thread %d is in mount namespace %q (%v); want the process's %q", tid, mnt, err, own)
	}
}

package cgroupfs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

// These tests make cgroups on the machine, below /nephele-cgroupfs-test-<random> in every
// hierarchy, and remove them again.

// requireRoot stops a test that cannot make cgroups: a failure under CI=true, a skip
// with the reason elsewhere.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	const msg = "cgroup tests need root: run them as root"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: not skipped)")
	}
	t.Skip(msg)
}

// testCgroup returns the machine's hierarchies and a cgroup path of the test's own, not
// yet created. The test's cleanup kills what is left in it, removes it and checks that
// it is gone from every hierarchy.
func testCgroup(t *testing.T) (*FS, string) {
	t.Helper()
	requireRoot(t)
	fs, err := Discover()
	if err != nil {
		t.Fatal(err)
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	base := "/nephele-cgroupfs-test-" + hex.EncodeToString(suffix)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := fs.Kill(ctx, base, nil); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if err := fs.Remove(ctx, base); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		for _, dir := range fs.Dirs(base) {
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("cgroup %s left", dir)
			}
		}
	})
	return fs, base
}

// start starts a process that the test reaps as soon as it exits; the returned channel
// closes then.
func start(t *testing.T, name string, args ...string) (int, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd.Process.Pid, done
}

func exited(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func sortedFields(s string) []string {
	f := strings.Fields(s)
	slices.Sort(f)
	return f
}

func TestCreateJoinKillRemove(t *testing.T) {
	fs, base := testCgroup(t)
	leaf := base + "/a/b"
	rootDelegation := map[string]string{}
	for _, h := range fs.Hierarchies() {
		if h.V2 {
			rootDelegation[h.Mount] = readTrim(t, filepath.Join(h.Mount, "cgroup.subtree_control"))
		}
	}

	if top, err := fs.Missing(leaf); err != nil || top != base {
		t.Errorf("Missing before Create = %q, %v; want %s", top, err, base)
	}
	for range 2 { // a second Create keeps what is there
		if err := fs.Create(leaf); err != nil {
			t.Fatal(err)
		}
	}
	if !fs.Exists(leaf) {
		t.Fatalf("%s does not exist in every hierarchy: %v", leaf, fs.Dirs(leaf))
	}
	if top, err := fs.Missing(leaf); err != nil || top != "" {
		t.Errorf("Missing after Create = %q, %v; want none", top, err)
	}
	for _, h := range fs.Hierarchies() {
		switch {
		case h.Has("cpuset"):
			for _, f := range cpusetFiles {
				if got, want := readTrim(t, filepath.Join(h.Mount, leaf, f)), readTrim(t, filepath.Join(h.Mount, f)); got != want || got == "" {
					t.Errorf("%s of %s = %q, want the root's %q", f, leaf, got, want)
				}
			}
		case h.V2:
			if got := readTrim(t, filepath.Join(h.Mount, "cgroup.subtree_control")); got != rootDelegation[h.Mount] {
				t.Errorf("the root's delegation in %s changed from %q to %q", h.Mount, rootDelegation[h.Mount], got)
			}
			for _, dir := range []string{base, base + "/a"} {
				p := filepath.Join(h.Mount, dir)
				have, on := readTrim(t, filepath.Join(p, "cgroup.controllers")), readTrim(t, filepath.Join(p, "cgroup.subtree_control"))
				if !slices.Equal(sortedFields(have), sortedFields(on)) {
					t.Errorf("%s delegates %q of its controllers %q", p, on, have)
				}
			}
		}
	}

	pid, done := start(t, "sleep", "infinity")
	if err := fs.Join(pid, leaf); err != nil {
		t.Fatal(err)
	}
	placement, err := fs.Locate(pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range fs.Hierarchies() {
		if placement[h.Mount] != leaf {
			t.Errorf("process %d is in %s in %s, want %s", pid, placement[h.Mount], h.Mount, leaf)
		}
	}
	if procs, err := fs.Procs(base); err != nil || !slices.Equal(procs, []int{pid}) {
		t.Errorf("Procs(%s) = %v, %v; want [%d]", base, procs, err, pid)
	}
	if names, err := fs.Children(base); err != nil || !slices.Equal(names, []string{"a"}) {
		t.Errorf("Children(%s) = %v, %v; want [a]", base, names, err)
	}

	// A cgroup with children is in use: no waiting.
	if err := fs.RemoveDir(t.Context(), base+"/a"); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("RemoveDir of a cgroup with a child = %v, want ErrNotEmpty", err)
	}
	// A cgroup with a process is busy until the context ends.
	short, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	err = fs.RemoveDir(short, leaf)
	cancel()
	if err == nil || errors.Is(err, ErrNotEmpty) || !errors.Is(err, syscall.EBUSY) {
		t.Errorf("RemoveDir of a cgroup with a process = %v, want EBUSY", err)
	}
	if !fs.Exists(leaf) {
		t.Fatal("RemoveDir removed a cgroup that holds a process")
	}

	n, err := fs.Kill(t.Context(), base, nil)
	if err != nil || n != 1 {
		t.Errorf("Kill = %d, %v; want 1 process killed", n, err)
	}
	poll.Eventually(t, "the killed process to be reaped", func() error {
		if !exited(done) {
			return fmt.Errorf("process %d runs", pid)
		}
		return nil
	})
	if procs, err := fs.Procs(base); err != nil || len(procs) != 0 {
		t.Errorf("Procs after Kill = %v, %v", procs, err)
	}
	if err := fs.Remove(t.Context(), base); err != nil {
		t.Fatal(err)
	}
	for _, dir := range fs.Dirs(base) {
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%s is left after Remove", dir)
		}
	}
	if err := fs.Remove(t.Context(), base); err != nil {
		t.Errorf("Remove of a removed cgroup: %v", err)
	}
	if err := fs.RemoveDir(t.Context(), base); err != nil {
		t.Errorf("RemoveDir of a removed cgroup: %v", err)
	}
}

// TestKillTakesForks kills a shell that forks a sleeper every few milliseconds: no
// process may escape by being born between a listing and the signals.
func TestKillTakesForks(t *testing.T) {
	fs, base := testCgroup(t)
	if err := fs.Create(base); err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(t.TempDir(), "ready")
	// The shell joins the cgroup itself, through the files the local cloud's boot
	// script writes, before it starts forking.
	script := `for f in "$@"; do echo $$ > "$f"; done; : > ` + ready + `; while :; do sleep 1000 & sleep 0.005; done`
	_, done := start(t, "sh", append([]string{"-c", script, "forker"}, fs.ProcsFiles(base)...)...)
	poll.Eventually(t, "the shell to fork sleepers in the cgroup", func() error {
		procs, err := fs.Procs(base)
		if err != nil {
			return err
		}
		if _, err := os.Stat(ready); err != nil || len(procs) < 4 {
			return fmt.Errorf("processes %v", procs)
		}
		return nil
	})
	n, err := fs.Kill(t.Context(), base, nil)
	if err != nil || n < 4 {
		t.Errorf("Kill = %d, %v; want the shell and its sleepers", n, err)
	}
	if procs, err := fs.Procs(base); err != nil || len(procs) != 0 {
		t.Errorf("processes left after Kill: %v, %v", procs, err)
	}
	poll.Eventually(t, "the shell to be reaped", func() error {
		if !exited(done) {
			return errors.New("the shell runs")
		}
		return nil
	})
}

// TestKillSpares kills a subtree that also holds a process to spare, beside others in
// its cgroup and in a cgroup of their own.
func TestKillSpares(t *testing.T) {
	fs, base := testCgroup(t)
	keep, other := base+"/keep", base+"/other/deeper"
	for _, rel := range []string{keep, other} {
		if err := fs.Create(rel); err != nil {
			t.Fatal(err)
		}
	}
	spared, sparedDone := start(t, "sleep", "infinity")
	beside, besideDone := start(t, "sleep", "infinity")
	below, belowDone := start(t, "sleep", "infinity")
	for _, j := range []struct {
		pid int
		rel string
	}{{spared, keep}, {beside, keep}, {below, other}} {
		if err := fs.Join(j.pid, j.rel); err != nil {
			t.Fatal(err)
		}
	}
	n, err := fs.Kill(t.Context(), base, func(pid int) bool { return pid == spared })
	if err != nil || n != 2 {
		t.Errorf("Kill = %d, %v; want 2 processes killed", n, err)
	}
	poll.Eventually(t, "the killed processes to be reaped", func() error {
		if !exited(besideDone) || !exited(belowDone) {
			return errors.New("still running")
		}
		return nil
	})
	if exited(sparedDone) {
		t.Fatal("the spared process was killed")
	}
	if procs, err := fs.Procs(base); err != nil || !slices.Equal(procs, []int{spared}) {
		t.Errorf("Procs after a Kill that spares %d = %v, %v", spared, procs, err)
	}
}

// TestKillGivesUp returns an error naming the processes left when the context ends
// first, and signals nothing once it has ended.
func TestKillGivesUp(t *testing.T) {
	fs, base := testCgroup(t)
	if err := fs.Create(base); err != nil {
		t.Fatal(err)
	}
	pid, done := start(t, "sleep", "infinity")
	if err := fs.Join(pid, base); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	n, err := fs.Kill(ctx, base, nil)
	if err == nil || n != 0 || !strings.Contains(err.Error(), fmt.Sprint(pid)) || !errors.Is(err, context.Canceled) {
		t.Errorf("Kill with an ended context = %d, %v; want an error naming process %d", n, err, pid)
	}
	if exited(done) {
		t.Error("Kill with an ended context killed the process")
	}
}

func TestLocatePlace(t *testing.T) {
	fs, base := testCgroup(t)
	if err := fs.Create(base); err != nil {
		t.Fatal(err)
	}
	pid, _ := start(t, "sleep", "infinity")
	before, err := fs.Locate(pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != len(fs.Hierarchies()) {
		t.Errorf("Locate = %v, want a cgroup in each of %d hierarchies", before, len(fs.Hierarchies()))
	}
	if err := fs.Join(pid, base); err != nil {
		t.Fatal(err)
	}
	if err := fs.Place(pid, before); err != nil {
		t.Fatal(err)
	}
	if after, err := fs.Locate(pid); err != nil || !reflect.DeepEqual(after, before) {
		t.Errorf("after Place the process is in %v, %v; want %v", after, err, before)
	}
	if err := fs.Place(pid, Placement{}); err == nil {
		t.Error("Place with no cgroups succeeded")
	}
	if _, err := fs.Locate(1 << 30); err == nil {
		t.Error("Locate of a process that does not exist succeeded")
	}
}

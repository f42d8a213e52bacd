package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	first, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, lockFile))
	if err != nil || strings.TrimSpace(string(raw)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q (%v), want this pid", raw, err)
	}
	// flock locks belong to open files, so a second open in this process conflicts too.
	if second, err := lockDir(dir); err == nil {
		_ = second.release()
		t.Fatal("a second lock on a locked directory succeeded")
	} else if want := "another nephele up (pid " + strconv.Itoa(os.Getpid()) + ")"; !strings.Contains(err.Error(), want) {
		t.Errorf("second lockDir() = %v, want it to name the holder: %q", err, want)
	}
	if err := first.release(); err != nil {
		t.Fatal(err)
	}
	again, err := lockDir(dir)
	if err != nil {
		t.Fatalf("lockDir() after release: %v", err)
	}
	if err := again.release(); err != nil {
		t.Fatal(err)
	}
}

// TestLockDirFollowsNoLink plants a link where the lock goes, as another user could in a
// directory they can write: lockDir must not open, let alone truncate, its target.
func TestLockDirFollowsNoLink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, lockFile)); err != nil {
		t.Fatal(err)
	}
	if l, err := lockDir(dir); err == nil {
		_ = l.release()
		t.Fatal("lockDir followed a planted link")
	}
	if raw, err := os.ReadFile(victim); err != nil || string(raw) != "keep me\n" {
		t.Errorf("the link's target holds %q (%v), want it untouched", raw, err)
	}
}

// TestUpRefusesAnUntrustedDir runs up on a directory others can write, in which another
// user planted a link where the lock goes and a journal that records a victim directory
// as a host's: up stops before opening anything in it, and both targets are untouched.
func TestUpRefusesAnUntrustedDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.MkdirAll(filepath.Join(dir, "hosts"), 0o700); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, lockFile)); err != nil {
		t.Fatal(err)
	}
	journal := `{"version":2,"hosts":[{"id":"i-000000000001","dir":"` + filepath.Dir(victim) + `"}]}`
	if err := os.WriteFile(filepath.Join(dir, "hosts", "journal.json"), []byte(journal), 0o666); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Join(dir, "hosts")} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	root := newRootCommand()
	root.SetArgs([]string{"up", "--kwok", "--dir", dir, "--bin-dir", t.TempDir(), "--build=false"})
	root.SetOut(new(strings.Builder))
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "cannot be trusted") || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("up on a world-writable --dir: %v, want it refused naming why", err)
	}
	if raw, err := os.ReadFile(victim); err != nil || string(raw) != "keep me\n" {
		t.Errorf("the planted link's target, also the forged journal's host directory, holds %q (%v), want it untouched", raw, err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, lockFile)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the planted link was replaced (lstat: %v, %v)", fi, err)
	}
}

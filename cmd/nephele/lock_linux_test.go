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

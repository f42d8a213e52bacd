package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFile is the file in the state directory up holds a lock on while it runs.
const lockFile = "lock"

// dirLock keeps a second `nephele up` out of a state directory in use. It is an flock,
// which the kernel drops when the process ends however it ends, so a killed run never
// leaves a stale lock behind.
type dirLock struct{ f *os.File }

func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockFile)
	// O_NOFOLLOW: a link planted where the lock is must not make up open (and truncate)
	// another file.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another nephele up (pid %s) is running with %s: stop it, or give another --dir",
				strings.TrimSpace(string(holder)), dir)
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

// release drops the lock.
func (l *dirLock) release() error { return l.f.Close() }

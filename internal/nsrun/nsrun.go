package nsrun

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// kinds are the namespaces In enters, by their /proc/<pid>/ns/ file.
var kinds = map[int]string{unix.CLONE_NEWNET: "net", unix.CLONE_NEWNS: "mnt"}

// In runs fn on a thread of its own inside the namespace at path (a namespace file, such
// as /run/netns/<name>), of kind unix.CLONE_NEWNET or unix.CLONE_NEWNS, and returns fn's
// error. Afterwards the thread is back in its own namespace (and, for a mount namespace,
// its working directory) and unlocked, or, if it could not go back, ended.
//
// A thread enters a mount namespace only once it shares its root, working directory and
// umask with no other thread: it keeps copies of its own after In, the same ones, which
// this project's programs never change (they do not chdir).
func In(kind int, path string, fn func() error) error {
	name, ok := kinds[kind]
	if !ok {
		return fmt.Errorf("namespace kind %#x: want unix.CLONE_NEWNET or unix.CLONE_NEWNS", kind)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		back, err := in(kind, name, path, fn)
		if back {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// in runs fn with the calling, locked, thread in the namespace at path; back reports
// whether the thread is in its own namespace and working directory afterwards.
func in(kind int, name, path string, fn func() error) (back bool, err error) {
	home, err := os.Open("/proc/thread-self/ns/" + name)
	if err != nil {
		return true, fmt.Errorf("opening this thread's %s namespace: %w", name, err)
	}
	defer func() { _ = home.Close() }()
	var cwd *os.File
	if kind == unix.CLONE_NEWNS {
		if cwd, err = os.Open("."); err != nil {
			return true, fmt.Errorf("opening the working directory: %w", err)
		}
		defer func() { _ = cwd.Close() }()
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return true, fmt.Errorf("unsharing the thread's file system attributes: %w", err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return true, fmt.Errorf("opening %s namespace %s: %w", name, path, err)
	}
	defer func() { _ = f.Close() }()
	if err := unix.Setns(int(f.Fd()), kind); err != nil {
		return true, fmt.Errorf("entering %s namespace %s: %w", name, path, err)
	}
	err = fn()
	if berr := unix.Setns(int(home.Fd()), kind); berr != nil {
		return false, errors.Join(err, fmt.Errorf("returning from %s namespace %s: %w", name, path, berr))
	}
	// Entering a mount namespace moved the thread to its root.
	if cwd != nil {
		if berr := unix.Fchdir(int(cwd.Fd())); berr != nil {
			return false, errors.Join(err, fmt.Errorf("returning to the working directory: %w", berr))
		}
	}
	return true, err
}

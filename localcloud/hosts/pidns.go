package hosts

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// maxStaleProcs bounds the /proc mounts resetProc detaches: one per boot since the
// host's mount namespace was made (each init leaves its own; the namespace is made anew
// at each start of the host), which the restart backoff keeps few.
const maxStaleProcs = 256

// resetProc detaches, in the mount namespace at mountNS, every /proc mounted over the
// one the namespace was made with: each boot's init mounts the /proc of its PID namespace
// there and leaves it, with whatever was mounted under it, when its namespace ends. A
// process outside that dead namespace cannot read its /proc/self, which umount(8) needs,
// so the cloud detaches them itself, on a thread that enters the namespace and comes back
// (detachProcs).
func resetProc(mountNS string) error {
	var machine unix.Stat_t
	if err := unix.Stat("/proc", &machine); err != nil {
		return fmt.Errorf("stat /proc: %w", err)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		back, err := detachProcs(mountNS, machine.Dev)
		if back {
			// A thread the Go runtime ends takes along the Pdeathsig children started
			// from it (controlplane's components): only one that could not come back
			// stays locked and ends with this goroutine.
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// detachProcs enters the mount namespace at mountNS with the calling thread, detaches
// /proc there until its device is machineDev or it is no mount point, and returns the
// thread to its own mount namespace and working directory; back reports whether it is
// there. The thread keeps file system attributes of its own afterwards (a mount
// namespace is entered only by a thread that shares them with no other), the same root,
// working directory and umask, which nothing in the cloud changes.
func detachProcs(mountNS string, machineDev uint64) (back bool, err error) {
	own, err := os.Open("/proc/thread-self/ns/mnt")
	if err != nil {
		return true, fmt.Errorf("opening the cloud's mount namespace: %w", err)
	}
	defer func() { _ = own.Close() }()
	cwd, err := os.Open(".")
	if err != nil {
		return true, fmt.Errorf("opening the working directory: %w", err)
	}
	defer func() { _ = cwd.Close() }()
	f, err := os.Open(mountNS)
	if err != nil {
		return true, fmt.Errorf("opening mount namespace %s: %w", mountNS, err)
	}
	defer func() { _ = f.Close() }()
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return true, fmt.Errorf("unsharing the thread's file system attributes: %w", err)
	}
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNS); err != nil {
		return true, fmt.Errorf("entering mount namespace %s: %w", mountNS, err)
	}
	err = detach(mountNS, machineDev)
	// Entering a mount namespace moves the thread to its root: back, and to the
	// working directory it had.
	if berr := unix.Setns(int(own.Fd()), unix.CLONE_NEWNS); berr != nil {
		return false, errors.Join(err, fmt.Errorf("returning to the cloud's mount namespace from %s: %w", mountNS, berr))
	}
	if berr := unix.Fchdir(int(cwd.Fd())); berr != nil {
		return false, errors.Join(err, fmt.Errorf("returning to the working directory: %w", berr))
	}
	return true, err
}

// detach detaches /proc in the calling thread's mount namespace until its device is
// machineDev or it is no mount point (a namespace made by a cloud whose /proc was another).
func detach(mountNS string, machineDev uint64) error {
	for range maxStaleProcs {
		var st unix.Stat_t
		if err := unix.Stat("/proc", &st); err != nil {
			return fmt.Errorf("stat /proc in mount namespace %s: %w", mountNS, err)
		}
		if st.Dev == machineDev {
			return nil
		}
		switch err := unix.Unmount("/proc", unix.MNT_DETACH); {
		case errors.Is(err, unix.EINVAL):
			return nil // no mount point left: the init mounts its own on the directory
		case err != nil:
			return fmt.Errorf("detaching a /proc an earlier boot left in mount namespace %s: %w", mountNS, err)
		}
	}
	return fmt.Errorf("mount namespace %s: /proc is not the machine's after %d detaches", mountNS, maxStaleProcs)
}

package hosts

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// maxStaleProcs bounds the /proc mounts resetProc detaches: one per boot whose init was
// killed, which a host's restart backoff keeps few.
const maxStaleProcs = 256

// resetProc detaches, in the mount namespace at mountNS, every /proc mounted over the
// machine's: each boot's init mounts the /proc of its PID namespace there, and one
// killed (SIGKILL, or with the cloud) leaves it behind with whatever was mounted under it.
// A process outside that dead namespace cannot read its /proc/self, which umount(8)
// needs, so the cloud detaches them itself, on a thread of its own in the namespace,
// never unlocked (its file system attributes are its own now), so Go ends it when the
// goroutine returns. A /proc of the same
// device as the cloud's is the machine's, and stays.
func resetProc(mountNS string) error {
	var machine unix.Stat_t
	if err := unix.Stat("/proc", &machine); err != nil {
		return fmt.Errorf("stat /proc: %w", err)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- detachProcs(mountNS, machine.Dev)
	}()
	return <-errc
}

// detachProcs enters the mount namespace at mountNS with the calling thread, detaches
// /proc there until its device is machineDev, and returns the thread to its own mount
// namespace: the thread may be the process's main one, which Go never ends, and whose
// namespace /proc/self shows the whole process.
func detachProcs(mountNS string, machineDev uint64) (err error) {
	own, err := os.Open("/proc/thread-self/ns/mnt")
	if err != nil {
		return fmt.Errorf("opening the cloud's mount namespace: %w", err)
	}
	defer func() { _ = own.Close() }()
	f, err := os.Open(mountNS)
	if err != nil {
		return fmt.Errorf("opening mount namespace %s: %w", mountNS, err)
	}
	defer func() { _ = f.Close() }()
	// A thread that shares its root and working directory with others cannot change
	// mount namespace.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unsharing the thread's file system attributes: %w", err)
	}
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("entering mount namespace %s: %w", mountNS, err)
	}
	defer func() {
		if berr := unix.Setns(int(own.Fd()), unix.CLONE_NEWNS); berr != nil && err == nil {
			err = fmt.Errorf("returning to the cloud's mount namespace: %w", berr)
		}
	}()
	for range maxStaleProcs {
		var st unix.Stat_t
		if err := unix.Stat("/proc", &st); err != nil {
			return fmt.Errorf("stat /proc in mount namespace %s: %w", mountNS, err)
		}
		if st.Dev == machineDev {
			return nil
		}
		if err := unix.Unmount("/proc", unix.MNT_DETACH); err != nil {
			return fmt.Errorf("detaching a /proc an earlier boot left in mount namespace %s: %w", mountNS, err)
		}
	}
	return fmt.Errorf("mount namespace %s: /proc is not the machine's after %d detaches", mountNS, maxStaleProcs)
}

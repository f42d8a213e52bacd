package hosts

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/nephele-dev/nephele/internal/nsrun"
)

// maxStaleProcs bounds the /proc mounts resetProc detaches: each boot's init leaves one
// and each boot resets, so more than one means a namespace of a cloud whose /proc was
// another; the bound only keeps a loop from going on.
const maxStaleProcs = 256

// resetProc detaches, in the mount namespace at mountNS, every /proc mounted over the
// machine's: each boot's init mounts the /proc of its PID namespace there and leaves it,
// with whatever was mounted under it, when its namespace ends. A process outside that
// dead namespace cannot read its /proc/self, which umount(8) needs, so the cloud detaches
// them itself, with a thread in the namespace (nsrun.In), until /proc is the machine's (of
// the cloud's own /proc device) or no mount point.
func resetProc(mountNS string) error {
	var machine unix.Stat_t
	if err := unix.Stat("/proc", &machine); err != nil {
		return fmt.Errorf("stat /proc: %w", err)
	}
	return nsrun.In(unix.CLONE_NEWNS, mountNS, func() error {
		for range maxStaleProcs {
			var st unix.Stat_t
			if err := unix.Stat("/proc", &st); err != nil {
				return fmt.Errorf("stat /proc in mount namespace %s: %w", mountNS, err)
			}
			if st.Dev == machine.Dev {
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
	})
}

package hosts

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// loopControl is the kernel's loop device allocator.
const loopControl = "/dev/loop-control"

// attachLoop binds file to a free loop device and returns the device's path. The device
// is not set to clear itself on last close: a volume stays attached while nothing has it
// open, until detachLoop. findLoops finds it again by the kernel's backing file path,
// the file's path with every symbolic link resolved: callers name files by their
// resolved path. It needs Linux 5.8 or later (LOOP_CONFIGURE).
func attachLoop(file string) (string, error) {
	// Never through a link: the cloud runs as root.
	f, err := os.OpenFile(file, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "", fmt.Errorf("opening volume file: %w", err)
	}
	defer func() { _ = f.Close() }()
	ctl, err := os.OpenFile(loopControl, os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("opening %s (is the loop module loaded?): %w", loopControl, err)
	}
	defer func() { _ = ctl.Close() }()
	// Another program may take the free device between asking and configuring it
	// (EBUSY): ask again.
	for range 16 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", fmt.Errorf("finding a free loop device: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		d, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			return "", fmt.Errorf("opening %s: %w", dev, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
		copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], file)
		err = unix.IoctlLoopConfigure(int(d.Fd()), &cfg)
		_ = d.Close()
		if errors.Is(err, unix.EBUSY) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("binding %s to %s: %w", file, dev, err)
		}
		return dev, nil
	}
	return "", fmt.Errorf("binding %s to a loop device: every free device was taken before it could be bound", file)
}

// detachLoop unbinds a loop device. One still open (a mounted file system) is unbound by
// the kernel when it is last closed, as losetup -d does. A device bound to nothing is
// not an error.
func detachLoop(dev string) error {
	d, err := os.OpenFile(dev, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening %s: %w", dev, err)
	}
	defer func() { _ = d.Close() }()
	if err := unix.IoctlSetInt(int(d.Fd()), unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("detaching %s: %w", dev, err)
	}
	return nil
}

// resizeLoop makes a loop device take its backing file's current size.
func resizeLoop(dev string) error {
	d, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dev, err)
	}
	defer func() { _ = d.Close() }()
	if err := unix.IoctlSetInt(int(d.Fd()), unix.LOOP_SET_CAPACITY, 0); err != nil {
		return fmt.Errorf("resizing %s: %w", dev, err)
	}
	return nil
}

// findLoops returns the loop devices whose backing file is file, from sysfs.
func findLoops(file string) ([]string, error) {
	paths, err := filepath.Glob("/sys/block/loop*")
	if err != nil {
		return nil, err
	}
	var devs []string
	for _, p := range paths {
		if dev := "/dev/" + filepath.Base(p); loopBacking(dev) == file {
			devs = append(devs, dev)
		}
	}
	return devs, nil
}

// loopBacking returns the backing file of a loop device, empty when it is unbound (or
// unbound while we looked).
func loopBacking(dev string) string {
	raw, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), " (deleted)")
}

// loopClearing reports whether a loop device will unbind itself at its last close: one
// detached while it was still open.
func loopClearing(dev string) bool {
	raw, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop", "autoclear"))
	return err == nil && strings.TrimSpace(string(raw)) == "1"
}

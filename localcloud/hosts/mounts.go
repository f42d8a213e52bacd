package hosts

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/nephele-dev/nephele/internal/mountinfo"
)

// nsDirName is the directory, in the machine's directory, of the hosts' mount and UTS
// namespace files.
const nsDirName = "ns"

// setupNSDir makes the namespace directory a private mount of its own: util-linux (and
// the kernel) refuse to bind a mount namespace file onto a shared mount, where the bind
// could propagate into the namespace itself.
func (m *Machine) setupNSDir() error {
	dir := filepath.Join(m.cfg.Dir, nsDirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if m.j.Network.NSDir == "" {
		if err := m.record(func() { m.j.Network.NSDir = dir }); err != nil {
			return err
		}
	}
	mounted, err := mountinfo.IsMountPoint(dir)
	if err != nil {
		return err
	}
	if !mounted {
		if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting %s on itself: %w", dir, err)
		}
	}
	if err := syscall.Mount("", dir, "", syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making %s a private mount: %w", dir, err)
	}
	return nil
}

// unmount detaches whatever is mounted on path (the file stays); nothing mounted there
// is not an error.
func unmount(path string) error {
	for range 16 {
		err := syscall.Unmount(path, syscall.MNT_DETACH)
		switch {
		case err == nil:
			continue // stacked mounts: detach them all
		case errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ENOENT):
			return nil
		}
		return fmt.Errorf("unmounting %s: %w", path, err)
	}
	return fmt.Errorf("unmounting %s: still mounted after 16 detaches", path)
}

// teardownNSDir unmounts every namespace file left in the namespace directory, then the
// directory's own mount, and removes it.
func teardownNSDir(dir string) []error {
	var errs []error
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if err := unmount(p); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := unmount(dir); err != nil {
		errs = append(errs, err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("removing %s: %w", dir, err))
	}
	return errs
}

// firstMissing returns the highest directory on path that does not exist ("" when path
// exists): what MkdirAll(path) would create first, and what removing undoes it.
func firstMissing(path string) string {
	missing := ""
	for p := path; p != "/" && p != "."; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			break
		}
		missing = p
	}
	return missing
}

// removeEmptyTree removes dir and the directories below it, bottom up, as long as they
// hold nothing else: a mount point directory the machine created and nobody filled.
func removeEmptyTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() {
			return fmt.Errorf("%s is not empty", dir)
		}
		if err := removeEmptyTree(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	return nil
}

// privateSource is the directory of a host's state directory bind-mounted over path in
// the host's mount namespace.
func privateSource(hostDir, path string) string {
	return filepath.Join(hostDir, "private", strings.TrimPrefix(path, "/"))
}

// mountScript runs in the host's new mount and UTS namespaces: it names the host and
// bind-mounts each private directory over its path.
const mountScript = `set -e
printf '%s' "$1" > /proc/sys/kernel/hostname
shift
while [ $# -gt 1 ]; do mount --bind "$1" "$2"; shift 2; done`

// makeMountNS creates the host's persistent mount and UTS namespaces, the mount one a
// slave of the machine's (mounts made on the machine later still show inside, none made
// inside shows outside), with the private directories mounted.
func (m *Machine) makeMountNS(ctx context.Context, up *upRecord, spec *HostSpec, hostDir string) error {
	for _, f := range []string{up.MountNS, up.UTSNS} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			return fmt.Errorf("creating namespace file %s: %w", f, err)
		}
	}
	hostname := spec.Name
	if len(hostname) > 64 {
		hostname = spec.ID
	}
	args := []string{"--mount=" + up.MountNS, "--uts=" + up.UTSNS, "--propagation", "slave", "--", "sh", "-c", mountScript, "nephele-mounts", hostname}
	for _, p := range spec.PrivatePaths {
		args = append(args, privateSource(hostDir, p), p)
	}
	if _, err := m.exec(ctx, "", "unshare", args...); err != nil {
		return fmt.Errorf("creating the mount namespace of host %s: %w", spec.ID, err)
	}
	return nil
}

// ensureMountPoints creates the directories private paths are mounted on, recording
// each directory it creates in the journal first.
func (m *Machine) ensureMountPoints(spec *HostSpec) error {
	for _, p := range spec.PrivatePaths {
		if fi, err := os.Stat(p); err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("private path %s exists and is not a directory", p)
			}
			continue
		}
		if top := firstMissing(p); top != "" {
			if err := m.record(func() { m.j.CreatedDirs = append(m.j.CreatedDirs, top) }); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("creating mount point %s: %w", p, err)
		}
	}
	return nil
}

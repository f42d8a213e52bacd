package cgroupfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"syscall"
)

// ErrNotEmpty is returned by RemoveDir for a cgroup that has child cgroups: someone
// still uses it, and waiting would not help.
var ErrNotEmpty = errors.New("cgroup has child cgroups")

// Children returns the names of rel's child cgroups in any hierarchy, sorted.
func (f *FS) Children(rel string) ([]string, error) {
	if err := checkRel(rel); err != nil {
		return nil, err
	}
	var names []string
	for _, dir := range f.Dirs(rel) {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list child cgroups of %s: %w", dir, err)
		}
		for _, e := range entries {
			if e.IsDir() && !slices.Contains(names, e.Name()) {
				names = append(names, e.Name())
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

// Remove removes rel and every cgroup below it in every hierarchy, deepest first. The
// processes in them must have ended (Kill); removal retries while the kernel finishes
// with them, until ctx ends. A cgroup already gone is not an error.
func (f *FS) Remove(ctx context.Context, rel string) error {
	if err := checkRel(rel); err != nil {
		return err
	}
	for _, h := range f.hs {
		dirs, err := subtree(h.Mount, rel)
		if err != nil {
			return err
		}
		for _, dir := range slices.Backward(dirs) {
			if err := rmdir(ctx, dir); err != nil {
				return err
			}
		}
	}
	return nil
}

// RemoveDir removes rel alone in every hierarchy, retrying while the kernel finishes
// with processes that just ended, until ctx ends. A cgroup with child cgroups is not
// removed: the error wraps ErrNotEmpty. A cgroup already gone is not an error.
func (f *FS) RemoveDir(ctx context.Context, rel string) error {
	if err := checkRel(rel); err != nil {
		return err
	}
	var errs []error
	for _, dir := range f.Dirs(rel) {
		if err := rmdir(ctx, dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// rmdir removes the cgroup at dir, retrying while it is busy with processes.
func rmdir(ctx context.Context, dir string) error {
	for {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.ENOTEMPTY) {
			if hasChild(dir) {
				return fmt.Errorf("remove cgroup %s: %w", dir, ErrNotEmpty)
			}
			if ctx.Err() == nil {
				sleep(ctx)
				continue
			}
		}
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
}

// hasChild reports whether the cgroup at dir has a child cgroup.
func hasChild(dir string) bool {
	entries, _ := os.ReadDir(dir)
	return slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.IsDir() })
}

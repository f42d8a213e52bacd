package cgroupfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// interval is how often Kill and Remove look again while they wait for the kernel.
const interval = 20 * time.Millisecond

// subtree returns the directories of rel and every cgroup below it in the hierarchy at
// mount, parents before their children; none when rel does not exist there.
func subtree(mount, rel string) ([]string, error) {
	var dirs []string
	root := filepath.Join(mount, rel)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed meanwhile
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list cgroups below %s: %w", root, err)
	}
	return dirs, nil
}

// readProcs returns the processes listed in dir's cgroup.procs, without PID 0 (a process
// outside the reader's PID namespace). A cgroup removed meanwhile has none.
func readProcs(dir string) []int {
	raw, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(raw)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out
}

// Procs returns the processes in rel and below, in any hierarchy, sorted.
func (f *FS) Procs(rel string) ([]int, error) {
	if err := checkRel(rel); err != nil {
		return nil, err
	}
	return f.procs(rel, nil)
}

// procs returns the processes in rel and below that spare does not keep, sorted.
func (f *FS) procs(rel string, spare func(int) bool) ([]int, error) {
	seen := map[int]bool{}
	for _, h := range f.hs {
		dirs, err := subtree(h.Mount, rel)
		if err != nil {
			return nil, err
		}
		for _, dir := range dirs {
			for _, pid := range readProcs(dir) {
				if spare == nil || !spare(pid) {
					seen[pid] = true
				}
			}
		}
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out, nil
}

// Kill kills every process in rel and below, in every hierarchy, but those spare keeps
// (nil spares none), and waits until none is listed. It returns how many processes it
// signalled, and an error naming those left when ctx ends first.
//
// In v2 it writes cgroup.kill of each cgroup of the subtree that holds no process to
// spare, which kills it and its descendants atomically, forks included; every process
// still listed is then sent SIGKILL (v1, and the spared processes' cgroups), until none
// is listed.
func (f *FS) Kill(ctx context.Context, rel string, spare func(pid int) bool) (int, error) {
	if err := checkRel(rel); err != nil {
		return 0, err
	}
	signalled := map[int]bool{}
	for {
		pids, err := f.procs(rel, spare)
		if err != nil {
			return len(signalled), err
		}
		if len(pids) == 0 {
			return len(signalled), nil
		}
		if ctx.Err() != nil {
			return len(signalled), fmt.Errorf("cgroup %s still holds processes %v: %w", rel, pids, context.Cause(ctx))
		}
		for _, h := range f.hs {
			if h.V2 {
				if err := killV2(h.Mount, rel, spare); err != nil {
					return len(signalled), err
				}
			}
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return len(signalled), fmt.Errorf("kill process %d of cgroup %s: %w", pid, rel, err)
			}
			signalled[pid] = true
		}
		sleep(ctx)
	}
}

// killV2 writes cgroup.kill of the top-most cgroups of rel's subtree, in the v2
// hierarchy at mount, that hold no process spare keeps, themselves or below. A kernel
// without cgroup.kill (before 5.14) leaves it to SIGKILL.
func killV2(mount, rel string, spare func(int) bool) error {
	dirs, err := subtree(mount, rel)
	if err != nil || len(dirs) == 0 {
		return err
	}
	// keep holds the cgroups with a spared process in their subtree.
	keep := map[string]bool{}
	if spare != nil {
		for _, dir := range dirs {
			if slices.ContainsFunc(readProcs(dir), spare) {
				for d := dir; !keep[d] && len(d) >= len(dirs[0]); d = filepath.Dir(d) {
					keep[d] = true
				}
			}
		}
	}
	for _, dir := range dirs {
		if keep[dir] || (dir != dirs[0] && !keep[filepath.Dir(dir)]) {
			continue // spared, or inside a cgroup killed whole
		}
		err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("kill cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// sleep waits for the next look, or until ctx ends.
func sleep(ctx context.Context) {
	t := time.NewTimer(interval)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

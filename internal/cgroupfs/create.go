package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// cpusetFiles are what a new v1 cpuset cgroup needs before it takes a process.
var cpusetFiles = []string{"cpuset.cpus", "cpuset.mems"}

// Missing returns the highest cgroup on rel's path (rel or one of its ancestors) that is
// missing in some hierarchy, "" when rel exists in all: what Create(rel) creates first,
// and the top of what its creator removes again.
func (f *FS) Missing(rel string) (string, error) {
	if err := checkRel(rel); err != nil {
		return "", err
	}
	missing := ""
	for dir := rel; dir != "/"; dir = filepath.Dir(dir) {
		for _, h := range f.hs {
			_, err := os.Stat(filepath.Join(h.Mount, dir))
			if errors.Is(err, fs.ErrNotExist) {
				missing = dir
				break
			}
			if err != nil {
				return "", fmt.Errorf("look for cgroup %s: %w", dir, err)
			}
		}
	}
	return missing, nil
}

// Create makes rel and its missing ancestors in every hierarchy; existing ones are kept.
// In a v1 cpuset hierarchy each level whose cpuset.cpus or cpuset.mems is empty gets its
// parent's. In v2, each ancestor of rel below the hierarchy's root delegates the
// controllers it has to its children (cgroup.subtree_control), where the kernel allows:
// not in a cgroup that holds processes, nor a controller its parent does not delegate.
func (f *FS) Create(rel string) error {
	if err := checkRel(rel); err != nil {
		return err
	}
	parts := strings.Split(strings.TrimPrefix(rel, "/"), "/")
	for _, h := range f.hs {
		cpuset := h.Has("cpuset")
		dir := h.Mount
		for _, p := range parts {
			parent := dir
			dir = filepath.Join(dir, p)
			if h.V2 && parent != h.Mount {
				delegate(parent)
			}
			if err := mkdir(dir); err != nil {
				return fmt.Errorf("create cgroup %s: %w", dir, err)
			}
			if cpuset {
				for _, file := range cpusetFiles {
					if err := inherit(parent, dir, file); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// delegate enables in dir's cgroup.subtree_control every controller dir has, one by one:
// the kernel refuses them all in a cgroup that holds processes, and may refuse one
// (a threaded controller's rules) without the others. Refusals are left as they are;
// the cgroup then works without that controller.
func delegate(dir string) {
	have, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return
	}
	on, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	enabled := strings.Fields(string(on))
	for _, c := range strings.Fields(string(have)) {
		if !slices.Contains(enabled, c) {
			_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0)
		}
	}
}

// mkdir creates dir, recreating a parent that disappears meanwhile: another user of a
// shared, empty parent (another local cloud) may remove it at the same moment.
func mkdir(dir string) error {
	var err error
	for range 5 {
		err = os.Mkdir(dir, 0o755)
		switch {
		case err == nil, errors.Is(err, fs.ErrExist):
			return nil
		case errors.Is(err, fs.ErrNotExist):
			if perr := mkdir(filepath.Dir(dir)); perr != nil {
				return perr
			}
			continue
		}
		return err
	}
	return err
}

// inherit copies a v1 cpuset file from parent to child when the child's is empty.
func inherit(parent, child, file string) error {
	cur, err := os.ReadFile(filepath.Join(child, file))
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Join(child, file), err)
	}
	if strings.TrimSpace(string(cur)) != "" {
		return nil
	}
	v, err := os.ReadFile(filepath.Join(parent, file))
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Join(parent, file), err)
	}
	if err := os.WriteFile(filepath.Join(child, file), v, 0); err != nil {
		return fmt.Errorf("set %s: %w", filepath.Join(child, file), err)
	}
	return nil
}

package kubenode

import (
	"bufio"
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

	"github.com/go-logr/logr"

	"github.com/nephele-dev/nephele/internal/mountinfo"
	"github.com/nephele-dev/nephele/internal/procstat"
)

// runtimeLeaf is the cgroup, under the node's cgroup root, that the runtime and the
// processes it starts (containerd, its shims, kubelet, kube-proxy) live in. Pods live in
// kubelet's kubepods beside it. A leaf of its own also keeps cgroup v2's rule that a
// cgroup with processes has no controlled children.
const runtimeLeaf = "node-runtime"

// cgroups is the node's cgroup subtree in every hierarchy of the machine.
type cgroups struct {
	root string // the node's cgroup root, e.g. /nephele/hosts/node-a
	// mounts are the mount points of the hierarchies (cgroup v1 controllers, the named
	// systemd hierarchy, the v2 unified hierarchy).
	mounts []string
	v2     map[string]bool
	// origin is where the runtime was in each hierarchy before joining its leaf.
	origin map[string]string
	// createdTop is the highest cgroup of the root's path that the runtime created,
	// "" when the root existed: the runtime removes what it created, up to there. It is
	// recorded in marker, so that the boot after a crash still knows.
	createdTop string
	marker     string
	log        logr.Logger
}

// newCgroups finds the machine's cgroup hierarchies.
// marker is the file that records which cgroups the runtime created.
func newCgroups(root, marker string, log logr.Logger) (*cgroups, error) {
	all, err := mountinfo.Read()
	if err != nil {
		return nil, err
	}
	cg := &cgroups{root: root, marker: marker, v2: map[string]bool{}, log: log}
	for _, m := range all {
		if m.FSType == "cgroup" || m.FSType == "cgroup2" {
			cg.mounts = append(cg.mounts, m.Point)
			cg.v2[m.Point] = m.FSType == "cgroup2"
		}
	}
	if len(cg.mounts) == 0 {
		return nil, errors.New("no cgroup hierarchy is mounted")
	}
	return cg, nil
}

// ensure creates the root and the runtime's leaf in every hierarchy. cpuset cgroups get
// their parent's CPUs and memory nodes (a new v1 cpuset has none, and takes no process);
// on cgroup v2 the controllers are enabled down to the root.
func (cg *cgroups) ensure() error {
	cg.createdTop = ""
	for dir := cg.root; dir != "/"; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(cg.mounts[0], dir)); errors.Is(err, fs.ErrNotExist) {
			cg.createdTop = dir
		}
	}
	if cg.createdTop != "" {
		if err := (File{Path: cg.marker, Data: []byte(cg.createdTop + "\n"), Mode: 0o644}).write(); err != nil {
			return fmt.Errorf("record the node's cgroups: %w", err)
		}
	} else if data, err := os.ReadFile(cg.marker); err == nil {
		// A boot that crashed created them.
		if top := strings.TrimSpace(string(data)); under(cg.root, top) {
			cg.createdTop = top
		}
	}
	for _, mnt := range cg.mounts {
		for _, dir := range []string{cg.root, filepath.Join(cg.root, runtimeLeaf)} {
			if err := cg.mkdir(mnt, dir); err != nil {
				return err
			}
		}
	}
	return nil
}

// mkdir creates dir (a cgroup path) in the hierarchy at mnt, level by level.
func (cg *cgroups) mkdir(mnt, dir string) error {
	parts := strings.Split(strings.Trim(dir, "/"), "/")
	path := mnt
	for _, p := range parts {
		parent := path
		if cg.v2[mnt] {
			// Best effort: a controller the parent does not have cannot be enabled.
			if ctrls, err := os.ReadFile(filepath.Join(parent, "cgroup.controllers")); err == nil {
				for _, c := range strings.Fields(string(ctrls)) {
					_ = os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+"+c), 0)
				}
			}
		}
		path = filepath.Join(path, p)
		if err := os.Mkdir(path, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create cgroup %s: %w", path, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if err := inheritCpuset(parent, path, f); err != nil {
				return err
			}
		}
	}
	return nil
}

// inheritCpuset copies a v1 cpuset file from parent when the child's is empty.
func inheritCpuset(parent, child, file string) error {
	have, err := os.ReadFile(filepath.Join(child, file))
	if err != nil || strings.TrimSpace(string(have)) != "" {
		return nil // not a cpuset hierarchy, or already set
	}
	want, err := os.ReadFile(filepath.Join(parent, file))
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Join(parent, file), err)
	}
	if err := os.WriteFile(filepath.Join(child, file), want, 0); err != nil {
		return fmt.Errorf("set %s: %w", filepath.Join(child, file), err)
	}
	return nil
}

// join moves the runtime into its leaf in every hierarchy; the processes it starts are
// born there.
func (cg *cgroups) join() error {
	cg.origin = map[string]string{}
	self, err := selfCgroups()
	if err != nil {
		return err
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	for _, mnt := range cg.mounts {
		cg.origin[mnt] = self[cg.hierarchyKey(mnt)]
		if err := os.WriteFile(filepath.Join(mnt, cg.root, runtimeLeaf, "cgroup.procs"), pid, 0); err != nil {
			return fmt.Errorf("join cgroup %s in %s: %w", filepath.Join(cg.root, runtimeLeaf), mnt, err)
		}
	}
	return nil
}

// hierarchyKey is how /proc/self/cgroup names the hierarchy mounted at mnt: the
// controllers (cpu,cpuacct), name=systemd, or "" for v2.
func (cg *cgroups) hierarchyKey(mnt string) string {
	if cg.v2[mnt] {
		return ""
	}
	base := filepath.Base(mnt)
	if base == "systemd" {
		return "name=systemd"
	}
	return base
}

// selfCgroups reads /proc/self/cgroup: hierarchy key to cgroup path.
func selfCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("read own cgroups: %w", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		out[parts[1]] = parts[2]
		// A hierarchy of several controllers is mounted at one of their names, or at all
		// of them joined; index every name.
		for _, c := range strings.Split(parts[1], ",") {
			if _, ok := out[c]; !ok {
				out[c] = parts[2]
			}
		}
	}
	return out, sc.Err()
}

// pids returns every process in the node's subtree, in any hierarchy, except the runtime
// itself and its ancestors (the host's supervisor may share the root).
func (cg *cgroups) pids() ([]int, error) {
	spare := ancestry()
	seen := map[int]bool{}
	for _, mnt := range cg.mounts {
		root := filepath.Join(mnt, cg.root)
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if !d.IsDir() {
				return nil
			}
			data, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			if err != nil {
				return nil // removed meanwhile
			}
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && !spare[pid] {
					seen[pid] = true
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list processes of cgroup %s: %w", root, err)
		}
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out, nil
}

// ancestry is the runtime's process and its ancestors.
func ancestry() map[int]bool {
	out := map[int]bool{}
	out[os.Getpid()] = true
	for _, pid := range procstat.Ancestors(os.Getpid()) {
		out[pid] = true
	}
	return out
}

// killAll kills every process of the node's subtree but the runtime's own and waits,
// up to timeout, until they are gone. It returns how many it killed.
func (cg *cgroups) killAll(timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	killed := map[int]bool{}
	for {
		pids, err := cg.pids()
		if err != nil {
			return len(killed), err
		}
		if len(pids) == 0 {
			return len(killed), nil
		}
		if time.Now().After(deadline) {
			return len(killed), fmt.Errorf("processes %v of cgroup %s still alive after %s", pids, cg.root, timeout)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed[pid] = true
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// removeChildren removes every cgroup of the node but the root and the runtime's leaf
// (kubelet's kubepods and pods' cgroups), deepest first.
func (cg *cgroups) removeChildren() error {
	var errs []error
	for _, mnt := range cg.mounts {
		root := filepath.Join(mnt, cg.root)
		keep := map[string]bool{root: true, filepath.Join(root, runtimeLeaf): true}
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() && !keep[path] {
				dirs = append(dirs, path)
			}
			return nil
		})
		// Walk order is lexical with parents first: reversed, children come first.
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := rmdirCgroup(dirs[i]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// leave moves the runtime back where it came from and removes its leaf, and the root
// when the runtime created it.
func (cg *cgroups) leave() error {
	var errs []error
	pid := []byte(strconv.Itoa(os.Getpid()))
	for _, mnt := range cg.mounts {
		if origin, ok := cg.origin[mnt]; ok {
			if err := os.WriteFile(filepath.Join(mnt, origin, "cgroup.procs"), pid, 0); err != nil {
				errs = append(errs, fmt.Errorf("leave cgroup %s in %s: %w", cg.root, mnt, err))
				continue
			}
		}
		if err := rmdirCgroup(filepath.Join(mnt, cg.root, runtimeLeaf)); err != nil {
			errs = append(errs, err)
		}
		if cg.createdTop == "" {
			continue
		}
		for dir := cg.root; ; dir = filepath.Dir(dir) {
			if err := rmdirCgroup(filepath.Join(mnt, dir)); err != nil {
				errs = append(errs, err)
				break
			}
			if dir == cg.createdTop {
				break
			}
		}
	}
	if len(errs) == 0 && cg.createdTop != "" {
		if err := os.Remove(cg.marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// rmdirCgroup removes an empty cgroup, retrying for a moment while the kernel finishes
// with processes that just died.
func rmdirCgroup(dir string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

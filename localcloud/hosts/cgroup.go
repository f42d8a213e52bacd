package hosts

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
)

// cgroupRoot is the first element of every cgroup the package makes: hosts live under
// /nephele/<bridge>/<instance ID> in every hierarchy.
const cgroupRoot = "/nephele"

// cgroups are the machine's cgroup hierarchies: the v1 ones (cgroups v1 or hybrid) and
// the unified v2 one.
type cgroups struct {
	v1      []string // mount points of v1 hierarchies
	unified string   // mount point of the v2 hierarchy, "" if none
}

// discoverCgroups reads the hierarchies from /proc/self/mountinfo.
func discoverCgroups() (*cgroups, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	defer func() { _ = f.Close() }()
	c := &cgroups{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 1 || seen[pf[4]] {
			continue
		}
		switch qf[0] {
		case "cgroup":
			c.v1 = append(c.v1, pf[4])
		case "cgroup2":
			if c.unified == "" {
				c.unified = pf[4]
			}
		default:
			continue
		}
		seen[pf[4]] = true
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	if len(c.v1) == 0 && c.unified == "" {
		return nil, errors.New("no cgroup file system is mounted")
	}
	return c, nil
}

// roots returns every hierarchy's mount point.
func (c *cgroups) roots() []string {
	out := slices.Clone(c.v1)
	if c.unified != "" {
		out = append(out, c.unified)
	}
	return out
}

// checkRel refuses a relative path that is not a host's (or the shared parents') cgroup:
// killing or removing "/" would take the whole machine.
func checkRel(rel string) error {
	if !strings.HasPrefix(rel, cgroupRoot+"/") || filepath.Clean(rel) != rel {
		return fmt.Errorf("cgroup %q is not one of the local cloud's", rel)
	}
	return nil
}

// create makes rel and its parents in every hierarchy. In v1 cpuset hierarchies each new
// level gets its parent's cpuset.cpus and cpuset.mems: a cpuset without them admits no
// process.
func (c *cgroups) create(rel string) error {
	if err := checkRel(rel); err != nil {
		return err
	}
	parts := strings.Split(strings.TrimPrefix(rel, "/"), "/")
	for _, root := range c.roots() {
		_, statErr := os.Stat(filepath.Join(root, "cpuset.cpus"))
		cpuset := statErr == nil && slices.Contains(c.v1, root)
		dir := root
		for _, p := range parts {
			parent := dir
			dir = filepath.Join(dir, p)
			if err := mkdirRetry(dir); err != nil {
				return fmt.Errorf("creating cgroup %s: %w", dir, err)
			}
			if cpuset {
				for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
					if err := inherit(parent, dir, file); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// mkdirRetry creates dir, retrying when a parent disappears meanwhile: another local
// cloud removing the shared, empty /nephele at the same moment.
func mkdirRetry(dir string) error {
	var err error
	for range 5 {
		err = os.Mkdir(dir, 0o755)
		switch {
		case err == nil, errors.Is(err, fs.ErrExist):
			return nil
		case errors.Is(err, fs.ErrNotExist):
			if perr := mkdirRetry(filepath.Dir(dir)); perr != nil {
				return perr
			}
			continue
		}
		return err
	}
	return err
}

// inherit copies a cpuset file from parent to child when the child's is empty.
func inherit(parent, child, file string) error {
	cur, err := os.ReadFile(filepath.Join(child, file))
	if err != nil {
		return fmt.Errorf("reading %s: %w", filepath.Join(child, file), err)
	}
	if strings.TrimSpace(string(cur)) != "" {
		return nil
	}
	v, err := os.ReadFile(filepath.Join(parent, file))
	if err != nil {
		return fmt.Errorf("reading %s: %w", filepath.Join(parent, file), err)
	}
	if err := os.WriteFile(filepath.Join(child, file), v, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Join(child, file), err)
	}
	return nil
}

// procsFiles returns rel's cgroup.procs file in every hierarchy: a process joins the
// host's cgroups by writing its PID into each.
func (c *cgroups) procsFiles(rel string) []string {
	var out []string
	for _, root := range c.roots() {
		out = append(out, filepath.Join(root, rel, "cgroup.procs"))
	}
	return out
}

// exists reports whether rel exists in every hierarchy.
func (c *cgroups) exists(rel string) bool {
	for _, root := range c.roots() {
		if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
			return false
		}
	}
	return true
}

// subtree returns rel and every cgroup below it in one hierarchy, deepest first.
func subtree(root, rel string) []string {
	var dirs []string
	_ = filepath.WalkDir(filepath.Join(root, rel), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	slices.Reverse(dirs)
	return dirs
}

// procs returns the processes in rel and below, in every hierarchy.
func (c *cgroups) procs(rel string) []int {
	seen := map[int]bool{}
	var out []int
	for _, root := range c.roots() {
		for _, dir := range subtree(root, rel) {
			raw, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(raw)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 0 && !seen[pid] {
					seen[pid] = true
					out = append(out, pid)
				}
			}
		}
	}
	return out
}

// kill ends every process in rel and below, in every hierarchy, and waits until none is
// left. In the unified hierarchy cgroup.kill ends the whole subtree atomically, forks
// included; in v1 hierarchies each process listed is sent SIGKILL until none is listed.
func (c *cgroups) kill(rel string, timeout time.Duration) error {
	if err := checkRel(rel); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		if c.unified != "" {
			err := os.WriteFile(filepath.Join(c.unified, rel, "cgroup.kill"), []byte("1"), 0o644)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("killing cgroup %s: %w", rel, err)
			}
		}
		pids := c.procs(rel)
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s still holds processes %v after %s of SIGKILL", rel, pids, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// remove deletes rel and every cgroup below it in every hierarchy. A cgroup that still
// holds processes cannot be removed; they are killed first.
func (c *cgroups) remove(rel string, timeout time.Duration) error {
	if err := c.kill(rel, timeout); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for _, root := range c.roots() {
		for _, dir := range subtree(root, rel) {
			for {
				err := syscall.Rmdir(dir)
				if err == nil || errors.Is(err, syscall.ENOENT) {
					break
				}
				if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
					return fmt.Errorf("removing cgroup %s: %w", dir, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	return nil
}

// removeIfEmpty removes rel in every hierarchy when it has no child cgroup and no process:
// the shared parents, which another local cloud may still use.
func (c *cgroups) removeIfEmpty(rel string) {
	for _, root := range c.roots() {
		_ = syscall.Rmdir(filepath.Join(root, rel))
	}
}

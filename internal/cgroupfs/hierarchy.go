package cgroupfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nephele-dev/nephele/internal/mountinfo"
)

// Hierarchy is one mounted cgroup hierarchy.
type Hierarchy struct {
	// Mount is where the hierarchy is mounted, e.g. /sys/fs/cgroup/cpu,cpuacct.
	Mount string
	// V2 is set for the unified (cgroup2) hierarchy.
	V2 bool
	// Options are the hierarchy's super options: for v1 its controllers and its name,
	// e.g. [rw cpu cpuacct] or [rw xattr name=systemd].
	Options []string
}

// Has reports whether controller (such as "cpuset", or "name=systemd") is bound to the
// v1 hierarchy. It is false for v2, whose controllers are per cgroup.
func (h Hierarchy) Has(controller string) bool {
	return !h.V2 && slices.Contains(h.Options, controller)
}

// FS is the machine's cgroup hierarchies, each once.
type FS struct {
	hs []Hierarchy
}

// Discover finds the cgroup hierarchies mounted in the calling process's mount namespace.
func Discover() (*FS, error) {
	mounts, err := mountinfo.Read()
	if err != nil {
		return nil, fmt.Errorf("find cgroup hierarchies: %w", err)
	}
	return FromMounts(mounts)
}

// FromMounts returns the cgroup hierarchies of a mount table, in its order. A hierarchy
// mounted several times (one device) is taken once, at the first mount of its whole
// tree (root "/"), or at its first mount when none is. It fails when there is none.
func FromMounts(mounts []mountinfo.Mount) (*FS, error) {
	type dev struct{ major, minor int }
	type kept struct {
		i     int
		whole bool
	}
	at := map[dev]kept{}
	fs := &FS{}
	for _, m := range mounts {
		if m.FSType != "cgroup" && m.FSType != "cgroup2" {
			continue
		}
		h := Hierarchy{Mount: m.Point, V2: m.FSType == "cgroup2", Options: strings.Split(m.SuperOptions, ",")}
		d := dev{m.Major, m.Minor}
		if k, ok := at[d]; ok {
			if m.Root == "/" && !k.whole {
				fs.hs[k.i] = h
				at[d] = kept{k.i, true}
			}
			continue
		}
		at[d] = kept{len(fs.hs), m.Root == "/"}
		fs.hs = append(fs.hs, h)
	}
	if len(fs.hs) == 0 {
		return nil, errors.New("no cgroup hierarchy is mounted")
	}
	return fs, nil
}

// Hierarchies returns the hierarchies, in mount table order.
func (f *FS) Hierarchies() []Hierarchy {
	return slices.Clone(f.hs)
}

// Dirs returns rel's directory in every hierarchy, whether it exists or not.
func (f *FS) Dirs(rel string) []string {
	out := make([]string, 0, len(f.hs))
	for _, h := range f.hs {
		out = append(out, filepath.Join(h.Mount, rel))
	}
	return out
}

// ProcsFiles returns rel's cgroup.procs file in every hierarchy: a process joins rel by
// writing its PID into each (what Join does, for a process that joins itself).
func (f *FS) ProcsFiles(rel string) []string {
	out := f.Dirs(rel)
	for i := range out {
		out[i] = filepath.Join(out[i], "cgroup.procs")
	}
	return out
}

// Exists reports whether rel exists in every hierarchy.
func (f *FS) Exists(rel string) bool {
	for _, dir := range f.Dirs(rel) {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// checkRel refuses a path that is not a clean absolute cgroup path below the root.
func checkRel(rel string) error {
	if !strings.HasPrefix(rel, "/") || filepath.Clean(rel) != rel || rel == "/" {
		return fmt.Errorf("cgroup %q is not a clean absolute path below the root", rel)
	}
	return nil
}

// Placement is where a process is: its cgroup path in each hierarchy, by mount point.
type Placement map[string]string

// Locate returns the cgroups process pid is in, from /proc/<pid>/cgroup.
func (f *FS) Locate(pid int) (Placement, error) {
	file, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return nil, fmt.Errorf("read cgroups of process %d: %w", pid, err)
	}
	defer func() { _ = file.Close() }()
	p, err := f.parsePlacement(file)
	if err != nil {
		return nil, fmt.Errorf("cgroups of process %d: %w", pid, err)
	}
	return p, nil
}

// parsePlacement reads the format of /proc/<pid>/cgroup (cgroups(7)), a line per
// hierarchy: "hierarchy-ID:controller-list:cgroup-path", with ID 0 and an empty list for
// v2. A v1 hierarchy's line is the one whose controllers (and name=) are all among its
// options. Every hierarchy must have its line.
func (f *FS) parsePlacement(r io.Reader) (Placement, error) {
	type line struct{ id, ctrls, path string }
	var lines []line
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			return nil, fmt.Errorf("malformed cgroup line %q", sc.Text())
		}
		lines = append(lines, line{parts[0], parts[1], parts[2]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	p := Placement{}
	for _, h := range f.hs {
		i := slices.IndexFunc(lines, func(l line) bool {
			if h.V2 {
				return l.id == "0" && l.ctrls == ""
			}
			if l.ctrls == "" {
				return false
			}
			for _, c := range strings.Split(l.ctrls, ",") {
				if !h.Has(c) {
					return false
				}
			}
			return true
		})
		if i < 0 {
			return nil, fmt.Errorf("no line for the hierarchy at %s", h.Mount)
		}
		p[h.Mount] = lines[i].path
	}
	return p, nil
}

// Place moves process pid into the cgroups of p, such as where Locate found it before it
// joined another cgroup.
func (f *FS) Place(pid int, p Placement) error {
	var errs []error
	for _, h := range f.hs {
		rel, ok := p[h.Mount]
		if !ok {
			errs = append(errs, fmt.Errorf("move process %d: no cgroup for the hierarchy at %s", pid, h.Mount))
			continue
		}
		if err := writePID(filepath.Join(h.Mount, rel), pid); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Join moves process pid into rel in every hierarchy; the processes it starts later are
// born there.
func (f *FS) Join(pid int, rel string) error {
	if err := checkRel(rel); err != nil {
		return err
	}
	for _, dir := range f.Dirs(rel) {
		if err := writePID(dir, pid); err != nil {
			return err
		}
	}
	return nil
}

// writePID moves pid into the cgroup at dir.
func writePID(dir string, pid int) error {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("move process %d into cgroup %s: %w", pid, dir, err)
	}
	return nil
}

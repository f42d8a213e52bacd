package kubenode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nephele-dev/nephele/internal/cgroupfs"
	"github.com/nephele-dev/nephele/internal/procstat"
)

// runtimeLeaf is the cgroup, under the node's cgroup root, that the runtime and the
// processes it starts (containerd, its shims, kubelet, kube-proxy) live in. Pods live in
// kubelet's kubepods beside it. A leaf of its own also keeps cgroup v2's rule that a
// cgroup with processes has no controlled children.
const runtimeLeaf = "node-runtime"

// cgroupTimeout bounds each wait of the node's cgroups: for killed processes to go, and
// for the kernel to let a cgroup whose processes just died be removed.
const cgroupTimeout = 10 * time.Second

// cgroups is the node's cgroup subtree in every hierarchy of the machine.
type cgroups struct {
	fs   *cgroupfs.FS
	root string // the node's cgroup root, e.g. /nephele/hosts/node-a
	// origin is where the runtime was before joining its leaf.
	origin cgroupfs.Placement
	// createdTop is the highest cgroup of the root's path that the runtime created,
	// "" when the root existed: the runtime removes what it created, up to there. It is
	// recorded in marker, so that the boot after a crash still knows.
	createdTop string
	marker     string
}

// newCgroups finds the machine's cgroup hierarchies.
// marker is the file that records which cgroups the runtime created.
func newCgroups(root, marker string) (*cgroups, error) {
	fs, err := cgroupfs.Discover()
	if err != nil {
		return nil, err
	}
	return &cgroups{fs: fs, root: root, marker: marker}, nil
}

// leaf is the runtime's own cgroup.
func (cg *cgroups) leaf() string { return filepath.Join(cg.root, runtimeLeaf) }

// ensure creates the root and the runtime's leaf in every hierarchy (cgroupfs.FS.Create:
// cpusets copied, controllers delegated), recording first which of them it creates.
func (cg *cgroups) ensure() error {
	top, err := cg.fs.Missing(cg.root)
	if err != nil {
		return err
	}
	cg.createdTop = top
	if top != "" {
		if err := (File{Path: cg.marker, Data: []byte(top + "\n"), Mode: 0o644}).write(); err != nil {
			return fmt.Errorf("record the node's cgroups: %w", err)
		}
	} else if data, err := os.ReadFile(cg.marker); err == nil {
		// A boot that crashed created them.
		if top := strings.TrimSpace(string(data)); under(cg.root, top) {
			cg.createdTop = top
		}
	}
	return cg.fs.Create(cg.leaf())
}

// join moves the runtime into its leaf in every hierarchy; the processes it starts are
// born there.
func (cg *cgroups) join() error {
	origin, err := cg.fs.Locate(os.Getpid())
	if err != nil {
		return err
	}
	cg.origin = origin
	return cg.fs.Join(os.Getpid(), cg.leaf())
}

// killAll kills every process of the node's subtree but the runtime and its ancestors
// (the host's supervisor may share the root) and waits until they are gone. It returns
// how many it killed.
func (cg *cgroups) killAll(ctx context.Context) (int, error) {
	spare := map[int]bool{os.Getpid(): true}
	for _, pid := range procstat.Ancestors(os.Getpid()) {
		spare[pid] = true
	}
	ctx, cancel := context.WithTimeout(ctx, cgroupTimeout)
	defer cancel()
	return cg.fs.Kill(ctx, cg.root, func(pid int) bool { return spare[pid] })
}

// removeChildren removes every cgroup of the node but the root and the runtime's leaf
// (kubelet's kubepods and pods' cgroups), deepest first.
func (cg *cgroups) removeChildren(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, cgroupTimeout)
	defer cancel()
	var errs []error
	for _, parent := range []string{cg.root, cg.leaf()} {
		names, err := cg.fs.Children(parent)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, name := range names {
			if parent == cg.root && name == runtimeLeaf {
				continue
			}
			if err := cg.fs.Remove(ctx, filepath.Join(parent, name)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// leave moves the runtime back where it came from and removes its leaf, and the root
// and its parents up to the top when the runtime created them.
func (cg *cgroups) leave(ctx context.Context) error {
	if cg.origin != nil {
		if err := cg.fs.Place(os.Getpid(), cg.origin); err != nil {
			return fmt.Errorf("leave the node's cgroup %s: %w", cg.root, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cgroupTimeout)
	defer cancel()
	if err := cg.fs.RemoveDir(ctx, cg.leaf()); err != nil {
		return err
	}
	if cg.createdTop == "" {
		return nil
	}
	for dir := cg.root; ; dir = filepath.Dir(dir) {
		if err := cg.fs.RemoveDir(ctx, dir); err != nil {
			return err
		}
		if dir == cg.createdTop {
			break
		}
	}
	if err := os.Remove(cg.marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

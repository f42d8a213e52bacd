package hosts

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/nephele-dev/nephele/internal/cgroupfs"
)

// cgroupRoot is the first element of every cgroup the package makes: hosts live under
// /nephele/<bridge>/<instance ID> in every hierarchy.
const cgroupRoot = "/nephele"

// cgroups are the machine's cgroup hierarchies as the hosts use them: only below
// cgroupRoot, with the package's timeouts.
type cgroups struct {
	fs *cgroupfs.FS
}

// discoverCgroups finds the machine's cgroup hierarchies.
func discoverCgroups() (*cgroups, error) {
	fs, err := cgroupfs.Discover()
	if err != nil {
		return nil, err
	}
	return &cgroups{fs: fs}, nil
}

// checkRel refuses a relative path that is not a host's (or the shared parents') cgroup:
// killing or removing anything else could take what is not the local cloud's.
func checkRel(rel string) error {
	if !strings.HasPrefix(rel, cgroupRoot+"/") || filepath.Clean(rel) != rel {
		return fmt.Errorf("cgroup %q is not one of the local cloud's", rel)
	}
	return nil
}

// create makes rel and its parents in every hierarchy (see cgroupfs.FS.Create).
func (c *cgroups) create(rel string) error {
	if err := checkRel(rel); err != nil {
		return err
	}
	return c.fs.Create(rel)
}

// procsFiles returns rel's cgroup.procs file in every hierarchy: a process joins the
// host's cgroups by writing its PID into each.
func (c *cgroups) procsFiles(rel string) []string {
	return c.fs.ProcsFiles(rel)
}

// exists reports whether rel exists in every hierarchy.
func (c *cgroups) exists(rel string) bool {
	return c.fs.Exists(rel)
}

// kill ends every process in rel and below, in every hierarchy, and waits up to timeout
// until none is left. It returns how many processes it killed.
func (c *cgroups) kill(rel string, timeout time.Duration) (int, error) {
	if err := checkRel(rel); err != nil {
		return 0, err
	}
	// Not the caller's context: a host is taken down also when the request that asked
	// for it has gone.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.fs.Kill(ctx, rel, nil)
}

// remove deletes rel and every cgroup below it in every hierarchy, killing what is left
// in them first; each step waits up to timeout.
func (c *cgroups) remove(rel string, timeout time.Duration) error {
	if _, err := c.kill(rel, timeout); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.fs.Remove(ctx, rel)
}

// removeIfEmpty removes rel, one of the shared parents, in every hierarchy unless
// another local cloud still has hosts below it.
func (c *cgroups) removeIfEmpty(rel string) error {
	if rel != cgroupRoot {
		if err := checkRel(rel); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	if err := c.fs.RemoveDir(ctx, rel); err != nil && !errors.Is(err, cgroupfs.ErrNotEmpty) {
		return err
	}
	return nil
}

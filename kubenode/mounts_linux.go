package kubenode

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	"github.com/nephele-dev/nephele/internal/mountinfo"
	"github.com/nephele-dev/nephele/internal/procstat"
)

// privateSource is the source name of every filesystem the runtime mounts, so that its
// mounts are recognised in /proc/self/mountinfo, also after a crash.
const privateSource = "nephele-node"

// privateTrees are the directories that are the node's own inside its mount namespace, a
// fresh tmpfs each like on a machine that just started. kubelet, containerd and runc use
// fixed paths under them that would otherwise be shared by every node of the machine
// (/var/lib/kubelet/device-plugins, /var/log/containers, /run/containerd/s,
// /var/lib/cni), and nothing is left behind on the machine's own disk.
var privateTrees = []string{"/run", "/var/lib", "/var/log"}

// privateTreeSize bounds each private tree: they hold sockets, locks and symlinks only.
const privateTreeSize = "size=64m,mode=0755"

// maskDir is where the values shown instead of the machine's sysctls are kept.
const maskDir = "/run/nephele-node/sysctl"

// kubeletSysctls are the machine-wide sysctls kubelet 1.36 checks at start, with the
// values it wants (setupKernelTunables in pkg/kubelet/cm). With protectKernelDefaults it
// fails instead of setting them, so the runtime shows it these values in the host's mount
// namespace, and the machine keeps its own.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// checkNamespaces refuses to run the node in the machine's own network or mount
// namespace: kube-proxy's and the CNI plugin's rules, the pod bridge and the runtime's
// mounts would land on the machine itself. A host's boot command is started into the
// host's namespaces by a process outside them (nsenter, unshare), so some ancestor of the
// runtime is in other namespaces; or it descends from a local cloud host's init, PID 1 of
// a PID namespace of the host's own, which hides every process outside (hostInit). When
// neither holds, the runtime is on the machine. (The machine's init would be the plain
// answer, but its namespaces may not be readable, even by root.)
func checkNamespaces() error {
	if hostInit() {
		return nil
	}
	for _, ns := range []struct{ file, what string }{{"net", "network"}, {"mnt", "mount"}} {
		self, err := os.Readlink("/proc/self/ns/" + ns.file)
		if err != nil {
			return fmt.Errorf("check %s namespace: %w", ns.what, err)
		}
		if !ancestorOutside(ns.file, self) {
			return fmt.Errorf("the node runtime runs in the %s namespace of every process it descends from (%s), the machine's: it must run inside a host (a local cloud instance, or nsenter into namespaces of its own)", ns.what, self)
		}
	}
	return nil
}

// hostInitName is the name a local cloud host's init runs under (localcloud/hosts'
// InitName; a test keeps the two equal).
const hostInitName = "nephele-host-init"

// initialPIDNamespace is the kernel's first PID namespace, the machine's, whose inode
// number is fixed (PROC_PID_INIT_INO).
const initialPIDNamespace = "pid:[4026531836]"

// hostInit reports whether the runtime runs in a PID namespace other than the
// machine's whose PID 1 is a local cloud host's init: a shell running the init under
// hostInitName, `sh -c <script> nephele-host-init <boot command>`.
func hostInit() bool {
	if ns, err := os.Readlink("/proc/self/ns/pid"); err != nil || ns == initialPIDNamespace {
		return false
	}
	cmdline, err := os.ReadFile("/proc/1/cmdline")
	if err != nil {
		return false
	}
	argv := strings.Split(string(cmdline), "\x00")
	return len(argv) > 3 && argv[1] == "-c" && argv[3] == hostInitName
}

// ancestorOutside reports whether an ancestor of the runtime is in another namespace of
// kind ns than self. Ancestors whose namespaces cannot be read end the search.
func ancestorOutside(ns, self string) bool {
	for _, pid := range procstat.Ancestors(os.Getpid()) {
		other, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/" + ns)
		if err != nil {
			return false
		}
		if other != self {
			return true
		}
	}
	return false
}

// keepPaths are the directories under the private trees that the node must still see:
// its host directory, its binaries, the files its configuration names. Nested paths are
// left out, as the outer one brings them.
func (n *Node) keepPaths() ([]string, error) {
	c := n.Config
	paths := []string{c.HostDir, c.BinDir, c.CNIBinDir, c.StaticPodDir, filepath.Dir(n.Binaries.Runc), filepath.Dir(c.APIServer.CAFile)}
	for _, cr := range []Credentials{c.Kubelet, c.KubeProxy} {
		for _, f := range []string{cr.Kubeconfig, cr.ClientCertFile, cr.ClientKeyFile, cr.TokenFile} {
			if f != "" {
				paths = append(paths, filepath.Dir(f))
			}
		}
	}
	for _, img := range c.Images {
		paths = append(paths, filepath.Dir(img))
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	var keep []string
	for _, p := range paths {
		for _, tree := range privateTrees {
			if p == tree {
				return nil, fmt.Errorf("%s is one of the directories a node makes its own (%s): keep the node's files and binaries elsewhere", p, strings.Join(privateTrees, ", "))
			}
		}
		if len(keep) > 0 && under(p, keep[len(keep)-1]) {
			continue
		}
		keep = append(keep, p)
	}
	return keep, nil
}

// privatize makes the node's mount namespace its own: nothing mounted in it propagates to
// the machine, the private trees are fresh tmpfs with keep bound back in, and kubelet
// sees the sysctl values it wants.
func privatize(keep []string, log logr.Logger) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make the mount namespace a slave of the machine's: %w", err)
	}
	for _, tree := range privateTrees {
		if err := privatizeTree(tree, keep); err != nil {
			return err
		}
	}
	if err := os.MkdirAll("/run/lock", 0o755); err != nil {
		return fmt.Errorf("create /run/lock: %w", err)
	}
	return maskSysctls(log)
}

// privatizeTree mounts a tmpfs over tree and binds back the paths of keep inside it,
// through file descriptors opened before the tmpfs hid them.
func privatizeTree(tree string, keep []string) error {
	type kept struct {
		path string
		fd   int
	}
	var inside []kept
	defer func() {
		for _, k := range inside {
			unix.Close(k.fd)
		}
	}()
	for _, p := range keep {
		if !under(p, tree) {
			continue
		}
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s to keep it inside the node: %w", p, err)
		}
		inside = append(inside, kept{p, fd})
	}
	if err := unix.Mount(privateSource, tree, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, privateTreeSize); err != nil {
		return fmt.Errorf("mount the node's own %s: %w", tree, err)
	}
	for _, k := range inside {
		if err := os.MkdirAll(k.path, 0o755); err != nil {
			return fmt.Errorf("keep %s inside the node: %w", k.path, err)
		}
		if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(k.fd), k.path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("keep %s inside the node: %w", k.path, err)
		}
	}
	return nil
}

// bindNodeDirs binds each of the node's directories to the standard path the node sees it
// at. The targets are in the private trees, fresh every boot, so nothing is bound twice.
func bindNodeDirs(binds []Bind) error {
	for _, b := range binds {
		for _, dir := range []string{b.Source, b.Target} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("bind %s to %s: %w", b.Source, b.Target, err)
			}
		}
		if err := unix.Mount(b.Source, b.Target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s to %s: %w", b.Source, b.Target, err)
		}
		// The namespace's root is a slave of the machine's, so the bind starts as a slave:
		// making it shared too starts a peer group inside the node only.
		if b.Shared {
			if err := unix.Mount("", b.Target, "", unix.MS_SHARED, ""); err != nil {
				return fmt.Errorf("make %s a shared mount: %w", b.Target, err)
			}
		}
	}
	return nil
}

// maskSysctls binds a file holding kubelet's value over each sysctl that differs.
func maskSysctls(log logr.Logger) error {
	if err := os.MkdirAll(maskDir, 0o755); err != nil {
		return fmt.Errorf("mask sysctls: %w", err)
	}
	for _, name := range slices.Sorted(maps.Keys(kubeletSysctls)) {
		want := kubeletSysctls[name]
		target := "/proc/sys/" + name
		have, err := os.ReadFile(target)
		if err != nil {
			return fmt.Errorf("read sysctl %s: %w", name, err)
		}
		if strings.TrimSpace(string(have)) == want {
			continue
		}
		mask := filepath.Join(maskDir, strings.ReplaceAll(name, "/", "."))
		if err := os.WriteFile(mask, []byte(want+"\n"), 0o444); err != nil {
			return fmt.Errorf("mask sysctl %s: %w", name, err)
		}
		if err := unix.Mount(mask, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mask sysctl %s: %w", name, err)
		}
		// Read-only, so that even a kubelet told to modify them cannot write through.
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("mask sysctl %s read-only: %w", name, err)
		}
		log.V(1).Info("Sysctl masked for kubelet", "sysctl", strings.ReplaceAll(name, "/", "."), "machine", strings.TrimSpace(string(have)), "shown", want)
	}
	return nil
}

// unmountAll takes down every mount of the node, children first: the private trees and
// what is bound into them, the sysctl masks (all of source privateSource), and whatever
// containerd and kubelet mounted under the node's directory (snapshots, pod network
// namespaces, volumes). It also finds those of a runtime that crashed.
func unmountAll(nodeDir string, log logr.Logger) error {
	mounts, err := mountinfo.Read()
	if err != nil {
		return err
	}
	order := unmountOrder(mounts, func(m mountinfo.Mount) bool {
		return m.Source == privateSource || under(m.Point, nodeDir)
	})
	var errs []error
	for _, m := range order {
		err := unix.Unmount(m.Point, 0)
		if errors.Is(err, unix.EBUSY) {
			log.Info("Mount busy; detaching it", "path", m.Point)
			err = unix.Unmount(m.Point, unix.MNT_DETACH)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m.Point, err))
		}
	}
	if len(order) > 0 {
		log.V(1).Info("Unmounted the node's mounts", "count", len(order))
	}
	return errors.Join(errs...)
}

// leftoverMounts returns the node's mounts still in the mount namespace.
func leftoverMounts(nodeDir string) ([]string, error) {
	mounts, err := mountinfo.Read()
	if err != nil {
		return nil, err
	}
	var left []string
	for _, m := range mounts {
		if m.Source == privateSource || under(m.Point, nodeDir) {
			left = append(left, m.Point)
		}
	}
	return left, nil
}

package localcluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// Problem is one thing this machine lacks for real nodes, and how to get it.
type Problem struct {
	// Missing says what is missing.
	Missing string
	// Fix is the command or step that provides it.
	Fix string
}

// PreflightError lists everything this machine lacks for a cluster. Nothing was changed
// on the machine when it is returned.
type PreflightError struct {
	Problems []Problem
	// Kwok is set when the cluster was of kwok nodes, which need only binaries.
	Kwok bool
}

func (e *PreflightError) Error() string {
	var b strings.Builder
	if e.Kwok {
		b.WriteString("a cluster of kwok nodes cannot run on this machine:")
	} else {
		b.WriteString("real nodes cannot run on this machine:")
	}
	for _, p := range e.Problems {
		fmt.Fprintf(&b, "\n  - %s\n    fix: %s", p.Missing, p.Fix)
	}
	return b.String()
}

// nodeDep is a program of the machine that real nodes run, and the Debian package it
// comes with. The same list is in hack/install-node-deps.sh, which make node-deps runs
// (a test keeps the two equal).
type nodeDep struct{ command, pkg string }

var nodeDeps = []nodeDep{
	{"runc", "runc"},
	{"iptables", "iptables"},
	{"iptables-restore", "iptables"},
	{"ip6tables", "iptables"},
	{"mount", "mount"},
	{"umount", "mount"},
	{"nsenter", "util-linux"},
	{"unshare", "util-linux"},
	{"ip", "iproute2"},
	{"blkid", "util-linux"},
	{"fsck", "util-linux"},
	{"mkfs.ext4", "e2fsprogs"},
	{"resize2fs", "e2fsprogs"},
	{"blockdev", "util-linux"},
	{"e2fsck", "e2fsprogs"},
	{"dumpe2fs", "e2fsprogs"},
	{"mkfs.xfs", "xfsprogs"},
	{"xfs_growfs", "xfsprogs"},
}

// Capabilities real nodes need besides being root: the machine may be a container that
// dropped them.
var nodeCapabilities = []struct {
	bit  uint
	name string
	why  string
}{
	{21, "CAP_SYS_ADMIN", "namespaces, mounts and cgroups"},
	{12, "CAP_NET_ADMIN", "the bridge, veths, routes and iptables"},
}

// Binaries a cluster runs from BinDir, by who provides them. toolBinaries and
// kwokToolBinaries are what `make tools` builds (the Makefile's TOOL_BINS, the source,
// which TestToolBinariesMatchTheMakefile keeps them equal to) less what only tests run.
var (
	toolBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
		"kubelet", "kube-proxy", "kubectl", "containerd", "containerd-shim-runc-v2", "ctr",
		"cni/bridge", "cni/host-local", "cni/loopback", "cni/portmap", "coredns"}
	// kwokToolBinaries are the programs of make tools a cluster of kwok nodes runs.
	kwokToolBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}
	// BuiltBinaries are nephele's own commands a cluster of real nodes runs, which
	// Config.BuildFrom builds (or make build).
	BuiltBinaries = []string{"localcloud", "cloud-controller-manager", "nephele"}
	// kwokBuiltBinaries are those a cluster of kwok nodes runs: no node boots nephele.
	kwokBuiltBinaries = []string{"localcloud", "cloud-controller-manager"}
)

// preflight checks, before anything changes, what the machine lacks for the cluster of
// c: Preflight for real nodes; for kwok nodes, which need no root, only the binaries.
func (c *Config) preflight() error {
	var built []string
	if c.BuildFrom != "" {
		built = append(c.built(), "images")
	}
	if c.NodeMode == NodesReal {
		return Preflight(c.BinDir, built...)
	}
	var tools, ours []string
	for _, b := range kwokToolBinaries {
		if !executable(filepath.Join(c.BinDir, b)) {
			tools = append(tools, b)
		}
	}
	if fi, err := os.Stat(filepath.Join(c.BinDir, "kwok-stages")); err != nil || !fi.IsDir() {
		tools = append(tools, "kwok-stages/")
	}
	for _, b := range kwokBuiltBinaries {
		if !slices.Contains(built, b) && !executable(filepath.Join(c.BinDir, b)) {
			ours = append(ours, b)
		}
	}
	var problems []Problem
	if len(tools) > 0 {
		problems = append(problems, Problem{Missing: "in " + c.BinDir + ": " + strings.Join(tools, ", "), Fix: "make tools"})
	}
	if len(ours) > 0 {
		problems = append(problems, Problem{Missing: "in " + c.BinDir + ": " + strings.Join(ours, ", "), Fix: "make build"})
	}
	if len(problems) > 0 {
		return &PreflightError{Problems: problems, Kwok: true}
	}
	return nil
}

// Preflight reports, without changing anything, whether this machine can run real nodes
// from the programs in binDir: Linux, root with CAP_SYS_ADMIN and CAP_NET_ADMIN, the
// programs of nodeDeps on PATH, the binaries of make tools and make build, and the image
// archives. It returns a *PreflightError naming each problem and its fix. Binaries
// listed in built are left out of the check: the caller builds them first.
func Preflight(binDir string, built ...string) error {
	if runtime.GOOS != "linux" {
		return &PreflightError{Problems: []Problem{{
			Missing: "Linux: real nodes are network and mount namespaces, cgroups and iptables of a Linux kernel (this is " + runtime.GOOS + ")",
			Fix:     "run on Linux",
		}}}
	}
	var problems []Problem
	if os.Geteuid() != 0 {
		problems = append(problems, Problem{
			Missing: "root: real nodes need namespaces, a bridge, routes, iptables rules, mounts and cgroups",
			Fix:     "run as root (sudo make up)",
		})
	} else if caps, err := effectiveCapabilities(); err != nil {
		problems = append(problems, Problem{Missing: "the process's capabilities could not be read: " + err.Error(), Fix: "run on a Linux with /proc mounted"})
	} else {
		for _, c := range nodeCapabilities {
			if caps&(1<<c.bit) == 0 {
				problems = append(problems, Problem{
					Missing: fmt.Sprintf("capability %s (for %s): root here lacks it", c.name, c.why),
					Fix:     "run on the machine itself, or in a container with it (docker run --privileged)",
				})
			}
		}
	}
	if p := missingPackages(exec.LookPath); p != nil {
		problems = append(problems, *p)
	}
	var tools, ours, imgs []string
	for _, b := range toolBinaries {
		if !executable(filepath.Join(binDir, b)) {
			tools = append(tools, b)
		}
	}
	for _, b := range BuiltBinaries {
		if !slices.Contains(built, b) && !executable(filepath.Join(binDir, b)) {
			ours = append(ours, b)
		}
	}
	if !slices.Contains(built, "images") {
		for _, name := range imageArchives() {
			if _, err := os.Stat(filepath.Join(ImageDir(binDir), name+".tar")); err != nil {
				imgs = append(imgs, name+".tar")
			}
		}
	}
	if len(tools) > 0 {
		problems = append(problems, Problem{Missing: "in " + binDir + ": " + strings.Join(tools, ", "), Fix: "make tools"})
	}
	if len(ours) > 0 {
		problems = append(problems, Problem{Missing: "in " + binDir + ": " + strings.Join(ours, ", "), Fix: "make build"})
	}
	if len(imgs) > 0 {
		problems = append(problems, Problem{Missing: "in " + ImageDir(binDir) + ": " + strings.Join(imgs, ", "), Fix: "make node-images"})
	}
	if len(problems) > 0 {
		return &PreflightError{Problems: problems}
	}
	return nil
}

// missingPackages reports the Debian packages whose programs lookPath does not find,
// with the command that installs them.
func missingPackages(lookPath func(string) (string, error)) *Problem {
	var cmds, pkgs []string
	for _, d := range nodeDeps {
		// As the script does, with the system directories a user's PATH may lack.
		if slices.ContainsFunc([]string{d.command, "/usr/sbin/" + d.command, "/sbin/" + d.command}, func(c string) bool {
			_, err := lookPath(c)
			return err == nil
		}) {
			continue
		}
		cmds = append(cmds, d.command)
		if !slices.Contains(pkgs, d.pkg) {
			pkgs = append(pkgs, d.pkg)
		}
	}
	if len(cmds) == 0 {
		return nil
	}
	return &Problem{
		Missing: "programs " + strings.Join(cmds, ", ") + " (Debian packages " + strings.Join(pkgs, ", ") + ")",
		Fix:     "make node-deps, or as root: apt-get update && apt-get install -y --no-install-recommends " + strings.Join(pkgs, " "),
	}
}

// effectiveCapabilities reads this process's effective capability set.
func effectiveCapabilities() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no CapEff line in /proc/self/status")
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0
}

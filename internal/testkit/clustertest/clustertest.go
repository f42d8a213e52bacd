package clustertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/localcluster"
)

// buildTimeout bounds building nephele's commands and images: a cold build cache on a
// busy two-core machine takes minutes.
const buildTimeout = 10 * time.Minute

// BuiltEnv names the directory in which nephele's commands and image archives were
// built for this run of the tests (make test builds them once, with make build and make
// node-images, and sets it to bin/). Unset, every test that needs them builds its own
// from this source tree, so a test run by hand never runs stale binaries.
const BuiltEnv = "NEPHELE_BUILT_DIR"

// Programs of make tools a cluster runs from its bin directory.
var (
	// controlPlaneTools every cluster runs, kwok's among them.
	controlPlaneTools = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok", "kwok-stages"}
	// nodeTools are what real nodes run besides.
	nodeTools = []string{"kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr", "cni", "coredns"}
)

// BinDir returns a bin directory for a real cluster: links to the tools in the shared
// bin directory (controlplane.BinDir: make tools), and nephele's commands
// (localcluster.BuiltBinaries) and images (localcluster.Images), built for this run of the
// tests (BuiltEnv) or else from this source tree into the test's own directory, so a test
// never runs stale binaries nor writes to the shared bin/. It fails the test, naming the
// fix, when the machine cannot run real nodes (localcluster.Preflight).
func BinDir(t testing.TB) string {
	t.Helper()
	bin := Commands(t, localcluster.BuiltBinaries...)
	shared, err := controlplane.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range nodeTools {
		link(t, filepath.Join(shared, name), filepath.Join(bin, name))
	}
	imageDir := localcluster.ImageDir(bin)
	if built := os.Getenv(BuiltEnv); built != "" {
		link(t, localcluster.ImageDir(built), imageDir)
	} else {
		ctx, cancel := context.WithTimeout(t.Context(), buildTimeout)
		defer cancel()
		if _, err := localcluster.BuildImages(ctx, ModuleDir(t), shared, imageDir, images.Source{Version: images.DefaultVersion}); err != nil {
			t.Fatal(err)
		}
	}
	if err := localcluster.Preflight(bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// Commands returns a bin directory of the test's own with links to the control plane's
// and kwok's tools of the shared bin directory (make tools) and the named commands of
// nephele (cmd/<name>), built for this run of the tests (BuiltEnv) or else from this
// source tree: what a cluster of kwok nodes runs.
func Commands(t testing.TB, names ...string) string {
	t.Helper()
	shared, err := controlplane.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, name := range controlPlaneTools {
		link(t, filepath.Join(shared, name), filepath.Join(bin, name))
	}
	if built := os.Getenv(BuiltEnv); built != "" {
		for _, name := range names {
			link(t, filepath.Join(built, name), filepath.Join(bin, name))
		}
		return bin
	}
	ctx, cancel := context.WithTimeout(t.Context(), buildTimeout)
	defer cancel()
	if err := localcluster.BuildCommands(ctx, ModuleDir(t), bin, names...); err != nil {
		t.Fatal(err)
	}
	return bin
}

// link makes dst a symbolic link to src, which must exist.
func link(t testing.TB, src, dst string) {
	t.Helper()
	if _, err := os.Stat(src); err != nil {
		t.Fatalf("%v: run make tools (and make build node-images, with %s set)", err, BuiltEnv)
	}
	if err := os.Symlink(src, dst); err != nil {
		t.Fatal(err)
	}
}

// ModuleDir is the root of nephele's source tree.
func ModuleDir(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("clustertest: cannot tell where the source tree is")
	}
	// This file is internal/testkit/clustertest/clustertest.go.
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// Ranges are a bridge and address ranges of one test's own.
type Ranges struct {
	Bridge       string
	InstanceCIDR netip.Prefix
	ClusterCIDR  netip.Prefix
	ServiceCIDR  netip.Prefix
	VIPPool      netip.Prefix
	// Markers are strings that name what the cluster leaves on the machine (the bridge
	// and the ranges' prefixes), for hoststest.Snapshot.
	Markers []string
}

// rangeSlots is how many tests may hold ranges at once on one machine.
const rangeSlots = 40

// slotDir holds a lock file per slot; root's, as the tests that take slots run as root.
const slotDir = "/run/nephele-test-ranges"

// NewRanges takes one of rangeSlots slots of the machine, held until t ends, and returns
// its bridge and ranges: slot k has the instance range 10.86.k.0/24, the pod /16
// 10.(160+2k) and the Service /16 after it, and the VIP pool 10.87.k.0/24 (routed to the
// nodes by the kernel, outside the instance range's /16, as upstream's source-IP test
// wants of a client). A slot is a lock file taken with flock, so tests of several
// packages (several processes: go test runs packages in parallel) never get the same
// ranges, which the local cloud would refuse (a guard CIDR overlapping another cluster's
// routes); a test that dies releases its slot with its process.
func NewRanges(t testing.TB, prefix string) Ranges {
	t.Helper()
	k := takeSlot(t)
	n, pods := k, 160+2*k
	r := Ranges{
		Bridge:       fmt.Sprintf("%s%06x", prefix, rand.IntN(1<<24)),
		InstanceCIDR: netip.MustParsePrefix(fmt.Sprintf("10.86.%d.0/24", n)),
		ClusterCIDR:  netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/16", pods)),
		ServiceCIDR:  netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/16", pods+1)),
		VIPPool:      netip.MustParsePrefix(fmt.Sprintf("10.87.%d.0/24", n)),
	}
	r.Markers = []string{r.Bridge, fmt.Sprintf("10.86.%d.", n), fmt.Sprintf("10.%d.", pods), fmt.Sprintf("10.%d.", pods+1), fmt.Sprintf("10.87.%d.", n)}
	return r
}

// takeSlot locks a free slot, starting at a random one, waiting while all are taken.
func takeSlot(t testing.TB) int {
	t.Helper()
	if err := os.MkdirAll(slotDir, 0o700); err != nil {
		t.Fatalf("clustertest: %v", err)
	}
	var slot int
	poll.Within(t, 30*time.Minute, "a free range slot (another test holds each of them)", func() error {
		start := rand.IntN(rangeSlots)
		for i := range rangeSlots {
			k := (start + i) % rangeSlots
			f, err := os.OpenFile(filepath.Join(slotDir, fmt.Sprintf("%d.lock", k)), os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
			if err != nil {
				return err
			}
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
				_ = f.Close()
				continue
			}
			t.Cleanup(func() { _ = f.Close() })
			slot = k
			return nil
		}
		return fmt.Errorf("all %d slots taken", rangeSlots)
	})
	return slot
}

// Config is a localcluster configuration on these ranges.
func (r Ranges) Config(dir, binDir string, nodes int) localcluster.Config {
	return localcluster.Config{
		Dir: dir, BinDir: binDir, Nodes: nodes, Bridge: r.Bridge,
		InstanceCIDR: r.InstanceCIDR, ClusterCIDR: r.ClusterCIDR, ServiceCIDR: r.ServiceCIDR, VIPPool: r.VIPPool,
	}
}

// Dir returns a new directory for a cluster's state, named after prefix: removed when
// the test passes, kept with its logs (and named in the test's log) when it fails.
func Dir(t testing.TB, prefix string) string {
	t.Helper()
	tmp, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the cluster's logs are kept in %s", tmp)
			return
		}
		_ = os.RemoveAll(tmp)
	})
	return filepath.Join(tmp, "cluster")
}

// Start starts a real cluster of nodes with the programs in bin (BinDir), on a bridge and
// ranges of its own (NewRanges) in a directory of its own (Dir), configured by tweak (nil
// for none). The cluster is stopped when the test ends (a test may
// call Stop earlier: it runs once), and the machine must then be as before
// (hoststest.Snapshot). It returns the cluster and its directory; a failed test keeps the
// directory, with the logs.
func Start(t testing.TB, prefix, bin string, nodes int, tweak func(*localcluster.Config)) (*localcluster.Cluster, string) {
	t.Helper()
	ranges := NewRanges(t, prefix)
	dir := Dir(t, prefix)
	markers := append(append([]string(nil), ranges.Markers...), dir)
	before := hoststest.Snapshot(t, markers...)
	cfg := ranges.Config(dir, bin, nodes)
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := localcluster.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
		if after := hoststest.Snapshot(t, markers...); after != before {
			t.Errorf("the machine changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
	return c, dir
}

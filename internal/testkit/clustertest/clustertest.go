package clustertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
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

// NewRanges picks a bridge and ranges at random: the instance range in 10.86.0.0/16, a
// pod /16 and the Service /16 after it in 10.160-10.239, and the VIP pool of the same
// number in 10.87.0.0/16 (routed to the nodes by the kernel, outside the instance range's
// /16, as upstream's source-IP test wants of a client; a cluster whose instance range is
// free has a free pool too).
func NewRanges(prefix string) Ranges {
	n := rand.IntN(200)
	pods := 160 + 2*rand.IntN(40)
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
	ranges := NewRanges(prefix)
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

package csi_test

import (
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"

	"github.com/nephele-dev/nephele/csi"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/servertest"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/hosts"
	"github.com/nephele-dev/nephele/localcloud/server"
	"github.com/nephele-dev/nephele/providers/local"
)

// csiToken is the CSI driver's token in every test's local cloud.
const csiToken = "csi-sanity-token"

// nodeTools are the programs the node service formats, checks and grows volumes with.
var nodeTools = []string{"blkid", "fsck", "mkfs.ext4", "resize2fs", "e2fsck", "dumpe2fs", "mkfs.xfs", "xfs_growfs"}

// realDriver serves the driver (controller and node) over the local provider of a real
// local cloud with one host instance, the node, on bridge nphcsi<n> and ranges of the
// test's own (10.250.<n>.0/24, guard 10.251.<n>.0/24, VIPs 10.253.<n>.0/24): volumes are sparse files, attached
// to the node they are loop devices, and the node service formats and mounts them on
// this machine. It needs root, and checks that the machine is as before at the end. It
// returns the driver's socket, a directory of the test's, and the node.
func realDriver(t *testing.T, n int) (sock, dir string, node *api.Instance) {
	t.Helper()
	hoststest.RequireRoot(t)
	for _, tool := range nodeTools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: the node service formats, checks and grows volumes with it (make node-deps installs it)", tool)
		}
	}
	bridge := fmt.Sprintf("nphcsi%d", n)
	markers := []string{bridge, fmt.Sprintf("10.250.%d.", n), fmt.Sprintf("10.251.%d.", n), fmt.Sprintf("10.253.%d.", n)}
	before := hoststest.Snapshot(t, markers...)
	t.Cleanup(func() {
		if got := hoststest.Snapshot(t, markers...); got != before {
			t.Errorf("the machine after the test differs from before:\nbefore:\n%s\nafter:\n%s", before, got)
		}
	})

	srv, cl := servertest.Start(t, server.Config{
		InstanceCIDR: netip.MustParsePrefix(fmt.Sprintf("10.250.%d.0/24", n)),
		VIPPool:      netip.MustParsePrefix(fmt.Sprintf("10.253.%d.0/24", n)),
		Hosts: &hosts.Config{Bridge: bridge, Guards: []netip.Prefix{netip.MustParsePrefix(fmt.Sprintf("10.251.%d.0/24", n))},
			StopTimeout: 2 * time.Second},
		CSIToken: csiToken,
		Logger:   testlog.New(t, 0),
	})
	node, err := cl.CreateInstance(t.Context(), api.InstanceSpec{Name: "csi-node", Zone: "local-a", Kind: api.InstanceHost,
		BootCommand: []string{"sleep", "infinity"}})
	if err != nil {
		t.Fatalf("creating the node's host: %v", err)
	}
	// The driver holds the CSI driver's token: what it does, that token may do.
	provider, err := local.NewFromConfig(local.Config{Endpoint: srv.URL(), Token: csiToken})
	if err != nil {
		t.Fatal(err)
	}
	vols, _ := provider.Volumes()
	d, err := csi.New(csi.Config{
		Volumes: vols,
		Node:    &csi.NodeConfig{NodeID: node.Name, Zone: node.Zone, MaxVolumes: api.DefaultVolumeAttachLimit},
		Logger:  testlog.New(t, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	return serve(t, d, dir), dir, node
}

// TestSanity runs csi-sanity, the CSI community's conformance suite, against the driver
// serving the local provider on a real local cloud (realDriver).
func TestSanity(t *testing.T) {
	sock, dir, _ := realDriver(t, 16)
	cfg := sanity.NewTestConfig()
	cfg.Address = sock
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	// The smallest xfs (the default file system): sanity expects sizes as asked, and
	// smaller ones are made 300 MiB (TestSizeFitsTheFileSystem).
	cfg.TestVolumeSize = 300 << 20
	cfg.TestVolumeExpandSize = 600 << 20
	cfg.TestNodeVolumeAttachLimit = true
	cfg.IdempotentCount = 2
	sanity.Test(t, cfg)
}

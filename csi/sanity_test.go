package csi_test

import (
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

// The test's own bridge and ranges, apart from every other test's host cloud.
const (
	bridge    = "nphcsi16"
	instances = "10.250.16.0/24"
	guard     = "10.251.16.0/24"
	csiToken  = "csi-sanity-token"
)

// TestSanity runs csi-sanity, the CSI community's conformance suite, against the driver
// serving the local provider on a real local cloud: volumes are sparse files, attached to
// a host instance they are loop devices, and the node service formats and mounts them on
// this machine. It needs root.
func TestSanity(t *testing.T) {
	hoststest.RequireRoot(t)
	for _, tool := range []string{"blkid", "fsck", "mkfs.ext4", "resize2fs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: the node service formats, checks and grows volumes with it (make node-deps installs it)", tool)
		}
	}
	markers := []string{bridge, "10.250.16.", "10.251.16."}
	before := hoststest.Snapshot(t, markers...)
	t.Cleanup(func() {
		if got := hoststest.Snapshot(t, markers...); got != before {
			t.Errorf("the machine after the test differs from before:\nbefore:\n%s\nafter:\n%s", before, got)
		}
	})

	srv, cl := servertest.Start(t, server.Config{
		InstanceCIDR: netip.MustParsePrefix(instances),
		Hosts: &hosts.Config{Bridge: bridge, Guards: []netip.Prefix{netip.MustParsePrefix(guard)},
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
	dir := t.TempDir()
	sock := serve(t, d, dir)

	cfg := sanity.NewTestConfig()
	cfg.Address = sock
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	cfg.TestVolumeSize = 64 << 20
	cfg.TestVolumeExpandSize = 128 << 20
	cfg.TestNodeVolumeAttachLimit = true
	cfg.IdempotentCount = 2
	sanity.Test(t, cfg)
}

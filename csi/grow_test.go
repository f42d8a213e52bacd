package csi_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Superblock magic numbers (statfs f_type) of the file systems the driver formats.
const (
	xfsMagic  = 0x58465342
	ext4Magic = 0xef53
)

// TestFileSystemsGrow: a volume of each file system the driver formats keeps its data and
// grows with its volume: xfs while a pod uses it; ext4 then too where the node may
// (CAP_SYS_RESOURCE), else, saying so, when it is staged again. Staged again with a
// capability that names no file system, a volume keeps the one it has; one that names the
// other is refused.
func TestFileSystemsGrow(t *testing.T) {
	sock, dir, node := realDriver(t, 17)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctl, nd := csipb.NewControllerClient(conn), csipb.NewNodeClient(conn)
	const size, grown = 300 << 20, 600 << 20
	for _, tc := range []struct {
		fs    string
		magic int64
	}{{"xfs", xfsMagic}, {"ext4", ext4Magic}} {
		t.Run(tc.fs, func(t *testing.T) {
			ctx := t.Context()
			c := fsCap(tc.fs)
			vol, err := ctl.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: "grow-" + tc.fs,
				VolumeCapabilities: []*csipb.VolumeCapability{c}, CapacityRange: &csipb.CapacityRange{RequiredBytes: size}})
			if err != nil {
				t.Fatal(err)
			}
			id := vol.GetVolume().GetVolumeId()
			pub, err := ctl.ControllerPublishVolume(ctx, &csipb.ControllerPublishVolumeRequest{VolumeId: id, NodeId: node.Name, VolumeCapability: c})
			if err != nil {
				t.Fatal(err)
			}
			staging, target := filepath.Join(dir, tc.fs, "staging"), filepath.Join(dir, tc.fs, "target")
			mount := func(c *csipb.VolumeCapability) {
				t.Helper()
				if _, err := nd.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: id, PublishContext: pub.GetPublishContext(),
					StagingTargetPath: staging, VolumeCapability: c}); err != nil {
					t.Fatal(err)
				}
				if _, err := nd.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{VolumeId: id, PublishContext: pub.GetPublishContext(),
					StagingTargetPath: staging, TargetPath: target, VolumeCapability: c}); err != nil {
					t.Fatal(err)
				}
			}
			unmount := func() {
				t.Helper()
				if _, err := nd.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
					t.Fatal(err)
				}
				if _, err := nd.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
					t.Fatal(err)
				}
			}

			mount(c)
			if magic, _ := statfs(t, target); magic != tc.magic {
				t.Errorf("the volume is formatted with magic %#x; want %s's %#x", magic, tc.fs, tc.magic)
			}
			if err := os.WriteFile(filepath.Join(target, "data"), []byte("kept"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, before := statfs(t, target)
			if _, err := ctl.ControllerExpandVolume(ctx, &csipb.ControllerExpandVolumeRequest{VolumeId: id,
				CapacityRange: &csipb.CapacityRange{RequiredBytes: grown}, VolumeCapability: c}); err != nil {
				t.Fatal(err)
			}
			_, err = nd.NodeExpandVolume(ctx, &csipb.NodeExpandVolumeRequest{VolumeId: id, VolumePath: target, StagingTargetPath: staging,
				CapacityRange: &csipb.CapacityRange{RequiredBytes: grown}, VolumeCapability: c})
			_, online := statfs(t, target)
			switch {
			case tc.fs == "xfs" && (err != nil || online < before+200<<20):
				t.Errorf("growing the mounted xfs: %v; %d bytes before, %d after", err, before, online)
			case err == nil && online < before+200<<20:
				t.Errorf("NodeExpandVolume answered success, but the file system has %d bytes, %d before", online, before)
			case err != nil && !strings.Contains(status.Convert(err).Message(), "CAP_SYS_RESOURCE"):
				t.Errorf("growing the mounted ext4 failed without naming what the node lacks: %v", err)
			case err != nil:
				t.Logf("this machine cannot grow a mounted ext4: %v", err)
			}

			unmount()
			// Staged as the other file system: refused naming the one it holds, data kept.
			other := map[string]string{"xfs": "ext4", "ext4": "xfs"}[tc.fs]
			_, err = nd.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: id, PublishContext: pub.GetPublishContext(),
				StagingTargetPath: staging, VolumeCapability: fsCap(other)})
			if st := status.Convert(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "holds a "+tc.fs) {
				t.Errorf("staging a volume of %s as %s: %v; want FailedPrecondition naming %s", tc.fs, other, err, tc.fs)
			}
			mount(fsCap(""))
			magic, after := statfs(t, target)
			if magic != tc.magic {
				t.Errorf("staged with no file system named, the volume mounts with magic %#x; want its own %s (%#x)", magic, tc.fs, tc.magic)
			}
			if after < before+200<<20 {
				t.Errorf("staged again after growing, the file system has %d bytes; want about %d more than %d", after, grown-size, before)
			}
			if data, err := os.ReadFile(filepath.Join(target, "data")); err != nil || string(data) != "kept" {
				t.Errorf("the volume's data after growing: %q, %v", data, err)
			}
			unmount()
			if _, err := ctl.ControllerUnpublishVolume(ctx, &csipb.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: node.Name}); err != nil {
				t.Fatal(err)
			}
			if _, err := ctl.DeleteVolume(ctx, &csipb.DeleteVolumeRequest{VolumeId: id}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// fsCap is a single-node mount capability of file system fs ("" names none).
func fsCap(fs string) *csipb.VolumeCapability {
	c := mountCap()
	c.GetMount().FsType = fs
	return c
}

// statfs returns the magic number and the size in bytes of the file system at path.
func statfs(t *testing.T, path string) (magic int64, size uint64) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Type, st.Blocks * uint64(st.Bsize)
}

package csi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	mount "k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"
)

// NodeConfig configures the Node service of one node.
type NodeConfig struct {
	// NodeID is the CSI node ID: the Node's name. Required.
	NodeID string
	// Zone is the node's zone (its topology.kubernetes.io/zone label); empty reports no
	// topology.
	Zone string
	// MaxVolumes is how many volumes the node takes (the provider's attach limit), for
	// the scheduler; 0 reports none.
	MaxVolumes int64
	// Mounter mounts, formats and finds devices; nil is the machine's mount, mkfs and
	// blkid.
	Mounter *mount.SafeFormatAndMount
}

// node is the Node service.
type node struct {
	csipb.UnimplementedNodeServer
	cfg    NodeConfig
	m      *mount.SafeFormatAndMount
	resize *mount.ResizeFs
	log    logr.Logger
	// mu serializes the node's mounts: two calls for one path must not interleave, and
	// the calls are few.
	mu sync.Mutex
}

func newNode(cfg NodeConfig, log logr.Logger) (*node, error) {
	if cfg.NodeID == "" {
		return nil, errors.New("the node service needs the node's ID, its Node's name")
	}
	if cfg.MaxVolumes < 0 {
		return nil, fmt.Errorf("max volumes %d: must not be negative", cfg.MaxVolumes)
	}
	m := cfg.Mounter
	if m == nil {
		m = mount.NewSafeFormatAndMount(mount.NewWithoutSystemd(""), utilexec.New())
	}
	return &node{cfg: cfg, m: m, resize: mount.NewResizeFs(m.Exec), log: log}, nil
}

func (n *node) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	var caps []*csipb.NodeServiceCapability
	for _, t := range []csipb.NodeServiceCapability_RPC_Type{
		csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csipb.NodeServiceCapability_RPC_EXPAND_VOLUME,
		csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS,
	} {
		caps = append(caps, &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: t}}})
	}
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (n *node) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	resp := &csipb.NodeGetInfoResponse{NodeId: n.cfg.NodeID, MaxVolumesPerNode: n.cfg.MaxVolumes}
	if t := topology(n.cfg.Zone); t != nil {
		resp.AccessibleTopology = t[0]
	}
	return resp, nil
}

// device resolves the device path of the publish context to the block device.
func device(publishContext map[string]string) (string, error) {
	p := publishContext[PublishDevicePath]
	if p == "" {
		return "", status.Errorf(codes.FailedPrecondition, "publish_context: no %s: the volume is attached to no device of this node (did ControllerPublishVolume run?)", PublishDevicePath)
	}
	dev, err := filepath.EvalSymlinks(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", status.Errorf(codes.NotFound, "device %s of the volume does not exist on this node", p)
	}
	if err != nil {
		return "", status.Errorf(codes.Internal, "device %s: %v", p, err)
	}
	info, err := os.Stat(dev)
	if err != nil {
		return "", status.Errorf(codes.Internal, "device %s: %v", dev, err)
	}
	if info.Mode()&os.ModeDevice == 0 || info.Mode()&os.ModeCharDevice != 0 {
		return "", status.Errorf(codes.FailedPrecondition, "%s (from %s) is not a block device", dev, p)
	}
	return dev, nil
}

// mounted reports whether path is a mount point, and false when it does not exist.
func (n *node) mounted(path string) (bool, error) {
	notMnt, err := n.m.IsLikelyNotMountPoint(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, status.Errorf(codes.Internal, "checking the mount at %s: %v", path, err)
	}
	return !notMnt, nil
}

func (n *node) NodeStageVolume(_ context.Context, req *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, invalid("volume_id", "required")
	case req.GetStagingTargetPath() == "":
		return nil, invalid("staging_target_path", "required")
	}
	c := req.GetVolumeCapability()
	if err := checkCapabilities("volume_capability", []*csipb.VolumeCapability{c}); err != nil {
		return nil, err
	}
	dev, err := device(req.GetPublishContext())
	if err != nil {
		return nil, err
	}
	if isBlock(c) {
		return &csipb.NodeStageVolumeResponse{}, nil // published straight from the device
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	staging := req.GetStagingTargetPath()
	if ok, err := n.mounted(staging); err != nil || ok {
		return &csipb.NodeStageVolumeResponse{}, err
	}
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "creating %s: %v", staging, err)
	}
	existing, err := n.m.GetDiskFormat(dev)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "reading the file system of %s: %v", dev, err)
	}
	if err := n.growUnmounted(dev, existing); err != nil {
		return nil, err
	}
	fsType := c.GetMount().GetFsType()
	switch {
	case fsType != "" && existing != "" && fsType != existing:
		// Formatting over it would lose the data; mounting it as fsType fails.
		return nil, status.Errorf(codes.FailedPrecondition, "volume_capability.mount.fs_type %q: volume %s already holds a %s file system; ask for %s or name none", fsType, req.GetVolumeId(), existing, existing)
	case fsType == "" && existing != "":
		fsType = existing // formatted before, perhaps under another default
	case fsType == "":
		fsType = DefaultFSType
	}
	// Formats only a device without a file system: a volume staged again keeps its data.
	if err := n.m.FormatAndMount(dev, staging, fsType, c.GetMount().GetMountFlags()); err != nil {
		return nil, status.Errorf(codes.Internal, "formatting and mounting %s at %s: %v", dev, staging, err)
	}
	// XFS grows only while mounted: a volume expanded while detached grows here
	// (xfs_growfs does nothing when the file system fills its device).
	if fsType == fsXFS && existing == fsXFS {
		if _, err := n.resize.Resize(dev, staging); err != nil {
			// Unstaged again, so that the retry grows it rather than finding it staged.
			if uerr := mount.CleanupMountPoint(staging, n.m, true); uerr != nil {
				n.log.Error(uerr, "unmounting a volume whose file system could not grow", "volume", req.GetVolumeId(), "path", staging)
			}
			return nil, status.Errorf(codes.Internal, "growing the file system of %s at %s to its device: %v", dev, staging, err)
		}
	}
	n.log.Info("volume staged", "volume", req.GetVolumeId(), "device", dev, "path", staging)
	return &csipb.NodeStageVolumeResponse{}, nil
}

func (n *node) NodeUnstageVolume(_ context.Context, req *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, invalid("volume_id", "required")
	case req.GetStagingTargetPath() == "":
		return nil, invalid("staging_target_path", "required")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := mount.CleanupMountPoint(req.GetStagingTargetPath(), n.m, true); err != nil {
		return nil, status.Errorf(codes.Internal, "unmounting %s: %v", req.GetStagingTargetPath(), err)
	}
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (n *node) NodePublishVolume(_ context.Context, req *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, invalid("volume_id", "required")
	case req.GetTargetPath() == "":
		return nil, invalid("target_path", "required")
	case req.GetStagingTargetPath() == "":
		return nil, invalid("staging_target_path", "required: this driver stages volumes")
	}
	c := req.GetVolumeCapability()
	if err := checkCapabilities("volume_capability", []*csipb.VolumeCapability{c}); err != nil {
		return nil, err
	}
	opts := []string{"bind"}
	if req.GetReadonly() {
		opts = append(opts, "ro")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	target := req.GetTargetPath()
	if ok, err := n.mounted(target); err != nil || ok {
		return &csipb.NodePublishVolumeResponse{}, err
	}
	source := req.GetStagingTargetPath()
	if isBlock(c) {
		dev, err := device(req.GetPublishContext())
		if err != nil {
			return nil, err
		}
		// A device is bind-mounted onto a file.
		if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
			return nil, status.Errorf(codes.Internal, "creating %s: %v", filepath.Dir(target), err)
		}
		f, err := os.OpenFile(target, os.O_CREATE, 0o640)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "creating %s: %v", target, err)
		}
		_ = f.Close()
		source = dev
	} else {
		if ok, err := n.mounted(source); err != nil || !ok {
			if err == nil {
				err = status.Errorf(codes.FailedPrecondition, "staging_target_path %s: the volume is not staged there", source)
			}
			return nil, err
		}
		if err := os.MkdirAll(target, 0o750); err != nil {
			return nil, status.Errorf(codes.Internal, "creating %s: %v", target, err)
		}
		opts = append(opts, c.GetMount().GetMountFlags()...)
	}
	if err := n.m.Mount(source, target, "", opts); err != nil {
		return nil, status.Errorf(codes.Internal, "mounting %s at %s: %v", source, target, err)
	}
	return &csipb.NodePublishVolumeResponse{}, nil
}

func (n *node) NodeUnpublishVolume(_ context.Context, req *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, invalid("volume_id", "required")
	case req.GetTargetPath() == "":
		return nil, invalid("target_path", "required")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := mount.CleanupMountPoint(req.GetTargetPath(), n.m, true); err != nil {
		return nil, status.Errorf(codes.Internal, "unmounting %s: %v", req.GetTargetPath(), err)
	}
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

func (n *node) NodeGetVolumeStats(_ context.Context, req *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, invalid("volume_id", "required")
	case req.GetVolumePath() == "":
		return nil, invalid("volume_path", "required")
	}
	p := req.GetVolumePath()
	info, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "volume path %s does not exist", p)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume path %s: %v", p, err)
	}
	if info.Mode()&os.ModeDevice != 0 {
		f, err := os.Open(p)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "opening %s: %v", p, err)
		}
		defer func() { _ = f.Close() }()
		size, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "sizing %s: %v", p, err)
		}
		return &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{{Unit: csipb.VolumeUsage_BYTES, Total: size}}}, nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return nil, status.Errorf(codes.Internal, "statfs %s: %v", p, err)
	}
	bs := st.Bsize
	return &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{
		{Unit: csipb.VolumeUsage_BYTES, Total: int64(st.Blocks) * bs, Available: int64(st.Bavail) * bs, Used: int64(st.Blocks-st.Bfree) * bs},
		{Unit: csipb.VolumeUsage_INODES, Total: int64(st.Files), Available: int64(st.Ffree), Used: int64(st.Files - st.Ffree)},
	}}, nil
}

func (n *node) NodeExpandVolume(_ context.Context, req *csipb.NodeExpandVolumeRequest) (*csipb.NodeExpandVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, invalid("volume_id", "required")
	case req.GetVolumePath() == "":
		return nil, invalid("volume_path", "required")
	}
	if c := req.GetVolumeCapability(); c != nil && isBlock(c) {
		return &csipb.NodeExpandVolumeResponse{}, nil // the device grew with the volume
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	p := req.GetVolumePath()
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "volume path %s does not exist", p)
	}
	dev, _, err := mount.GetDeviceNameFromMount(n.m, p)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "finding the device mounted at %s: %v", p, err)
	}
	if dev == "" {
		return nil, status.Errorf(codes.NotFound, "nothing is mounted at %s", p)
	}
	format, err := n.m.GetDiskFormat(dev)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "reading the file system of %s: %v", dev, err)
	}
	switch format {
	case fsXFS:
		// xfs_growfs grows a mounted XFS (CAP_SYS_ADMIN) and does nothing when it fills
		// its device already.
		if _, err := n.resize.Resize(dev, p); err != nil {
			return nil, status.Errorf(codes.Internal, "growing the mounted file system of %s at %s: %v", dev, p, err)
		}
	case fsExt4:
		// Staging grows an ext4 offline when its device grew while it was not mounted:
		// then there is nothing left to do here.
		need, err := n.smallerThanDevice(dev)
		if err != nil {
			return nil, err
		}
		if need {
			// Online growth: the kernel's EXT4_IOC_RESIZE_FS, which needs CAP_SYS_RESOURCE.
			if _, err := n.resize.Resize(dev, p); err != nil {
				return nil, status.Errorf(codes.Internal, "growing the mounted ext4 file system of %s at %s (online growth of ext4 needs CAP_SYS_RESOURCE on the node; a volume expanded while no pod uses it grows when it is staged, and an xfs one grows mounted): %v", dev, p, err)
			}
		}
	default:
		return nil, status.Errorf(codes.FailedPrecondition, "the file system of %s at %s is %q: this driver grows xfs and ext4 only", dev, p, format)
	}
	return &csipb.NodeExpandVolumeResponse{CapacityBytes: req.GetCapacityRange().GetRequiredBytes()}, nil
}

// smallerThanDevice reports whether the ext4 file system of dev is smaller than dev: the
// volume grew and its file system must follow. mount-utils' NeedResize answers yes for
// every ext4 whatever the sizes, which would check and grow a volume at every stage and
// call the kernel's online growth at every expansion.
func (n *node) smallerThanDevice(dev string) (bool, error) {
	devSize, fsSize, err := n.extSizes(dev)
	if err != nil {
		return false, status.Errorf(codes.Internal, "comparing the file system of %s with its device: %v", dev, err)
	}
	return devSize > fsSize, nil
}

// extSizes returns the size of dev (blockdev) and of its ext4 file system (dumpe2fs's
// block count times block size), in bytes.
func (n *node) extSizes(dev string) (device, fs uint64, err error) {
	out, err := n.m.Exec.Command("blockdev", "--getsize64", dev).CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("blockdev --getsize64 %s: %w: %s", dev, err, out)
	}
	if device, err = strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("blockdev --getsize64 %s answered %q", dev, out)
	}
	out, err = n.m.Exec.Command("dumpe2fs", "-h", dev).CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("dumpe2fs -h %s: %w: %s", dev, err, out)
	}
	var blocks, blockSize uint64
	for _, line := range strings.Split(string(out), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(key) {
		case "Block count":
			blocks, err = strconv.ParseUint(strings.TrimSpace(value), 10, 64)
		case "Block size":
			blockSize, err = strconv.ParseUint(strings.TrimSpace(value), 10, 64)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("dumpe2fs -h %s: %q: %w", dev, line, err)
		}
	}
	if blocks == 0 || blockSize == 0 {
		return 0, 0, fmt.Errorf("dumpe2fs -h %s names no block count or block size", dev)
	}
	return device, blocks * blockSize, nil
}

// growUnmounted grows the ext4 file system of dev (format is blkid's answer; XFS grows
// only mounted), which is not mounted, to its device when the device is larger (the
// volume was expanded while detached): a forced check
// first, as resize2fs demands, then resize2fs, which offline needs no privilege beyond
// the device's. A device without a file system is left to formatting.
func (n *node) growUnmounted(dev, format string) error {
	if format != fsExt4 {
		return nil
	}
	if need, err := n.smallerThanDevice(dev); err != nil || !need {
		return err
	}
	// e2fsck -p exits 1 when it corrected something, which is fine for growing.
	if out, err := n.m.Exec.Command("e2fsck", "-f", "-p", dev).CombinedOutput(); err != nil {
		var ee utilexec.ExitError
		if !errors.As(err, &ee) || ee.ExitStatus() > 1 {
			return status.Errorf(codes.Internal, "checking %s before growing it: %v: %s", dev, err, out)
		}
	}
	if _, err := n.resize.Resize(dev, ""); err != nil {
		return status.Errorf(codes.Internal, "growing the file system of %s: %v", dev, err)
	}
	n.log.Info("file system grown to its volume", "device", dev)
	return nil
}

package csi

import (
	"fmt"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
)

// DefaultFSType is the file system a new mount volume gets when its capability names
// none: XFS, which grows while mounted with CAP_SYS_ADMIN alone, which a node plugin that
// mounts has anyway. ext4 grows while mounted only with CAP_SYS_RESOURCE as well (the
// kernel's EXT4_IOC_RESIZE_FS), which some machines withhold even from root (this
// project's CI machine does), so there a volume of ext4 grows only while no pod uses it.
// A volume that has a file system keeps it whatever the capability says nothing of.
const DefaultFSType = fsXFS

// The file systems the node formats.
const (
	fsXFS  = "xfs"
	fsExt4 = "ext4"
)

// fsTypes are the file systems the node formats, and the tools each needs on the node
// (the csi-driver image carries them; k8s.io/mount-utils runs most): a capability that
// names another is refused.
var fsTypes = map[string]bool{"": true, fsExt4: true, fsXFS: true}

// minFSBytes is the smallest volume each file system formats: mkfs.xfs refuses file
// systems under 300 MiB. A volume for one is made at least that large.
var minFSBytes = map[string]int64{fsXFS: 300 << 20}

// minBytes is the smallest volume that serves every capability, and the file system that
// needs it: the largest minimum of the file systems the mount capabilities name (or
// default to).
func minBytes(caps []*csipb.VolumeCapability) (least int64, fs string) {
	for _, c := range caps {
		if c.GetMount() == nil {
			continue
		}
		name := c.GetMount().GetFsType()
		if name == "" {
			name = DefaultFSType
		}
		if minFSBytes[name] > least {
			least, fs = minFSBytes[name], name
		}
	}
	return least, fs
}

// singleNode are the access modes of a volume attached to one node at a time, which is
// what a cloud disk is.
var singleNode = map[csipb.VolumeCapability_AccessMode_Mode]bool{
	csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER:        true,
	csipb.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:   true,
	csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER: true,
	csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:  true,
}

// checkCapability says why the driver cannot serve a capability, or returns nil.
func checkCapability(c *csipb.VolumeCapability) error {
	if c == nil {
		return fmt.Errorf("required")
	}
	switch {
	case c.GetAccessMode() == nil:
		return fmt.Errorf("access_mode: required")
	case !singleNode[c.GetAccessMode().GetMode()]:
		return fmt.Errorf("access_mode %s: a volume of this driver attaches to one node at a time (single-node modes only)", c.GetAccessMode().GetMode())
	}
	switch t := c.GetAccessType().(type) {
	case *csipb.VolumeCapability_Block:
	case *csipb.VolumeCapability_Mount:
		if fs := t.Mount.GetFsType(); !fsTypes[fs] {
			return fmt.Errorf("mount.fs_type %q: this driver formats %s (its default) and %s only", fs, DefaultFSType, fsExt4)
		}
	default:
		return fmt.Errorf("access_type: block or mount is required")
	}
	return nil
}

// checkCapabilities checks every capability of a request, naming the first it cannot
// serve.
func checkCapabilities(field string, caps []*csipb.VolumeCapability) error {
	if len(caps) == 0 {
		return invalid(field, "required")
	}
	for i, c := range caps {
		if err := checkCapability(c); err != nil {
			return invalid(fmt.Sprintf("%s[%d]", field, i), "%v", err)
		}
	}
	return nil
}

// isBlock reports whether a capability asks for a raw block device.
func isBlock(c *csipb.VolumeCapability) bool { return c.GetBlock() != nil }

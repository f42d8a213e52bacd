package csi

import (
	"fmt"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
)

// defaultFSType is the file system a mount volume gets when its capability names none.
const defaultFSType = "ext4"

// fsTypes are the file systems the node formats: ext4, whose tools (mkfs.ext4,
// resize2fs) every node image here carries.
var fsTypes = map[string]bool{"": true, "ext4": true}

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
			return fmt.Errorf("mount.fs_type %q: this driver formats %s only", fs, defaultFSType)
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

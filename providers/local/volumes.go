package local

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/localcloud/api"
)

// volumes implements cloud.Volumes over the local cloud's volume API.
type volumes struct{ p *Provider }

// Volumes implements cloud.VolumeProvider.
func (p *Provider) Volumes() (cloud.Volumes, bool) { return volumes{p}, true }

// CreateVolume implements cloud.Volumes. The local cloud's disks have no types or
// other parameters: every StorageClass parameter is refused, naming it, so that a
// class written for another cloud fails loudly instead of making something else.
func (v volumes) CreateVolume(ctx context.Context, spec cloud.VolumeSpec) (*cloud.Volume, error) {
	if len(spec.Parameters) > 0 {
		keys := slices.Sorted(maps.Keys(spec.Parameters))
		return nil, cloud.Invalidf("volume %s: StorageClass parameter %q: the local cloud's volumes take no parameters (unknown: %s)",
			spec.Name, keys[0], strings.Join(keys, ", "))
	}
	vol, err := v.p.client.CreateVolume(ctx, api.VolumeSpec{Name: spec.Name, Zone: spec.Zone, SizeBytes: spec.SizeBytes})
	if err != nil {
		return nil, wrapf(err, "creating volume %s", spec.Name)
	}
	return v.toVolume(ctx, vol)
}

// toVolume turns a volume of the cloud into the contract's, naming the node (the
// instance's name) it is attached to.
func (v volumes) toVolume(ctx context.Context, vol *api.Volume) (*cloud.Volume, error) {
	out := &cloud.Volume{ID: vol.ID, Name: vol.Name, Zone: vol.Zone, SizeBytes: vol.SizeBytes}
	if vol.State == api.VolumeAttached {
		inst, err := v.p.client.GetInstance(ctx, vol.AttachedTo)
		if err != nil {
			return nil, wrapf(err, "volume %s: getting instance %s it is attached to", vol.ID, vol.AttachedTo)
		}
		out.AttachedTo = inst.Name
	}
	return out, nil
}

// GetVolume implements cloud.Volumes.
func (v volumes) GetVolume(ctx context.Context, id string) (*cloud.Volume, error) {
	vol, err := v.p.client.GetVolume(ctx, id)
	if err != nil {
		return nil, wrapf(err, "getting volume %s", id)
	}
	return v.toVolume(ctx, vol)
}

// ListVolumes implements cloud.Volumes: one listing, and one listing of the instances
// when a volume is attached, to name their nodes.
func (v volumes) ListVolumes(ctx context.Context) ([]cloud.Volume, error) {
	vols, err := v.p.client.ListVolumes(ctx)
	if err != nil {
		return nil, listingError(err, "volumes")
	}
	names := map[string]string{}
	if slices.ContainsFunc(vols, func(vol api.Volume) bool { return vol.State == api.VolumeAttached }) {
		insts, err := v.p.client.ListAllInstances(ctx, v.p.pageSize)
		if err != nil {
			return nil, listingError(err, "instances")
		}
		for _, inst := range insts {
			names[inst.ID] = inst.Name
		}
	}
	out := make([]cloud.Volume, 0, len(vols))
	for _, vol := range vols {
		cv := cloud.Volume{ID: vol.ID, Name: vol.Name, Zone: vol.Zone, SizeBytes: vol.SizeBytes}
		if vol.State == api.VolumeAttached {
			name, ok := names[vol.AttachedTo]
			if !ok {
				return nil, fmt.Errorf("listing volumes: volume %s is attached to instance %s, which the listing of instances does not have", vol.ID, vol.AttachedTo)
			}
			cv.AttachedTo = name
		}
		out = append(out, cv)
	}
	return out, nil
}

// DeleteVolume implements cloud.Volumes.
func (v volumes) DeleteVolume(ctx context.Context, id string) error {
	if err := v.p.client.DeleteVolume(ctx, id); err != nil {
		return wrapf(err, "deleting volume %s", id)
	}
	return nil
}

// instance returns the ID of the instance behind a node name; a node the cloud has no
// instance for wraps cloud.ErrNotFound.
func (v volumes) instance(ctx context.Context, nodeName string) (string, error) {
	inst, err := v.p.client.GetInstanceByName(ctx, nodeName)
	if err != nil {
		return "", wrapf(err, "getting the instance of node %s", nodeName)
	}
	return inst.ID, nil
}

// AttachVolume implements cloud.Volumes: the device path is the volume's link in the
// host's directory; an instance that is a record has none.
func (v volumes) AttachVolume(ctx context.Context, id, nodeName string) (*cloud.VolumeAttachment, error) {
	instID, err := v.instance(ctx, nodeName)
	if err != nil {
		return nil, err
	}
	vol, err := v.p.client.AttachVolume(ctx, id, instID)
	if err != nil {
		return nil, wrapf(err, "attaching volume %s to node %s (%s)", id, nodeName, instID)
	}
	return &cloud.VolumeAttachment{DevicePath: vol.DevicePath}, nil
}

// DetachVolume implements cloud.Volumes.
func (v volumes) DetachVolume(ctx context.Context, id, nodeName string) error {
	instID, err := v.instance(ctx, nodeName)
	if err != nil {
		return err
	}
	if _, err := v.p.client.DetachVolume(ctx, id, instID); err != nil {
		return wrapf(err, "detaching volume %s from node %s (%s)", id, nodeName, instID)
	}
	return nil
}

// ExpandVolume implements cloud.Volumes.
func (v volumes) ExpandVolume(ctx context.Context, id string, sizeBytes int64) (*cloud.Volume, error) {
	vol, err := v.p.client.ExpandVolume(ctx, id, sizeBytes)
	if err != nil {
		return nil, wrapf(err, "expanding volume %s to %d bytes", id, sizeBytes)
	}
	return v.toVolume(ctx, vol)
}

// Limits implements cloud.Volumes: the local cloud's defaults (localcloud's
// --max-volume-size and --volume-attach-limit); a cloud started with others refuses
// past them all the same.
func (v volumes) Limits() cloud.VolumeLimits {
	return cloud.VolumeLimits{MaxSizeBytes: api.DefaultMaxVolumeSize, AttachLimit: api.DefaultVolumeAttachLimit, SizeUnit: api.VolumeSizeUnit}
}

package csi

import (
	"context"
	"slices"
	"strconv"
	"strings"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nephele-dev/nephele/cloud"
)

// DefaultVolumeSize is the size of a volume whose create asks for none.
const DefaultVolumeSize = 1 << 30

// PublishDevicePath is the publish context key carrying the attached volume's device
// path on its node, from ControllerPublishVolume to the node's stage and publish.
const PublishDevicePath = "devicePath"

// sidecarParameterPrefix starts the StorageClass parameters the CSI sidecars read or
// add (secrets, fstype, the PVC's name with --extra-create-metadata): the driver's own
// business, never the provider's.
const sidecarParameterPrefix = "csi.storage.k8s.io/"

// controller is the Controller service over a provider's volumes.
type controller struct {
	csipb.UnimplementedControllerServer
	vols   cloud.Volumes
	limits cloud.VolumeLimits
	log    logr.Logger
}

func (c *controller) ControllerGetCapabilities(context.Context, *csipb.ControllerGetCapabilitiesRequest) (*csipb.ControllerGetCapabilitiesResponse, error) {
	var caps []*csipb.ControllerServiceCapability
	for _, t := range []csipb.ControllerServiceCapability_RPC_Type{
		csipb.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csipb.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
		csipb.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csipb.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
		csipb.ControllerServiceCapability_RPC_GET_VOLUME,
		csipb.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	} {
		caps = append(caps, &csipb.ControllerServiceCapability{Type: &csipb.ControllerServiceCapability_Rpc{
			Rpc: &csipb.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csipb.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// size picks a volume's size from a capacity range: the required bytes, or
// DefaultVolumeSize (no more than the limit) when none are required, and at least least,
// the smallest file system fs formats (minBytes; 0 and "" for none).
func (c *controller) size(r *csipb.CapacityRange, least int64, fs string) (int64, error) {
	req, limit := r.GetRequiredBytes(), r.GetLimitBytes()
	switch {
	case req < 0 || limit < 0:
		return 0, status.Errorf(codes.OutOfRange, "capacity_range: required_bytes %d and limit_bytes %d must not be negative", req, limit)
	case limit > 0 && req > limit:
		return 0, status.Errorf(codes.OutOfRange, "capacity_range: required_bytes %d is more than limit_bytes %d", req, limit)
	}
	size := req
	if size == 0 {
		size = DefaultVolumeSize
		if limit > 0 && limit < size {
			size = limit
		}
	}
	if size < least {
		if limit > 0 && limit < least {
			return 0, status.Errorf(codes.OutOfRange, "capacity_range: limit_bytes %d is less than %d bytes, the smallest %s file system (a StorageClass names another with csi.storage.k8s.io/fstype)", limit, least, fs)
		}
		size = least
	}
	// The size the cloud will make: checked against the limit before anything is made.
	if u := c.limits.SizeUnit; u > 1 && size%u != 0 {
		size += u - size%u
	}
	if limit > 0 && size > limit {
		return 0, status.Errorf(codes.OutOfRange, "capacity_range: the cloud makes volumes in units of %d bytes, and none fits between %d and limit_bytes %d", c.limits.SizeUnit, req, limit)
	}
	if max := c.limits.MaxSizeBytes; max > 0 && size > max {
		return 0, status.Errorf(codes.OutOfRange, "capacity_range: %d bytes is more than this cloud's largest volume, %d bytes", size, max)
	}
	return size, nil
}

// zone picks the zone of a new volume from its accessibility requirements: the first
// preferred topology, else the first requisite one; none lets the provider choose.
func zone(req *csipb.TopologyRequirement) (string, error) {
	for _, tops := range [][]*csipb.Topology{req.GetPreferred(), req.GetRequisite()} {
		for _, t := range tops {
			for k := range t.GetSegments() {
				if k != TopologyKey {
					return "", invalid("accessibility_requirements", "topology key %q: this driver places volumes by %s only", k, TopologyKey)
				}
			}
			if z := t.GetSegments()[TopologyKey]; z != "" {
				return z, nil
			}
		}
	}
	return "", nil
}

func topology(zone string) []*csipb.Topology {
	if zone == "" {
		return nil
	}
	return []*csipb.Topology{{Segments: map[string]string{TopologyKey: zone}}}
}

func (c *controller) CreateVolume(ctx context.Context, req *csipb.CreateVolumeRequest) (*csipb.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, invalid("name", "required")
	}
	if err := checkCapabilities("volume_capabilities", req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	if req.GetVolumeContentSource() != nil {
		return nil, invalid("volume_content_source", "this driver makes empty volumes only: no snapshots or clones")
	}
	least, fs := minBytes(req.GetVolumeCapabilities())
	size, err := c.size(req.GetCapacityRange(), least, fs)
	if err != nil {
		return nil, err
	}
	z, err := zone(req.GetAccessibilityRequirements())
	if err != nil {
		return nil, err
	}
	params := map[string]string{}
	for k, v := range req.GetParameters() {
		if !strings.HasPrefix(k, sidecarParameterPrefix) {
			params[k] = v
		}
	}
	vol, err := c.vols.CreateVolume(ctx, cloud.VolumeSpec{Name: req.GetName(), Zone: z, SizeBytes: size, Parameters: params})
	if err != nil {
		return nil, cloudStatus(err, "creating volume "+req.GetName())
	}
	if limit := req.GetCapacityRange().GetLimitBytes(); limit > 0 && vol.SizeBytes > limit {
		return nil, status.Errorf(codes.OutOfRange, "volume %s (%s) has %d bytes, more than limit_bytes %d: the cloud rounds sizes up", req.GetName(), vol.ID, vol.SizeBytes, limit)
	}
	return &csipb.CreateVolumeResponse{Volume: &csipb.Volume{
		VolumeId: vol.ID, CapacityBytes: vol.SizeBytes, AccessibleTopology: topology(vol.Zone),
	}}, nil
}

func (c *controller) DeleteVolume(ctx context.Context, req *csipb.DeleteVolumeRequest) (*csipb.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, invalid("volume_id", "required")
	}
	if err := c.vols.DeleteVolume(ctx, req.GetVolumeId()); err != nil && !cloud.IsNotFound(err) {
		return nil, cloudStatus(err, "deleting volume "+req.GetVolumeId())
	}
	return &csipb.DeleteVolumeResponse{}, nil
}

func (c *controller) ControllerPublishVolume(ctx context.Context, req *csipb.ControllerPublishVolumeRequest) (*csipb.ControllerPublishVolumeResponse, error) {
	id, nodeID := req.GetVolumeId(), req.GetNodeId()
	switch {
	case id == "":
		return nil, invalid("volume_id", "required")
	case nodeID == "":
		return nil, invalid("node_id", "required")
	}
	if err := checkCapabilities("volume_capability", []*csipb.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	// One call: a volume or node that does not exist is NotFound from the attach itself.
	att, err := c.vols.AttachVolume(ctx, id, nodeID)
	if err != nil {
		return nil, cloudStatus(err, "attaching volume "+id+" to node "+nodeID)
	}
	return &csipb.ControllerPublishVolumeResponse{PublishContext: map[string]string{PublishDevicePath: att.DevicePath}}, nil
}

func (c *controller) ControllerUnpublishVolume(ctx context.Context, req *csipb.ControllerUnpublishVolumeRequest) (*csipb.ControllerUnpublishVolumeResponse, error) {
	id, nodeID := req.GetVolumeId(), req.GetNodeId()
	if id == "" {
		return nil, invalid("volume_id", "required")
	}
	if nodeID == "" {
		// Every node: the one it is attached to.
		vol, err := c.vols.GetVolume(ctx, id)
		switch {
		case cloud.IsNotFound(err):
			return &csipb.ControllerUnpublishVolumeResponse{}, nil
		case err != nil:
			return nil, cloudStatus(err, "volume "+id)
		case vol.AttachedTo == "":
			return &csipb.ControllerUnpublishVolumeResponse{}, nil
		}
		nodeID = vol.AttachedTo
	}
	// A volume or node that is gone is unpublished: the spec asks for OK.
	err := c.vols.DetachVolume(ctx, id, nodeID)
	if err == nil || cloud.IsNotFound(err) {
		return &csipb.ControllerUnpublishVolumeResponse{}, nil
	}
	if cloud.IsConflict(err) {
		// So is a volume on another node (an unpublish whose answer was lost, and a
		// publish elsewhere since): it is not published to this one.
		if vol, gerr := c.vols.GetVolume(ctx, id); gerr == nil && vol.AttachedTo != nodeID {
			return &csipb.ControllerUnpublishVolumeResponse{}, nil
		}
	}
	return nil, cloudStatus(err, "detaching volume "+id+" from node "+nodeID)
}

func (c *controller) ValidateVolumeCapabilities(ctx context.Context, req *csipb.ValidateVolumeCapabilitiesRequest) (*csipb.ValidateVolumeCapabilitiesResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, invalid("volume_id", "required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, invalid("volume_capabilities", "required")
	}
	if _, err := c.vols.GetVolume(ctx, id); err != nil {
		return nil, cloudStatus(err, "volume "+id)
	}
	for _, cp := range req.GetVolumeCapabilities() {
		if err := checkCapability(cp); err != nil {
			return &csipb.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
		}
	}
	return &csipb.ValidateVolumeCapabilitiesResponse{Confirmed: &csipb.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: req.GetVolumeContext(), VolumeCapabilities: req.GetVolumeCapabilities(), Parameters: req.GetParameters(),
	}}, nil
}

// entry is a volume as ListVolumes and ControllerGetVolume answer it.
func entry(v *cloud.Volume) (*csipb.Volume, []string) {
	var nodes []string
	if v.AttachedTo != "" {
		nodes = []string{v.AttachedTo}
	}
	return &csipb.Volume{VolumeId: v.ID, CapacityBytes: v.SizeBytes, AccessibleTopology: topology(v.Zone)}, nodes
}

func (c *controller) ListVolumes(ctx context.Context, req *csipb.ListVolumesRequest) (*csipb.ListVolumesResponse, error) {
	if req.GetMaxEntries() < 0 {
		return nil, invalid("max_entries", "%d: must not be negative", req.GetMaxEntries())
	}
	vols, err := c.vols.ListVolumes(ctx)
	if err != nil {
		return nil, cloudStatus(err, "listing volumes")
	}
	slices.SortFunc(vols, func(a, b cloud.Volume) int { return strings.Compare(a.ID, b.ID) })
	// The token is the ID the previous page ended after: volumes created or deleted
	// between pages do not shift it, but a token whose volume was deleted is Aborted
	// and the listing starts again.
	start := 0
	if tok := req.GetStartingToken(); tok != "" {
		i, found := slices.BinarySearchFunc(vols, tok, func(v cloud.Volume, t string) int { return strings.Compare(v.ID, t) })
		if !found {
			return nil, status.Errorf(codes.Aborted, "starting_token %q: no such volume; list again from the start", tok)
		}
		start = i + 1
	}
	end := len(vols)
	if n := int(req.GetMaxEntries()); n > 0 && start+n < end {
		end = start + n
	}
	resp := &csipb.ListVolumesResponse{}
	for i := start; i < end; i++ {
		v, nodes := entry(&vols[i])
		resp.Entries = append(resp.Entries, &csipb.ListVolumesResponse_Entry{Volume: v,
			Status: &csipb.ListVolumesResponse_VolumeStatus{PublishedNodeIds: nodes}})
	}
	if end < len(vols) {
		resp.NextToken = vols[end-1].ID
	}
	return resp, nil
}

func (c *controller) ControllerGetVolume(ctx context.Context, req *csipb.ControllerGetVolumeRequest) (*csipb.ControllerGetVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, invalid("volume_id", "required")
	}
	vol, err := c.vols.GetVolume(ctx, req.GetVolumeId())
	if err != nil {
		return nil, cloudStatus(err, "volume "+req.GetVolumeId())
	}
	v, nodes := entry(vol)
	return &csipb.ControllerGetVolumeResponse{Volume: v, Status: &csipb.ControllerGetVolumeResponse_VolumeStatus{PublishedNodeIds: nodes}}, nil
}

func (c *controller) ControllerExpandVolume(ctx context.Context, req *csipb.ControllerExpandVolumeRequest) (*csipb.ControllerExpandVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, invalid("volume_id", "required")
	}
	if req.GetCapacityRange() == nil {
		return nil, invalid("capacity_range", "required")
	}
	if cp := req.GetVolumeCapability(); cp != nil {
		if err := checkCapability(cp); err != nil {
			return nil, invalid("volume_capability", "%v", err)
		}
	}
	size, err := c.size(req.GetCapacityRange(), 0, "")
	if err != nil {
		return nil, err
	}
	vol, err := c.vols.GetVolume(ctx, id)
	if err != nil {
		return nil, cloudStatus(err, "volume "+id)
	}
	if size > vol.SizeBytes {
		if vol, err = c.vols.ExpandVolume(ctx, id, size); err != nil {
			return nil, cloudStatus(err, "expanding volume "+id+" to "+strconv.FormatInt(size, 10)+" bytes")
		}
	}
	return &csipb.ControllerExpandVolumeResponse{CapacityBytes: vol.SizeBytes, NodeExpansionRequired: !isBlock(req.GetVolumeCapability())}, nil
}

package cloud

import (
	"context"
	"errors"
)

// Sentinel errors of the volume capability, wrapped like the others.
var (
	// ErrAlreadyExists means a create named an object that exists with other
	// parameters (a volume of that name with another size or zone).
	ErrAlreadyExists = errors.New("already exists in the cloud")

	// ErrConflict means the request contradicts the cloud's state as it is now: a
	// volume attached to another node, deleted while attached, attached to a node of
	// another zone, or still in use on its node when detached. Retrying helps only after the state
	// changes.
	ErrConflict = errors.New("conflicts with the cloud's state")

	// ErrLimitExceeded means the request would go past a limit of the cloud: a node
	// with as many volumes attached as it takes.
	ErrLimitExceeded = errors.New("a limit of the cloud is reached")
)

// IsLimitExceeded reports whether err wraps ErrLimitExceeded.
func IsLimitExceeded(err error) bool { return errors.Is(err, ErrLimitExceeded) }

// IsAlreadyExists reports whether err wraps ErrAlreadyExists.
func IsAlreadyExists(err error) bool { return errors.Is(err, ErrAlreadyExists) }

// IsConflict reports whether err wraps ErrConflict.
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// VolumeProvider is implemented by a provider with block storage. One CSI driver
// (package csi) serves any provider that implements it: the storage half of the
// out-of-tree move, as the CCM is the controller half.
type VolumeProvider interface {
	// Volumes returns the volume capability, or nil and false.
	Volumes() (Volumes, bool)
}

// VolumeSpec is a volume to create.
type VolumeSpec struct {
	// Name is the volume's unique name and the create's idempotency token: a create of
	// a name that exists with the same parameters returns that volume.
	Name string
	// Zone is where the volume lives; empty lets the provider choose.
	Zone string
	// SizeBytes is the size asked for; the provider may round it up.
	SizeBytes int64
	// Parameters are a StorageClass's parameters. A provider refuses a key it does not
	// know with an error wrapping ErrInvalid naming it, never ignores it.
	Parameters map[string]string
}

// Volume is a disk in the cloud.
type Volume struct {
	// ID is the cloud's identifier: the CSI volume ID.
	ID string
	// Name is the name it was created with.
	Name string
	// Zone is where it lives and may attach.
	Zone string
	// SizeBytes is its size.
	SizeBytes int64
	// AttachedTo is the name of the node it is attached to, empty when it is attached
	// to none.
	AttachedTo string
}

// VolumeAttachment is where an attached volume appears on its node.
type VolumeAttachment struct {
	// DevicePath is the path on the node that leads to the volume's block device (a
	// link is resolved): what the node plugin formats and mounts.
	DevicePath string
}

// VolumeLimits are the bounds of the provider's volumes.
type VolumeLimits struct {
	// MaxSizeBytes is the largest volume it creates; 0 if it does not say.
	MaxSizeBytes int64
	// AttachLimit is how many volumes one node takes; 0 if it does not say.
	AttachLimit int
	// SizeUnit is the granularity sizes are rounded up to; 0 or 1 if none.
	SizeUnit int64
}

// Volumes is the block storage capability. Every method returns an error wrapping
// ErrNotFound only when the cloud positively says the volume (or node) does not exist,
// as for instances.
type Volumes interface {
	// CreateVolume creates a volume, or returns the one of that name when it exists
	// with the same parameters (ErrAlreadyExists with other ones); a parameter, size or
	// zone the provider cannot serve wraps ErrInvalid.
	CreateVolume(ctx context.Context, spec VolumeSpec) (*Volume, error)
	// GetVolume returns the volume with the given ID.
	GetVolume(ctx context.Context, id string) (*Volume, error)
	// ListVolumes returns every volume; a partial answer is an error.
	ListVolumes(ctx context.Context) ([]Volume, error)
	// DeleteVolume deletes a volume and its data; a volume that is gone wraps
	// ErrNotFound, an attached one ErrConflict.
	DeleteVolume(ctx context.Context, id string) error
	// AttachVolume attaches a volume to the named node and returns where it appears
	// there; attached to that node already, it succeeds. Attached to another node, in
	// another zone, it wraps ErrConflict; past the node's limit, ErrLimitExceeded.
	AttachVolume(ctx context.Context, id, nodeName string) (*VolumeAttachment, error)
	// DetachVolume detaches a volume from the named node; attached to none, it
	// succeeds. Still in use on the node (mounted), it wraps ErrConflict.
	DetachVolume(ctx context.Context, id, nodeName string) error
	// ExpandVolume grows a volume to at least sizeBytes and returns it; volumes only
	// grow.
	ExpandVolume(ctx context.Context, id string, sizeBytes int64) (*Volume, error)
	// Limits returns the bounds of the provider's volumes.
	Limits() VolumeLimits
}

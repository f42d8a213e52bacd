package api

import (
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// VolumeState is where a volume is in its life.
type VolumeState string

// Volume states.
const (
	// VolumeAvailable is a volume attached to no instance.
	VolumeAvailable VolumeState = "available"
	// VolumeAttached is a volume attached to one instance (Volume.AttachedTo).
	VolumeAttached VolumeState = "attached"
)

// Volume limits, as every cloud has them (a GCE persistent disk takes 64 TiB, an AWS
// gp3 volume 16 TiB, and an instance 16 to 128 of them).
const (
	// VolumeSizeUnit is the granularity of a volume's size: a size is rounded up to it.
	VolumeSizeUnit = 1 << 20
	// DefaultMaxVolumeSize bounds spec.sizeBytes unless the cloud is configured with
	// another bound. Volumes are sparse files, so the bound costs no disk until written.
	DefaultMaxVolumeSize = 1 << 40
	// DefaultVolumeAttachLimit is how many volumes one instance takes unless the cloud
	// is configured otherwise.
	DefaultVolumeAttachLimit = 16
)

// VolumeSpec is the body of a volume create request.
type VolumeSpec struct {
	// Name is the volume's name, unique in the cloud. It is the create's idempotency
	// token: creating a name that exists with the same zone and size answers the
	// existing volume (200), with another zone or size AlreadyExists (409), so a
	// caller that lost an answer asks again and gets the volume it made.
	Name string `json:"name"`
	// Zone is where the volume lives; it attaches only to instances of that zone. One
	// of the cloud's zones; empty is the first of them.
	Zone string `json:"zone"`
	// SizeBytes is the volume's size, rounded up to VolumeSizeUnit: more than 0 and at
	// most the cloud's maximum.
	SizeBytes int64 `json:"sizeBytes"`
	// Labels are the creator's, kept as given.
	Labels map[string]string `json:"labels,omitempty"`
}

// Volume is a disk in the local cloud: a sparse file in the cloud's volume directory
// which, attached to a host instance, is a block device (a loop device) on the machine.
type Volume struct {
	// ID is the cloud's identifier, "vol-" and twelve hex digits, in creation order.
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Zone      string            `json:"zone"`
	SizeBytes int64             `json:"sizeBytes"`
	Labels    map[string]string `json:"labels,omitempty"`
	State     VolumeState       `json:"state"`
	// AttachedTo is the instance the volume is attached to, when State is attached.
	AttachedTo string `json:"attachedTo,omitempty"`
	// Device is, while the volume is attached to a host instance, its block device on
	// the machine ("/dev/loop3"), and DevicePath the link to it in the host's state
	// directory ("<host dir>/disks/<volume ID>"), which names the volume and so finds it
	// as a cloud's by-id link does. Both are empty for an instance that is a record.
	Device     string `json:"device,omitempty"`
	DevicePath string `json:"devicePath,omitempty"`
	// Provisioned is set once the volume's file is made. A provisioned volume's file is
	// never made again: one that went missing lost its data, and an empty file would be
	// formatted over as if the volume were new.
	Provisioned bool      `json:"provisioned"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// VolumeList is the answer of a volume listing, in ID (creation) order.
type VolumeList struct {
	Items []Volume `json:"items"`
}

// VolumeAttachment is the body of a volume attach or detach request.
type VolumeAttachment struct {
	// InstanceID is the instance to attach the volume to, or to detach it from.
	InstanceID string `json:"instanceID"`
}

// VolumeExpansion is the body of a volume expand request.
type VolumeExpansion struct {
	// SizeBytes is the new size, rounded up to VolumeSizeUnit; volumes only grow.
	SizeBytes int64 `json:"sizeBytes"`
}

// RoundVolumeSize rounds a size up to VolumeSizeUnit.
func RoundVolumeSize(n int64) int64 {
	if r := n % VolumeSizeUnit; r != 0 {
		return n + VolumeSizeUnit - r
	}
	return n
}

// Validate checks a volume create request against the cloud's zones and maximum size.
// Fields are named under "spec.".
func (s *VolumeSpec) Validate(zones []string, maxSize int64) error {
	if err := ValidateVolumeName("spec.name", s.Name); err != nil {
		return err
	}
	if err := validateZone("spec.zone", s.Zone, zones); err != nil {
		return err
	}
	if err := ValidateVolumeSize("spec.sizeBytes", s.SizeBytes, maxSize); err != nil {
		return err
	}
	return validateLabels("spec.labels", s.Labels)
}

// MaxVolumeNameLen bounds a volume's name: CSI's bound of a name, 128 bytes.
const MaxVolumeNameLen = 128

// ValidateVolumeName checks a volume name: 1 to 128 bytes of printable UTF-8 without
// white space. Names are chosen by a CSI CO (the PV's name) or another tool, so they
// are not held to the cloud's object names; they travel in bodies and query strings
// only, never in a path.
func ValidateVolumeName(field, name string) error {
	switch {
	case name == "":
		return fieldErr(field, "required")
	case len(name) > MaxVolumeNameLen:
		return fieldErr(field, "%d bytes, at most %d allowed", len(name), MaxVolumeNameLen)
	case !utf8.ValidString(name):
		return fieldErr(field, "%q is not UTF-8", name)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fieldErr(field, "%q: want printable characters without white space", name)
		}
	}
	return nil
}

// validateZone checks that zone is one of the cloud's zones.
func validateZone(field, zone string, zones []string) error {
	if zone == "" {
		return fieldErr(field, "required: one of %v", zones)
	}
	for _, z := range zones {
		if z == zone {
			return nil
		}
	}
	return fieldErr(field, "%q is not a zone of this cloud: want one of %v", zone, zones)
}

// ValidateVolumeSize checks a volume size: more than 0 and at most maxSize, a multiple
// of VolumeSizeUnit (so a size within it stays within it rounded up).
func ValidateVolumeSize(field string, n, maxSize int64) error {
	if n <= 0 {
		return fieldErr(field, "%d: want more than 0 bytes", n)
	}
	if n > maxSize {
		return fieldErr(field, "%d: at most %d bytes (%s) allowed", n, maxSize, humanBytes(maxSize))
	}
	return nil
}

// humanBytes writes a byte count in binary units for messages.
func humanBytes(n int64) string {
	for _, u := range []struct {
		shift int
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

package store

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nephele-dev/nephele/localcloud/api"
)

// VolumeID returns the ID of the volume created with sequence number seq.
func VolumeID(seq uint64) string { return fmt.Sprintf("vol-%012x", seq) }

// VolumeSeq returns the sequence number of a volume ID, false when id is not one
// VolumeID makes.
func VolumeSeq(id string) (uint64, bool) {
	hex, ok := strings.CutPrefix(id, "vol-")
	if !ok || len(hex) != 12 {
		return 0, false
	}
	n, err := strconv.ParseUint(hex, 16, 64)
	return n, err == nil
}

// CreateVolume stores a new available volume from a validated spec whose size is
// rounded (api.RoundVolumeSize). It is idempotent by name: when a volume of that name
// exists with the same zone and size it returns that volume and created false; with
// another zone or size it fails with ErrAlreadyExists.
func (s *Store) CreateVolume(ctx context.Context, spec api.VolumeSpec, now time.Time) (vol api.Volume, created bool, err error) {
	err = s.update(ctx, func(tx *bolt.Tx) error {
		b, names := tx.Bucket(bucketVolumes), tx.Bucket(bucketVolumeNames)
		if id := names.Get([]byte(spec.Name)); id != nil {
			existing, err := getVolume(tx, string(id))
			if err != nil {
				return err
			}
			if existing.Zone != spec.Zone || existing.SizeBytes != spec.SizeBytes {
				return fmt.Errorf("volume named %q (%s) exists with zone %s and %d bytes, not zone %s and %d bytes: %w",
					spec.Name, existing.ID, existing.Zone, existing.SizeBytes, spec.Zone, spec.SizeBytes, ErrAlreadyExists)
			}
			vol = existing
			return nil
		}
		seq, err := b.NextSequence()
		if err != nil {
			return fmt.Errorf("allocating a volume ID: %w", err)
		}
		vol = api.Volume{
			ID:        VolumeID(seq),
			Name:      spec.Name,
			Zone:      spec.Zone,
			SizeBytes: spec.SizeBytes,
			Labels:    maps.Clone(spec.Labels),
			State:     api.VolumeAvailable,
			CreatedAt: now,
			UpdatedAt: now,
		}
		created = true
		if err := names.Put([]byte(vol.Name), []byte(vol.ID)); err != nil {
			return err
		}
		return putJSON(b, []byte(vol.ID), vol)
	})
	if err != nil {
		return api.Volume{}, false, fmt.Errorf("creating volume %s: %w", spec.Name, err)
	}
	return vol, created, nil
}

func getVolume(tx *bolt.Tx, id string) (api.Volume, error) {
	var v api.Volume
	ok, err := getJSON(tx.Bucket(bucketVolumes), []byte(id), &v)
	if err != nil {
		return api.Volume{}, err
	}
	if !ok {
		return api.Volume{}, fmt.Errorf("volume %s: %w", id, ErrNotFound)
	}
	return v, nil
}

// GetVolume returns the volume with the given ID.
func (s *Store) GetVolume(ctx context.Context, id string) (api.Volume, error) {
	var v api.Volume
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		v, err = getVolume(tx, id)
		return err
	})
	return v, err
}

// GetVolumeByName returns the volume with the given name.
func (s *Store) GetVolumeByName(ctx context.Context, name string) (api.Volume, error) {
	var v api.Volume
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		id := tx.Bucket(bucketVolumeNames).Get([]byte(name))
		if id == nil {
			return fmt.Errorf("volume named %q: %w", name, ErrNotFound)
		}
		v, err = getVolume(tx, string(id))
		return err
	})
	return v, err
}

// ListVolumes returns every volume in ID (creation) order.
func (s *Store) ListVolumes(ctx context.Context) ([]api.Volume, error) {
	vols, _, err := s.ListVolumesUpTo(ctx)
	return vols, err
}

// ListVolumesUpTo returns every volume, in ID order, and the sequence number of the last
// volume ever created (0 for none): IDs above it were never handed out by this state.
func (s *Store) ListVolumesUpTo(ctx context.Context) ([]api.Volume, uint64, error) {
	out := []api.Volume{}
	var last uint64
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketVolumes)
		last = b.Sequence()
		return b.ForEach(func(k, raw []byte) error {
			var v api.Volume
			if err := jsonUnmarshal(k, raw, &v); err != nil {
				return err
			}
			out = append(out, v)
			return nil
		})
	})
	if err != nil {
		return nil, 0, fmt.Errorf("listing volumes: %w", err)
	}
	return out, last, nil
}

// MarkVolumeProvisioned records that a volume's file was made.
func (s *Store) MarkVolumeProvisioned(ctx context.Context, id string) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		v, err := getVolume(tx, id)
		if err != nil {
			return err
		}
		v.Provisioned = true
		return putJSON(tx.Bucket(bucketVolumes), []byte(id), v)
	})
	if err != nil {
		return fmt.Errorf("marking volume %s provisioned: %w", id, err)
	}
	return nil
}

// DeleteVolume removes an available volume and returns what it was. An attached
// volume fails with ErrConflict: it must be detached first, as in every cloud.
func (s *Store) DeleteVolume(ctx context.Context, id string) (api.Volume, error) {
	var out api.Volume
	err := s.update(ctx, func(tx *bolt.Tx) error {
		v, err := getVolume(tx, id)
		if err != nil {
			return err
		}
		if v.State == api.VolumeAttached {
			return fmt.Errorf("volume %s is attached to instance %s; detach it first: %w", id, v.AttachedTo, ErrConflict)
		}
		if err := tx.Bucket(bucketVolumeNames).Delete([]byte(v.Name)); err != nil {
			return err
		}
		out = v
		return tx.Bucket(bucketVolumes).Delete([]byte(id))
	})
	if err != nil {
		return api.Volume{}, fmt.Errorf("deleting volume %s: %w", id, err)
	}
	return out, nil
}

// AttachVolume attaches a volume to an instance and returns it, with changed false when
// it was attached to that instance already. It fails with ErrConflict when the
// instance does not exist, is terminated, or is in another zone; when the volume is
// attached to another instance (a volume attaches to one instance at a time); and when
// the instance has limit volumes attached already, with ErrLimit.
func (s *Store) AttachVolume(ctx context.Context, id, instanceID string, limit int, now time.Time) (vol api.Volume, changed bool, err error) {
	err = s.update(ctx, func(tx *bolt.Tx) error {
		v, err := getVolume(tx, id)
		if err != nil {
			return err
		}
		vol, changed = v, false
		if v.State == api.VolumeAttached {
			if v.AttachedTo == instanceID {
				return nil
			}
			return fmt.Errorf("volume %s is attached to instance %s and attaches to one instance at a time; detach it first: %w", id, v.AttachedTo, ErrConflict)
		}
		inst, err := getInstance(tx, instanceID)
		if err != nil {
			return fmt.Errorf("instance %s does not exist: %w", instanceID, ErrConflict)
		}
		if inst.State == api.InstanceTerminated {
			return fmt.Errorf("instance %s is terminated: %w", instanceID, ErrConflict)
		}
		if inst.Zone != v.Zone {
			return fmt.Errorf("volume %s is in zone %s and instance %s in zone %s: a volume attaches only in its zone: %w", id, v.Zone, instanceID, inst.Zone, ErrConflict)
		}
		attached, err := attachedTo(tx, instanceID)
		if err != nil {
			return err
		}
		if len(attached) >= limit {
			return fmt.Errorf("instance %s has %d volumes attached, its limit: %w", instanceID, len(attached), ErrLimit)
		}
		v.State, v.AttachedTo, v.UpdatedAt = api.VolumeAttached, instanceID, now
		vol, changed = v, true
		return putJSON(tx.Bucket(bucketVolumes), []byte(id), v)
	})
	if err != nil {
		return api.Volume{}, false, fmt.Errorf("attaching volume %s to instance %s: %w", id, instanceID, err)
	}
	return vol, changed, nil
}

// attachedTo returns the IDs of the volumes attached to an instance.
func attachedTo(tx *bolt.Tx, instanceID string) ([]string, error) {
	var ids []string
	err := tx.Bucket(bucketVolumes).ForEach(func(k, raw []byte) error {
		var v api.Volume
		if err := jsonUnmarshal(k, raw, &v); err != nil {
			return err
		}
		if v.State == api.VolumeAttached && v.AttachedTo == instanceID {
			ids = append(ids, v.ID)
		}
		return nil
	})
	return ids, err
}

// DetachVolume detaches a volume from an instance and returns it, with changed false
// when it was not attached. A volume attached to another instance fails with
// ErrConflict: a detach names the attachment it ends.
func (s *Store) DetachVolume(ctx context.Context, id, instanceID string, now time.Time) (vol api.Volume, changed bool, err error) {
	err = s.update(ctx, func(tx *bolt.Tx) error {
		v, err := getVolume(tx, id)
		if err != nil {
			return err
		}
		vol, changed = v, false
		if v.State != api.VolumeAttached {
			return nil
		}
		if v.AttachedTo != instanceID {
			return fmt.Errorf("volume %s is attached to instance %s, not %s: %w", id, v.AttachedTo, instanceID, ErrConflict)
		}
		v.State, v.AttachedTo, v.UpdatedAt = api.VolumeAvailable, "", now
		vol, changed = v, true
		return putJSON(tx.Bucket(bucketVolumes), []byte(id), v)
	})
	if err != nil {
		return api.Volume{}, false, fmt.Errorf("detaching volume %s from instance %s: %w", id, instanceID, err)
	}
	return vol, changed, nil
}

// ExpandVolume grows a volume to size (validated and rounded) and returns it, with
// changed false when it had that size already. A smaller size fails with a
// *api.FieldError on sizeBytes: volumes only grow.
func (s *Store) ExpandVolume(ctx context.Context, id string, size int64, now time.Time) (vol api.Volume, changed bool, err error) {
	err = s.update(ctx, func(tx *bolt.Tx) error {
		v, err := getVolume(tx, id)
		if err != nil {
			return err
		}
		vol, changed = v, false
		switch {
		case size == v.SizeBytes:
			return nil
		case size < v.SizeBytes:
			return &api.FieldError{Field: "sizeBytes", Message: fmt.Sprintf("%d: volume %s has %d bytes and volumes only grow", size, id, v.SizeBytes)}
		}
		v.SizeBytes, v.UpdatedAt = size, now
		vol, changed = v, true
		return putJSON(tx.Bucket(bucketVolumes), []byte(id), v)
	})
	if err != nil {
		return api.Volume{}, false, fmt.Errorf("expanding volume %s: %w", id, err)
	}
	return vol, changed, nil
}

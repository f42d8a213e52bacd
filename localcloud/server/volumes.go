package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nephele-dev/nephele/internal/securedir"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/hosts"
	"github.com/nephele-dev/nephele/localcloud/store"
)

// DefaultVolumeDir is where a cloud keeps its volumes' files when Config.VolumeDir is
// empty: beside the state file.
func DefaultVolumeDir(statePath string) string { return statePath + ".volumes" }

// volumeFileSuffix ends the name of a volume's file: "<volume ID>.img", the only files
// the host machine binds to loop devices.
const volumeFileSuffix = hosts.DiskFileSuffix

// volumeDefaults completes the volume configuration.
func (c *Config) volumeDefaults() error {
	if c.VolumeDir == "" {
		c.VolumeDir = DefaultVolumeDir(c.StatePath)
	}
	dir, err := filepath.Abs(c.VolumeDir)
	if err != nil {
		return fmt.Errorf("volume directory %s: %w", c.VolumeDir, err)
	}
	c.VolumeDir = dir
	if c.MaxVolumeSize == 0 {
		c.MaxVolumeSize = api.DefaultMaxVolumeSize
	}
	if c.MaxVolumeSize < 0 || c.MaxVolumeSize%api.VolumeSizeUnit != 0 {
		return fmt.Errorf("maximum volume size %d: want a positive multiple of %d bytes (1 MiB)", c.MaxVolumeSize, api.VolumeSizeUnit)
	}
	if c.VolumeAttachLimit == 0 {
		c.VolumeAttachLimit = api.DefaultVolumeAttachLimit
	}
	if c.VolumeAttachLimit < 0 {
		return fmt.Errorf("volume attach limit %d: want a positive number", c.VolumeAttachLimit)
	}
	return nil
}

// volumeFile is a volume's backing file.
func (s *Server) volumeFile(id string) string {
	return filepath.Join(s.cfg.VolumeDir, id+volumeFileSuffix)
}

// sizeFile makes a volume's file (sparse) with at least size bytes, creating it only
// when create is set: a volume whose file went missing must not come back empty, to be
// formatted over by a node as if it were new. A file already bigger is left as it is. A
// symbolic link is refused: the cloud runs as root, and a link would make it grow or
// bind whatever file the link names.
func sizeFile(path string, size int64, create bool) error {
	flags := os.O_RDWR | syscall.O_NOFOLLOW
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("volume file %s is missing: its data is lost (restore the file, or delete the volume)", path)
	}
	if err != nil {
		return fmt.Errorf("opening volume file: %w", err)
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("volume file %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("volume file %s is not a regular file", path)
	}
	if info.Size() < size {
		if err := f.Truncate(size); err != nil {
			return fmt.Errorf("sizing volume file %s to %d bytes: %w", path, size, err)
		}
	}
	return nil
}

// openVolumes brings the volume directory to the state. A volume whose file was never
// made (a crash between storing it and making its file) gets it; one whose file went
// missing is left without (its answer and an attach say so), never made again empty. A
// file of a volume the state deleted (a crash between deleting the record and the file)
// is removed, but only for IDs this state handed out: a lost or new state file must not
// delete other volumes' data. With hosts, the volumes attached to hosts get their
// devices back and the machine's other devices are detached.
func (s *Server) openVolumes(ctx context.Context) error {
	if err := os.MkdirAll(s.cfg.VolumeDir, 0o700); err != nil {
		return fmt.Errorf("creating the volume directory: %w", err)
	}
	// Nobody else may plant files (or links) where the cloud, as root, opens and binds
	// them; and the path the kernel reports for a loop device's file is the resolved
	// one, which is what the cloud must name them by.
	if err := securedir.Check(s.cfg.VolumeDir); err != nil {
		return fmt.Errorf("the volume directory: %w", err)
	}
	dir, err := filepath.EvalSymlinks(s.cfg.VolumeDir)
	if err != nil {
		return fmt.Errorf("the volume directory: %w", err)
	}
	s.cfg.VolumeDir = dir
	vols, last, err := s.store.ListVolumesUpTo(ctx)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, v := range vols {
		known[v.ID+volumeFileSuffix] = true
		if err := s.provision(ctx, v); err != nil {
			s.log.Error(err, "a volume's file", "volume", v.ID)
		}
	}
	entries, err := os.ReadDir(s.cfg.VolumeDir)
	if err != nil {
		return fmt.Errorf("reading the volume directory: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		seq, ok := store.VolumeSeq(strings.TrimSuffix(name, volumeFileSuffix))
		if !ok || !strings.HasSuffix(name, volumeFileSuffix) || known[name] || seq > last {
			continue
		}
		s.log.Info("removing the file of a deleted volume", "file", name)
		if err := os.Remove(filepath.Join(s.cfg.VolumeDir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the file of a deleted volume: %w", err)
		}
	}
	if s.machine == nil {
		return nil
	}
	var want []hosts.DiskSpec
	for _, v := range vols {
		if v.State != api.VolumeAttached {
			continue
		}
		inst, err := s.store.GetInstance(ctx, v.AttachedTo)
		if err != nil || !inst.IsHost() || inst.State == api.InstanceTerminated {
			continue
		}
		want = append(want, hosts.DiskSpec{Volume: v.ID, Host: v.AttachedTo, File: s.volumeFile(v.ID)})
	}
	// A device that cannot be made again does not stop the cloud: the volume's answer
	// has no device, and an attach retries.
	if err := s.machine.SyncDisks(ctx, want); err != nil {
		s.log.Error(err, "bringing the volumes' devices to the state")
	}
	return nil
}

// decorateVolume adds an attached volume's device to an answer.
func (s *Server) decorateVolume(v *api.Volume) {
	if s.machine == nil || v.State != api.VolumeAttached {
		return
	}
	if d, ok := s.machine.Disk(v.ID); ok {
		v.Device, v.DevicePath = d.Device, d.Link
	}
}

func (s *Server) createVolume(c *call) (int, any, error) {
	var spec api.VolumeSpec
	if err := decode(c, "spec", &spec); err != nil {
		return 0, nil, err
	}
	if spec.Zone == "" {
		spec.Zone = s.cfg.Zones[0]
	}
	if err := spec.Validate(s.cfg.Zones, s.cfg.MaxVolumeSize); err != nil {
		return 0, nil, err
	}
	spec.SizeBytes = api.RoundVolumeSize(spec.SizeBytes)
	ctx := c.r.Context()
	// By name: two creates of one name are one volume, and its file is sized once.
	defer s.volumeNames.Lock(spec.Name)()
	vol, created, err := s.store.CreateVolume(ctx, spec, time.Now().UTC())
	if err != nil {
		return 0, nil, err
	}
	defer s.volumes.Lock(vol.ID)()
	if !created {
		// Read again under the volume's lock: a delete may have come first.
		again, err := s.store.GetVolume(ctx, vol.ID)
		if isNotFound(err) {
			return 0, nil, fmt.Errorf("volume %s named %s was deleted while this create ran; create it again: %w", vol.ID, spec.Name, store.ErrConflict)
		}
		if err != nil {
			return 0, nil, err
		}
		vol = again
	}
	// Also for a volume that existed: a crash may have come between its record and its
	// file.
	if err := s.provision(ctx, vol); err != nil {
		if created {
			// Applied entirely or not at all.
			if _, derr := s.store.DeleteVolume(context.WithoutCancel(ctx), vol.ID); derr != nil {
				err = errors.Join(err, derr)
			}
		}
		return 0, nil, fmt.Errorf("volume %s: %w", vol.ID, err)
	}
	vol.Provisioned = true
	s.decorateVolume(&vol)
	if created {
		return http.StatusCreated, vol, nil
	}
	return http.StatusOK, vol, nil
}

// provision makes a volume's file when it was never made, and marks the volume
// provisioned; the file of a provisioned volume must exist (sizeFile does not make it
// again). The caller holds the volume's lock, or has the cloud to itself at start.
func (s *Server) provision(ctx context.Context, v api.Volume) error {
	if err := sizeFile(s.volumeFile(v.ID), v.SizeBytes, !v.Provisioned); err != nil {
		return err
	}
	if v.Provisioned {
		return nil
	}
	return s.store.MarkVolumeProvisioned(ctx, v.ID)
}

func (s *Server) getVolume(c *call) (int, any, error) {
	vol, err := s.store.GetVolume(c.r.Context(), c.r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	s.decorateVolume(&vol)
	return http.StatusOK, vol, nil
}

func (s *Server) listVolumes(c *call) (int, any, error) {
	q, err := query(c, "name")
	if err != nil {
		return 0, nil, err
	}
	list := api.VolumeList{Items: []api.Volume{}}
	if name, ok := q["name"]; ok {
		if err := api.ValidateVolumeName("name", name); err != nil {
			return 0, nil, err
		}
		vol, err := s.store.GetVolumeByName(c.r.Context(), name)
		switch {
		case err == nil:
			list.Items = append(list.Items, vol)
		case !isNotFound(err):
			return 0, nil, err
		}
	} else if list.Items, err = s.store.ListVolumes(c.r.Context()); err != nil {
		return 0, nil, err
	}
	for i := range list.Items {
		s.decorateVolume(&list.Items[i])
	}
	return http.StatusOK, list, nil
}

func (s *Server) deleteVolume(c *call) (int, any, error) {
	id := c.r.PathValue("id")
	defer s.volumes.Lock(id)()
	if _, err := s.store.DeleteVolume(c.r.Context(), id); err != nil {
		return 0, nil, err
	}
	// A crash before this leaves the file, which the next start removes.
	if err := os.Remove(s.volumeFile(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, nil, fmt.Errorf("volume %s is deleted, but its file is not: %w", id, err)
	}
	return http.StatusNoContent, nil, nil
}

// decodeAttachment reads an attach or detach request and locks the instance, then the
// volume (the order instance actions take them in too).
func (s *Server) decodeAttachment(c *call) (id string, att api.VolumeAttachment, unlock func(), err error) {
	if err := decode(c, "", &att); err != nil {
		return "", att, nil, err
	}
	if err := api.ValidateObjectName("instanceID", att.InstanceID); err != nil {
		return "", att, nil, err
	}
	id = c.r.PathValue("id")
	unlockInstance := s.instances.Lock(att.InstanceID)
	unlockVolume := s.volumes.Lock(id)
	return id, att, func() { unlockVolume(); unlockInstance() }, nil
}

func (s *Server) attachVolume(c *call) (int, any, error) {
	id, att, unlock, err := s.decodeAttachment(c)
	if err != nil {
		return 0, nil, err
	}
	defer unlock()
	ctx := c.r.Context()
	vol, changed, err := s.store.AttachVolume(ctx, id, att.InstanceID, s.cfg.VolumeAttachLimit, time.Now().UTC())
	if err != nil {
		return 0, nil, err
	}
	if err := s.attachDevice(ctx, &vol); err != nil {
		if changed {
			// Applied entirely or not at all: a device bound before the failure goes too.
			undo := context.WithoutCancel(ctx)
			if s.machine != nil {
				if derr := s.machine.DetachDisk(undo, id); derr != nil {
					err = errors.Join(err, derr)
				}
			}
			if _, _, derr := s.store.DetachVolume(undo, id, att.InstanceID, time.Now().UTC()); derr != nil {
				err = errors.Join(err, derr)
			}
		}
		return 0, nil, fmt.Errorf("attaching volume %s to instance %s: %w", id, att.InstanceID, err)
	}
	s.decorateVolume(&vol)
	return http.StatusOK, vol, nil
}

// attachDevice makes the block device of a volume attached to a host (also when it was
// attached already: a device may have failed before). An instance that is a record
// gets no device.
func (s *Server) attachDevice(ctx context.Context, vol *api.Volume) error {
	if s.machine == nil {
		return nil
	}
	inst, err := s.store.GetInstance(ctx, vol.AttachedTo)
	if err != nil || !inst.IsHost() {
		return err
	}
	_, err = s.machine.AttachDisk(ctx, hosts.DiskSpec{Volume: vol.ID, Host: inst.ID, File: s.volumeFile(vol.ID)})
	return err
}

func (s *Server) detachVolume(c *call) (int, any, error) {
	id, att, unlock, err := s.decodeAttachment(c)
	if err != nil {
		return 0, nil, err
	}
	defer unlock()
	vol, err := s.detachLocked(c.r.Context(), id, att.InstanceID)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, vol, nil
}

// detachLocked detaches a volume from an instance, device first: a failure (a device
// still in use on the host, a 409) leaves the volume attached, and a detach again
// finishes it. A volume on another instance keeps its device, and the store refuses.
// The caller holds the instance's lock, then the volume's.
func (s *Server) detachLocked(ctx context.Context, id, instanceID string) (api.Volume, error) {
	vol, err := s.store.GetVolume(ctx, id)
	if err != nil {
		return api.Volume{}, err
	}
	if s.machine != nil && vol.State == api.VolumeAttached && vol.AttachedTo == instanceID {
		if err := s.machine.DetachDisk(ctx, id); err != nil {
			if errors.Is(err, hosts.ErrDiskBusy) {
				err = fmt.Errorf("%w: %w", err, store.ErrConflict)
			}
			return api.Volume{}, err
		}
	}
	vol, _, err = s.store.DetachVolume(ctx, id, instanceID, time.Now().UTC())
	return vol, err
}

func (s *Server) expandVolume(c *call) (int, any, error) {
	var req api.VolumeExpansion
	if err := decode(c, "", &req); err != nil {
		return 0, nil, err
	}
	if err := api.ValidateVolumeSize("sizeBytes", req.SizeBytes, s.cfg.MaxVolumeSize); err != nil {
		return 0, nil, err
	}
	id := c.r.PathValue("id")
	defer s.volumes.Lock(id)()
	ctx := c.r.Context()
	size := api.RoundVolumeSize(req.SizeBytes)
	if _, err := s.store.GetVolume(ctx, id); err != nil {
		return 0, nil, err
	}
	// The file grows first, the record after: a file that cannot grow changes nothing,
	// and a file bigger than its record is harmless (a smaller size is then refused, and
	// files never shrink).
	if err := sizeFile(s.volumeFile(id), size, false); err != nil {
		return 0, nil, fmt.Errorf("volume %s: its file cannot grow to %d bytes: %w", id, size, err)
	}
	vol, _, err := s.store.ExpandVolume(ctx, id, size, time.Now().UTC())
	if err != nil {
		return 0, nil, err
	}
	if s.machine != nil {
		if err := s.machine.ResizeDisk(ctx, id); err != nil {
			return 0, nil, fmt.Errorf("volume %s has grown, but its device has not: %w", id, err)
		}
	}
	s.decorateVolume(&vol)
	return http.StatusOK, vol, nil
}

// detachInstanceVolumes detaches every volume of an instance being terminated or
// deleted, as a cloud does, devices first; the caller holds the instance's lock.
func (s *Server) detachInstanceVolumes(ctx context.Context, instanceID string) error {
	vols, err := s.store.ListVolumes(ctx)
	if err != nil {
		return err
	}
	for _, v := range vols {
		if v.State != api.VolumeAttached || v.AttachedTo != instanceID {
			continue
		}
		unlock := s.volumes.Lock(v.ID)
		_, err := s.detachLocked(ctx, v.ID, instanceID)
		unlock()
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("detaching volume %s from instance %s: %w", v.ID, instanceID, err)
		}
	}
	return nil
}

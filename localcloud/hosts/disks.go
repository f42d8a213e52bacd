package hosts

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"
)

// DiskFileSuffix ends the name of a volume's file, "<volume ID>.img": the only files a
// Machine binds to loop devices.
const DiskFileSuffix = ".img"

// disksDirName is the directory, in a host's state directory, of the links to the
// block devices of the volumes attached to it.
const disksDirName = "disks"

// DiskSpec is a volume the machine makes a block device of for a host.
type DiskSpec struct {
	// Volume is the volume's ID, the name of the host's link to the device.
	Volume string
	// Host is the ID of the host the volume is attached to.
	Host string
	// File is the volume's backing file: an absolute path.
	File string
}

// Disk is an attached volume's machine side.
type Disk struct {
	// Device is the loop device ("/dev/loop3").
	Device string
	// Link is the link to Device in the host's state directory
	// ("<host dir>/disks/<volume>"): a path that names the volume, as a cloud's by-id
	// link does, for whatever runs in the host to find its disk by.
	Link string
}

// diskRecord is one attached volume in the journal. Device is empty between recording
// the attachment and binding the device; Cleanup then finds the device by its backing
// file, which is File.
type diskRecord struct {
	Volume string `json:"volume"`
	Host   string `json:"host"`
	File   string `json:"file"`
	Device string `json:"device,omitempty"`
}

// ErrDiskBusy means a volume's device is still in use on its host (a mounted file
// system), so it cannot be detached yet.
var ErrDiskBusy = errors.New("is still in use on the host")

var loopDevice = regexp.MustCompile(`^/dev/loop[0-9]+$`)

// validate checks a disk record against what a Machine in the absolute dir writes.
func (d *diskRecord) validate(key string) error {
	switch {
	case d == nil:
		return errors.New("empty")
	case ValidateID(d.Volume) != nil || d.Volume != key:
		return fmt.Errorf("volume %q: want the key, a volume ID", d.Volume)
	case ValidateID(d.Host) != nil:
		return fmt.Errorf("host %q is not an instance ID", d.Host)
	case !filepath.IsAbs(d.File) || filepath.Clean(d.File) != d.File || filepath.Base(d.File) != d.Volume+DiskFileSuffix:
		return fmt.Errorf("file %q is not the absolute, clean path of the volume's file (%s%s)", d.File, d.Volume, DiskFileSuffix)
	case d.Device != "" && !loopDevice.MatchString(d.Device):
		return fmt.Errorf("device %q is not a loop device", d.Device)
	}
	return nil
}

// diskLink is the link to a volume's device in a host's state directory.
func diskLink(dir, host, volume string) string {
	return filepath.Join(HostDir(dir, host), disksDirName, volume)
}

// validateDisk checks a disk spec before anything acts on it as root: as its journal
// record would be checked.
func validateDisk(spec DiskSpec) error {
	return (&diskRecord{Volume: spec.Volume, Host: spec.Host, File: spec.File}).validate(spec.Volume)
}

// AttachDisk makes a block device of a volume's file for a host: a loop device, and a
// link to it in the host's state directory. It is idempotent: a volume attached to that
// host already keeps its device (its link is made again if missing); a volume attached
// to another host is detached from it first. The attachment is recorded before the
// device is bound, so Cleanup finds it after a crash.
func (m *Machine) AttachDisk(ctx context.Context, spec DiskSpec) (Disk, error) {
	if err := validateDisk(spec); err != nil {
		return Disk{}, fmt.Errorf("attaching a disk: %w", err)
	}
	m.diskMu.Lock()
	defer m.diskMu.Unlock()
	rec, err := m.diskRecord(ctx, spec.Volume)
	if err != nil {
		return Disk{}, err
	}
	if rec != nil && (rec.Host != spec.Host || rec.File != spec.File) {
		if err := m.detachDisk(rec); err != nil {
			return Disk{}, err
		}
		rec = nil
	}
	if rec == nil {
		rec = &diskRecord{Volume: spec.Volume, Host: spec.Host, File: spec.File}
		if err := m.record(func() { m.setDisk(rec) }); err != nil {
			return Disk{}, err
		}
	}
	dev, err := m.bindDisk(rec)
	if err != nil {
		return Disk{}, fmt.Errorf("attaching volume %s to host %s: %w", spec.Volume, spec.Host, err)
	}
	link := diskLink(m.cfg.Dir, spec.Host, spec.Volume)
	if err := replaceLink(dev, link); err != nil {
		return Disk{}, fmt.Errorf("attaching volume %s to host %s: %w", spec.Volume, spec.Host, err)
	}
	return Disk{Device: dev, Link: link}, nil
}

// setDisk puts a record in the journal; the caller holds mu.
func (m *Machine) setDisk(rec *diskRecord) {
	if m.j.Disks == nil {
		m.j.Disks = map[string]*diskRecord{}
	}
	m.j.Disks[rec.Volume] = rec
}

// bindDisk returns the loop device of a recorded disk, binding one when the file has
// none: the one the kernel has bound to the file (the recorded one, or one bound before
// a crash kept it out of the journal), else a new one.
func (m *Machine) bindDisk(rec *diskRecord) (string, error) {
	found, err := findLoops(rec.File)
	if err != nil {
		return "", err
	}
	// A device that unbinds itself at its last close is on its way out (a detach while
	// it was in use): it is not this attachment's.
	var devs []string
	for _, d := range found {
		if !loopClearing(d) {
			devs = append(devs, d)
		}
	}
	// The recorded device first: it is the one the host uses.
	if i := slices.Index(devs, rec.Device); i > 0 {
		devs[0], devs[i] = devs[i], devs[0]
	}
	var dev string
	if len(devs) > 0 {
		dev = devs[0]
		for _, extra := range devs[1:] {
			if err := detachLoop(extra); err != nil {
				return "", err
			}
		}
	} else if dev, err = attachLoop(rec.File); err != nil {
		return "", err
	}
	if dev == rec.Device {
		return dev, nil
	}
	if err := m.record(func() { rec.Device = dev }); err != nil {
		return "", err
	}
	return dev, nil
}

// replaceLink makes link point at target, creating its directory.
func replaceLink(target, link string) error {
	if cur, err := os.Readlink(link); err == nil && cur == target {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(link), err)
	}
	tmp := link + ".new"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("linking %s: %w", link, err)
	}
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("linking %s: %w", link, err)
	}
	return nil
}

// DetachDisk removes a volume's device and its link from the host it is attached to. A
// volume the machine has not attached is not an error; a device still in use on the host
// fails with ErrDiskBusy and stays recorded (the kernel unbinds it when it is closed, and
// a detach again then finishes).
func (m *Machine) DetachDisk(ctx context.Context, volume string) error {
	m.diskMu.Lock()
	defer m.diskMu.Unlock()
	rec, err := m.diskRecord(ctx, volume)
	if rec == nil || err != nil {
		return err
	}
	return m.detachDisk(rec)
}

// diskRecord returns a volume's record, nil when the machine has not attached it, once
// ctx is still live; the caller holds diskMu.
func (m *Machine) diskRecord(ctx context.Context, volume string) (*diskRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.j.Disks[volume], nil
}

// detachDisk unbinds every loop device of a recorded disk's file, removes its link and
// then its record; the caller holds diskMu.
func (m *Machine) detachDisk(rec *diskRecord) error {
	// The kernel's list holds the recorded device too while it is bound to the file.
	devs, err := findLoops(rec.File)
	if err != nil {
		return fmt.Errorf("detaching volume %s: %w", rec.Volume, err)
	}
	for _, dev := range devs {
		if err := detachLoop(dev); err != nil {
			return fmt.Errorf("detaching volume %s from host %s: %w", rec.Volume, rec.Host, err)
		}
		// The kernel answers a device still open (mounted in the host) with success and
		// unbinds it only at its last close: until then it is not detached, and handing
		// the volume to another host would give two hosts one disk.
		if loopBacking(dev) == rec.File {
			return fmt.Errorf("detaching volume %s from host %s: %s %w (unmount it there first)", rec.Volume, rec.Host, dev, ErrDiskBusy)
		}
	}
	if err := os.Remove(diskLink(m.cfg.Dir, rec.Host, rec.Volume)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("detaching volume %s: %w", rec.Volume, err)
	}
	return m.record(func() { delete(m.j.Disks, rec.Volume) })
}

// ResizeDisk makes an attached volume's device take its file's size after the file
// grew. A volume the machine has not attached is not an error.
func (m *Machine) ResizeDisk(ctx context.Context, volume string) error {
	m.diskMu.Lock()
	defer m.diskMu.Unlock()
	rec, err := m.diskRecord(ctx, volume)
	if err != nil {
		return err
	}
	if rec == nil || rec.Device == "" || loopBacking(rec.Device) != rec.File {
		return nil
	}
	return resizeLoop(rec.Device)
}

// Disk returns the machine side of an attached volume; false when the machine has not
// attached it.
func (m *Machine) Disk(volume string) (Disk, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.j.Disks[volume]
	if rec == nil || rec.Device == "" {
		return Disk{}, false
	}
	return Disk{Device: rec.Device, Link: diskLink(m.cfg.Dir, rec.Host, rec.Volume)}, true
}

// SyncDisks brings the machine's disks to want: volumes it has attached and want does
// not name (or names on another host) are detached, the others attached. It goes on
// after failures and returns them all.
func (m *Machine) SyncDisks(ctx context.Context, want []DiskSpec) error {
	wanted := map[string]DiskSpec{}
	for _, d := range want {
		wanted[d.Volume] = d
	}
	m.mu.Lock()
	var stale []string
	for v, rec := range m.j.Disks {
		if d, ok := wanted[v]; !ok || d.Host != rec.Host || d.File != rec.File {
			stale = append(stale, v)
		}
	}
	m.mu.Unlock()
	var errs []error
	for _, v := range stale {
		if err := m.DetachDisk(ctx, v); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range want {
		if _, err := m.AttachDisk(ctx, d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// releaseWait bounds how long a teardown waits for the kernel to release a disk's device
// once the host namespaces that held it mounted are gone (their mounts go lazily), and
// releasePoll is how often it looks.
const (
	releaseWait = 10 * time.Second
	releasePoll = 50 * time.Millisecond
)

// teardownDisks detaches every recorded disk; the caller has the machine to itself and
// has torn the hosts down. A device still busy is looked at again until releaseWait has
// passed or ctx ends: the mounts of a host's mount namespace are released after it is.
func (m *Machine) teardownDisks(ctx context.Context) []error {
	m.diskMu.Lock()
	defer m.diskMu.Unlock()
	m.mu.Lock()
	recs := make([]*diskRecord, 0, len(m.j.Disks))
	for _, rec := range m.j.Disks {
		recs = append(recs, rec)
	}
	m.mu.Unlock()
	deadline := time.Now().Add(releaseWait)
	var errs []error
	for _, rec := range recs {
		err := m.detachDisk(rec)
		for errors.Is(err, ErrDiskBusy) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(releasePoll)
			err = m.detachDisk(rec)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

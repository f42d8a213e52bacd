package server_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/hosts"
	"github.com/nephele-dev/nephele/localcloud/server"
)

const gib = 1 << 30

// volumeFile is a volume's file in the cloud's default volume directory.
func (c *testCloud) volumeFile(id string) string {
	return filepath.Join(server.DefaultVolumeDir(c.cfg.StatePath), id+".img")
}

// fileSize returns a file's apparent size and the bytes it takes on disk.
func fileSize(t *testing.T, path string) (size, onDisk int64) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("volume file: %v", err)
	}
	return info.Size(), info.Sys().(*syscall.Stat_t).Blocks * 512
}

// wantStatus checks that err is a local cloud answer with the given status and reason.
func wantStatus(t *testing.T, what string, err error, status int, reason api.Reason) {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != status || ce.Reason != reason {
		t.Errorf("%s: %v, want %d %s", what, err, status, reason)
	}
}

// TestVolumeLifecycle: a volume is a sparse file of its size; its name makes a create
// idempotent; it attaches to one instance of its zone at a time, up to the instance's
// limit; it cannot be deleted while attached; it only grows; terminating its instance
// detaches it and keeps it; deleting it removes its file.
func TestVolumeLifecycle(t *testing.T) {
	c := startCloud(t, func(cfg *server.Config) { cfg.VolumeAttachLimit = 2 })
	cl := c.client
	a := must(cl.CreateInstance(ctx(), api.InstanceSpec{Name: "node-a", Zone: "local-a"})).of(t)
	b := must(cl.CreateInstance(ctx(), api.InstanceSpec{Name: "node-b", Zone: "local-a"})).of(t)
	other := must(cl.CreateInstance(ctx(), api.InstanceSpec{Name: "node-c", Zone: "local-b"})).of(t)

	spec := api.VolumeSpec{Name: "pvc-1", Zone: "local-a", SizeBytes: gib + 1}
	v := must(cl.CreateVolume(ctx(), spec)).of(t)
	if v.SizeBytes != gib+api.VolumeSizeUnit || v.State != api.VolumeAvailable || !strings.HasPrefix(v.ID, "vol-") {
		t.Errorf("created volume = %+v, want %d bytes (rounded up to 1 MiB), available", v, gib+api.VolumeSizeUnit)
	}
	if size, onDisk := fileSize(t, c.volumeFile(v.ID)); size != v.SizeBytes || onDisk > 1<<20 {
		t.Errorf("volume file: %d bytes, %d on disk; want %d, sparse", size, onDisk, v.SizeBytes)
	}
	if again := must(cl.CreateVolume(ctx(), spec)).of(t); again.ID != v.ID {
		t.Errorf("a second create of the same name and size made %s, want %s", again.ID, v.ID)
	}
	_, err := cl.CreateVolume(ctx(), api.VolumeSpec{Name: "pvc-1", Zone: "local-a", SizeBytes: 2 * gib})
	wantStatus(t, "a create of the same name with another size", err, http.StatusConflict, api.ReasonAlreadyExists)
	if byName := must(cl.GetVolumeByName(ctx(), "pvc-1")).of(t); byName.ID != v.ID {
		t.Errorf("volume by name = %s, want %s", byName.ID, v.ID)
	}
	if _, err := cl.GetVolumeByName(ctx(), "pvc-none"); !errors.Is(err, cloud.ErrNotFound) {
		t.Errorf("an unknown volume by name: %v, want NotFound", err)
	}

	_, err = cl.AttachVolume(ctx(), v.ID, other.ID)
	wantStatus(t, "an attach in another zone", err, http.StatusConflict, api.ReasonConflict)
	att := must(cl.AttachVolume(ctx(), v.ID, a.ID)).of(t)
	if att.State != api.VolumeAttached || att.AttachedTo != a.ID || att.Device != "" {
		t.Errorf("attached volume = %+v, want attached to %s without a device (a record)", att, a.ID)
	}
	must(cl.AttachVolume(ctx(), v.ID, a.ID)).of(t) // the same attach again
	_, err = cl.AttachVolume(ctx(), v.ID, b.ID)
	wantStatus(t, "an attach to a second instance", err, http.StatusConflict, api.ReasonConflict)
	err = cl.DeleteVolume(ctx(), v.ID)
	wantStatus(t, "deleting an attached volume", err, http.StatusConflict, api.ReasonConflict)
	_, err = cl.DetachVolume(ctx(), v.ID, b.ID)
	wantStatus(t, "a detach from the wrong instance", err, http.StatusConflict, api.ReasonConflict)

	// The attach limit: two volumes on node-a, the third refused.
	v2 := must(cl.CreateVolume(ctx(), api.VolumeSpec{Name: "pvc-2", Zone: "local-a", SizeBytes: gib})).of(t)
	v3 := must(cl.CreateVolume(ctx(), api.VolumeSpec{Name: "pvc-3", Zone: "local-a", SizeBytes: gib})).of(t)
	must(cl.AttachVolume(ctx(), v2.ID, a.ID)).of(t)
	_, err = cl.AttachVolume(ctx(), v3.ID, a.ID)
	wantStatus(t, "an attach past the instance's limit", err, http.StatusConflict, api.ReasonLimitExceeded)

	grown := must(cl.ExpandVolume(ctx(), v.ID, 2*gib)).of(t)
	if grown.SizeBytes != 2*gib {
		t.Errorf("expanded volume has %d bytes, want %d", grown.SizeBytes, 2*gib)
	}
	if size, _ := fileSize(t, c.volumeFile(v.ID)); size != 2*gib {
		t.Errorf("expanded volume file has %d bytes, want %d", size, 2*gib)
	}
	_, err = cl.ExpandVolume(ctx(), v.ID, gib)
	wantStatus(t, "shrinking a volume", err, http.StatusBadRequest, api.ReasonInvalid)

	// Terminating node-a detaches both of its volumes and deletes neither.
	must(cl.TerminateInstance(ctx(), a.ID)).of(t)
	for _, id := range []string{v.ID, v2.ID} {
		if got := must(cl.GetVolume(ctx(), id)).of(t); got.State != api.VolumeAvailable || got.AttachedTo != "" {
			t.Errorf("volume %s after its instance was terminated = %+v, want available", id, got)
		}
	}
	_, err = cl.AttachVolume(ctx(), v3.ID, a.ID)
	wantStatus(t, "an attach to a terminated instance", err, http.StatusConflict, api.ReasonConflict)

	// Detached: the detach again succeeds, and delete removes the file.
	must(cl.DetachVolume(ctx(), v.ID, a.ID)).of(t)
	if err := cl.DeleteVolume(ctx(), v.ID); err != nil {
		t.Fatalf("deleting a detached volume: %v", err)
	}
	if _, err := os.Stat(c.volumeFile(v.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a deleted volume's file: %v, want it gone", err)
	}
	if err := cl.DeleteVolume(ctx(), v.ID); !errors.Is(err, cloud.ErrNotFound) {
		t.Errorf("deleting a deleted volume: %v, want NotFound", err)
	}
	if got := must(cl.ListVolumes(ctx())).of(t); len(got) != 2 || got[0].ID != v2.ID || got[1].ID != v3.ID {
		t.Errorf("volumes = %+v, want %s and %s", got, v2.ID, v3.ID)
	}
}

// TestBadVolumeRequestsWriteNothing: every bad request names its field and leaves no
// volume and no file behind.
func TestBadVolumeRequestsWriteNothing(t *testing.T) {
	c := startCloud(t, func(cfg *server.Config) { cfg.MaxVolumeSize = 4 * gib })
	v := must(c.client.CreateVolume(ctx(), api.VolumeSpec{Name: "keep", Zone: "local-a", SizeBytes: gib})).of(t)
	tests := []struct {
		name, method, path, body string
		field                    string
	}{
		{name: "size 0", method: "POST", path: "/v1/volumes", body: `{"name":"v","zone":"local-a","sizeBytes":0}`, field: "spec.sizeBytes"},
		{name: "negative size", method: "POST", path: "/v1/volumes", body: `{"name":"v","zone":"local-a","sizeBytes":-1}`, field: "spec.sizeBytes"},
		{name: "over the maximum", method: "POST", path: "/v1/volumes", body: `{"name":"v","zone":"local-a","sizeBytes":4294967297}`, field: "spec.sizeBytes"},
		{name: "unknown zone", method: "POST", path: "/v1/volumes", body: `{"name":"v","zone":"moon-1","sizeBytes":1024}`, field: "spec.zone"},
		{name: "name with white space", method: "POST", path: "/v1/volumes", body: `{"name":"my volume","zone":"local-a","sizeBytes":1024}`, field: "spec.name"},
		{name: "name over 128 bytes", method: "POST", path: "/v1/volumes", body: `{"name":"` + strings.Repeat("v", 129) + `","zone":"local-a","sizeBytes":1024}`, field: "spec.name"},
		{name: "unknown field", method: "POST", path: "/v1/volumes", body: `{"name":"v","zone":"local-a","sizeBytes":1024,"iops":3000}`, field: "spec.iops"},
		{name: "attach without instance", method: "POST", path: "/v1/volumes/" + v.ID + "/attach", body: `{}`, field: "instanceID"},
		{name: "expand past the maximum", method: "POST", path: "/v1/volumes/" + v.ID + "/expand", body: `{"sizeBytes":8589934592}`, field: "sizeBytes"},
		{name: "expand to 0", method: "POST", path: "/v1/volumes/" + v.ID + "/expand", body: `{"sizeBytes":0}`, field: "sizeBytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := c.raw(tt.method, tt.path, tt.body, nil)
			if e := apiError(t, body); status != http.StatusBadRequest || e.Field != tt.field {
				t.Errorf("%s %s %s = %d %+v, want 400 naming %s", tt.method, tt.path, tt.body, status, e, tt.field)
			}
		})
	}
	if got := must(c.client.ListVolumes(ctx())).of(t); len(got) != 1 || got[0].ID != v.ID || got[0].SizeBytes != gib || got[0].State != api.VolumeAvailable {
		t.Errorf("volumes after bad requests = %+v, want only %s, unchanged", got, v.ID)
	}
	entries, err := os.ReadDir(server.DefaultVolumeDir(c.cfg.StatePath))
	if err != nil || len(entries) != 1 {
		t.Errorf("volume directory after bad requests: %v, %v; want one file", entries, err)
	}
}

// TestVolumesConvergeAfterACrash: at the next start, the file of a volume this state
// deleted (a crash between the record and the file) is removed, and a file of an ID this
// state never handed out is not (another state's data); a short file is grown. A
// provisioned volume whose file went missing is never made again empty (a node would
// format over it): it stays missing and an expand says so. A link in a volume's place is
// never followed.
func TestVolumesConvergeAfterACrash(t *testing.T) {
	c := startCloud(t)
	lost := must(c.client.CreateVolume(ctx(), api.VolumeSpec{Name: "lost", Zone: "local-a", SizeBytes: gib})).of(t)
	short := must(c.client.CreateVolume(ctx(), api.VolumeSpec{Name: "short", Zone: "local-a", SizeBytes: gib})).of(t)
	deleted := must(c.client.CreateVolume(ctx(), api.VolumeSpec{Name: "deleted", Zone: "local-a", SizeBytes: gib})).of(t)
	linked := must(c.client.CreateVolume(ctx(), api.VolumeSpec{Name: "linked", Zone: "local-a", SizeBytes: gib})).of(t)
	if err := c.client.DeleteVolume(ctx(), deleted.ID); err != nil {
		t.Fatal(err)
	}
	c.stop()
	dir := server.DefaultVolumeDir(c.cfg.StatePath)
	foreign := filepath.Join(dir, "vol-00000000ffff.img")
	for _, f := range []string{foreign, c.volumeFile(deleted.ID)} {
		if err := os.WriteFile(f, []byte("data"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(c.volumeFile(lost.ID)); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(c.volumeFile(short.ID), 1<<20); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(target, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(c.volumeFile(linked.ID)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, c.volumeFile(linked.ID)); err != nil {
		t.Fatal(err)
	}
	c.start()
	if _, err := os.Stat(c.volumeFile(deleted.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file of a volume the state deleted: %v, want it removed", err)
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("the file of an ID this state never handed out: %v, want it kept", err)
	}
	if size, _ := fileSize(t, c.volumeFile(short.ID)); size != gib {
		t.Errorf("a short volume file after the start has %d bytes, want %d", size, gib)
	}
	if _, err := os.Stat(c.volumeFile(lost.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the missing file of a provisioned volume: %v, want it still missing, never made again empty", err)
	}
	if _, err := c.client.ExpandVolume(ctx(), lost.ID, 2*gib); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("expanding a volume whose file is missing: %v, want an error saying so", err)
	}
	if _, err := c.client.ExpandVolume(ctx(), linked.ID, 2*gib); err == nil {
		t.Error("expanding a volume whose file is a link succeeded")
	}
	if info, err := os.Stat(target); err != nil || info.Size() != 1 {
		t.Errorf("the file a planted link names: %v, %v; want it untouched", info, err)
	}
}

// TestVolumeDirOthersCanWriteIsRefused: the cloud, as root, opens and binds the files in
// its volume directory: one another user could write is refused at start.
func TestVolumeDirOthersCanWriteIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "volumes")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(ctx(), server.Config{StatePath: filepath.Join(t.TempDir(), "s.db"), Token: token, VolumeDir: dir})
	if err == nil {
		_ = srv.Shutdown(ctx())
		t.Fatal("a cloud started on a volume directory everyone can write")
	}
	if !strings.Contains(err.Error(), "volume directory") {
		t.Errorf("start: %v, want it to name the volume directory", err)
	}
}

// TestVolumeOperationsAreTheAdministrators: the CCM's token may not touch volumes, and
// volume calls are faulted like every other operation.
func TestVolumeOperationsAreTheAdministrators(t *testing.T) {
	c := startCloud(t, func(cfg *server.Config) { cfg.CCMToken = "ccm-token" })
	ccm := "Bearer ccm-token"
	for _, tt := range []struct{ method, path, body string }{
		{"POST", "/v1/volumes", `{"name":"v","zone":"local-a","sizeBytes":1024}`},
		{"GET", "/v1/volumes", ""},
		{"DELETE", "/v1/volumes/vol-000000000001", ""},
	} {
		if status, _, body := c.raw(tt.method, tt.path, tt.body, &ccm); status != http.StatusForbidden {
			t.Errorf("%s %s with the CCM's token = %d %s, want 403", tt.method, tt.path, status, body)
		}
	}
	if err := c.client.PutFault(ctx(), api.Fault{Operation: "volumes.*", Outage: true}); err != nil {
		t.Fatal(err)
	}
	_, err := c.client.CreateVolume(ctx(), api.VolumeSpec{Name: "v", Zone: "local-a", SizeBytes: gib})
	wantStatus(t, "a create during an injected outage", err, http.StatusServiceUnavailable, api.ReasonUnavailable)
	if err := c.client.ClearFaults(ctx()); err != nil {
		t.Fatal(err)
	}
	if got := must(c.client.ListVolumes(ctx())).of(t); len(got) != 0 {
		t.Errorf("volumes after a create refused by an outage = %+v, want none", got)
	}
}

// loopsOf returns the loop devices the kernel has bound to file.
func loopsOf(t *testing.T, file string) []string {
	t.Helper()
	paths, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		t.Fatal(err)
	}
	var devs []string
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err == nil && strings.TrimSpace(string(raw)) == file {
			devs = append(devs, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(p))))
		}
	}
	return devs
}

// deviceSize returns a block device's size from sysfs.
func deviceSize(t *testing.T, dev string) int64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "size"))
	if err != nil {
		t.Fatal(err)
	}
	var sectors int64
	if _, err := fmt.Sscan(string(raw), &sectors); err != nil {
		t.Fatal(err)
	}
	return sectors * 512
}

// TestHostVolumes: attached to a host, a volume is a loop device over its file with a
// link in the host's directory; what is written through the device is in the file; it
// grows with the volume; a detach, a terminate, a shutdown and Cleanup after a
// released cloud unbind it, and a start binds the attached volumes again.
func TestHostVolumes(t *testing.T) {
	before := hoststest.Snapshot(t, "nphsrv15", "10.250.15.", "10.251.15.", "nv0afa0f")
	c, markers := hostCloud(t, 15)
	cl := c.client
	h := bootHost(t, c, "disk-host")
	v := must(cl.CreateVolume(ctx(), api.VolumeSpec{Name: "data", Zone: h.Zone, SizeBytes: 64 << 20})).of(t)
	file := c.volumeFile(v.ID)

	att := must(cl.AttachVolume(ctx(), v.ID, h.ID)).of(t)
	if got := loopsOf(t, file); len(got) != 1 || got[0] != att.Device {
		t.Fatalf("attached volume's device %q; the kernel binds %v to its file", att.Device, got)
	}
	if want := filepath.Join(h.Host.Dir, "disks", v.ID); att.DevicePath != want {
		t.Errorf("device path %q, want %q", att.DevicePath, want)
	}
	if target, err := os.Readlink(att.DevicePath); err != nil || target != att.Device {
		t.Errorf("the host's link to the device: %q, %v; want %s", target, err, att.Device)
	}
	// Written through the device, read from the file.
	dev, err := os.OpenFile(att.Device, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.WriteAt([]byte("nephele volume"), 4096); err != nil {
		t.Fatal(err)
	}
	if err := dev.Sync(); err != nil {
		t.Fatal(err)
	}
	_ = dev.Close()
	buf := make([]byte, 14)
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAt(buf, 4096)
	_ = f.Close()
	if err != nil || string(buf) != "nephele volume" {
		t.Errorf("the volume's file holds %q at 4096 (%v), want what was written through its device", buf, err)
	}

	must(cl.ExpandVolume(ctx(), v.ID, 128<<20)).of(t)
	if got := deviceSize(t, att.Device); got != 128<<20 {
		t.Errorf("device of the expanded volume has %d bytes, want %d", got, 128<<20)
	}

	// A restart keeps the attachment: the shutdown unbinds the device, the start binds
	// one again, with the data.
	c.stop()
	if got := loopsOf(t, file); len(got) != 0 {
		t.Errorf("devices of the volume after a shutdown: %v, want none", got)
	}
	c.start()
	back := must(c.client.GetVolume(ctx(), v.ID)).of(t)
	if got := loopsOf(t, file); back.Device == "" || len(got) != 1 || got[0] != back.Device {
		t.Errorf("after a restart the volume's device is %q and the kernel binds %v", back.Device, got)
	}

	// In use on the host (here: held open), the device cannot be detached: 409, and the
	// volume stays attached; once closed, the detach goes through.
	busy, err := os.Open(back.Device)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.client.DetachVolume(ctx(), v.ID, h.ID)
	wantStatus(t, "detaching a volume whose device is in use", err, http.StatusConflict, api.ReasonConflict)
	if got := must(c.client.GetVolume(ctx(), v.ID)).of(t); got.State != api.VolumeAttached {
		t.Errorf("a volume whose detach was refused = %+v, want still attached", got)
	}
	_ = busy.Close()
	must(c.client.DetachVolume(ctx(), v.ID, h.ID)).of(t)
	if got := loopsOf(t, file); len(got) != 0 {
		t.Errorf("devices of a detached volume: %v, want none", got)
	}
	if _, err := os.Lstat(att.DevicePath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the host's link of a detached volume: %v, want it gone", err)
	}

	// Terminating the host detaches the volume and keeps it.
	must(c.client.AttachVolume(ctx(), v.ID, h.ID)).of(t)
	must(c.client.TerminateInstance(ctx(), h.ID)).of(t)
	if got := must(c.client.GetVolume(ctx(), v.ID)).of(t); got.State != api.VolumeAvailable || len(loopsOf(t, file)) != 0 {
		t.Errorf("volume of a terminated host = %+v with devices %v; want available, unbound", got, loopsOf(t, file))
	}

	// Released (as after a crash), the device stays; Cleanup unbinds it.
	h2 := must(c.client.CreateInstance(ctx(), api.InstanceSpec{Name: "disk-host-2", Zone: h.Zone, Kind: api.InstanceHost,
		BootCommand: []string{"sleep", "1000"}})).of(t)
	must(c.client.AttachVolume(ctx(), v.ID, h2.ID)).of(t)
	if err := c.srv.Release(ctx(), errors.New("test: released")); err == nil {
		t.Fatal("Release returned no error")
	}
	c.srv = nil
	if got := loopsOf(t, file); len(got) != 1 {
		t.Errorf("devices of the volume after the cloud was released: %v, want one", got)
	}
	if err := hosts.Cleanup(ctx(), server.DefaultHostDir(c.cfg.StatePath), testlog.New(t, 1)); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if got := loopsOf(t, file); len(got) != 0 {
		t.Errorf("devices of the volume after Cleanup: %v, want none", got)
	}
	if got := hoststest.Snapshot(t, markers...); got != before {
		t.Errorf("the machine after Cleanup differs from before:\n%s", got)
	}
}

// TestCSITokenOfItsOwn: the CSI driver's token may not be the administrator's or the
// CCM's, nor empty; nor may a rotation make the CCM's token the CSI driver's.
func TestCSITokenOfItsOwn(t *testing.T) {
	for _, tok := range []string{token, "ccm", " "} {
		_, err := server.Start(ctx(), server.Config{StatePath: filepath.Join(t.TempDir(), "s.db"), Token: token, CCMToken: "ccm", CSIToken: tok})
		if err == nil || !strings.Contains(err.Error(), "CSI driver's token") {
			t.Errorf("CSI token %q: %v, want a refusal naming it", tok, err)
		}
	}
	c := startCloud(t, func(cfg *server.Config) { cfg.CCMToken, cfg.CSIToken = "ccm", "csi" })
	if err := c.srv.SetCCMTokens("ccm", "csi"); err == nil || !strings.Contains(err.Error(), "token of its own") {
		t.Errorf("SetCCMTokens with the CSI driver's token: %v, want a refusal", err)
	}
}

package csi_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/nephele-dev/nephele/csi"
	"github.com/nephele-dev/nephele/internal/testkit/servertest"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/server"
	"github.com/nephele-dev/nephele/providers/local"
)

// serve serves d on a socket in dir until the test ends, and returns the socket's path.
func serve(t *testing.T, d *csi.Driver, dir string) string {
	t.Helper()
	sock := filepath.Join(dir, "csi.sock")
	ln, err := csi.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serving: %v", err)
		}
	})
	return sock
}

// controllerClient serves a controller-only driver over the local provider of a local
// cloud of records, and returns a CSI client of it and the cloud's administrator
// client.
func controllerClient(t *testing.T, cfg server.Config) (csipb.ControllerClient, *client.Client) {
	t.Helper()
	cfg.CSIToken = csiToken
	cfg.Logger = testlog.New(t, 0)
	srv, admin := servertest.Start(t, cfg)
	provider, err := local.NewFromConfig(local.Config{Endpoint: srv.URL(), Token: csiToken})
	if err != nil {
		t.Fatal(err)
	}
	vols, _ := provider.Volumes()
	d, err := csi.New(csi.Config{Volumes: vols, Logger: testlog.New(t, 0)})
	if err != nil {
		t.Fatal(err)
	}
	sock := serve(t, d, t.TempDir())
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return csipb.NewControllerClient(conn), admin
}

func mountCap() *csipb.VolumeCapability {
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

// TestBadCreatesLeakNothing: every create the driver or the cloud refuses answers the
// CSI code the sidecar shows on the PVC's events, with a message naming what to change,
// and leaves no volume in the cloud; the cloud's call log shows no volume made.
func TestBadCreatesLeakNothing(t *testing.T) {
	ctl, admin := controllerClient(t, server.Config{MaxVolumeSize: 1 << 30})
	zone := func(z string) *csipb.TopologyRequirement {
		return &csipb.TopologyRequirement{Preferred: []*csipb.Topology{{Segments: map[string]string{csi.TopologyKey: z}}}}
	}
	multi := mountCap()
	multi.AccessMode.Mode = csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	btrfs := mountCap()
	btrfs.GetMount().FsType = "btrfs"
	tests := []struct {
		name    string
		req     *csipb.CreateVolumeRequest
		code    codes.Code
		mention string
	}{
		{"an unknown StorageClass parameter", &csipb.CreateVolumeRequest{Parameters: map[string]string{"type": "pd-ssd"}}, codes.InvalidArgument, `"type"`},
		{"beyond the provider's largest volume", &csipb.CreateVolumeRequest{CapacityRange: &csipb.CapacityRange{RequiredBytes: 2 << 40}}, codes.OutOfRange, "largest volume"},
		// The provider's Limits are the local cloud's defaults; a cloud started with a
		// smaller --max-volume-size refuses the field itself.
		{"beyond this cloud's configured maximum", &csipb.CreateVolumeRequest{CapacityRange: &csipb.CapacityRange{RequiredBytes: 2 << 30}}, codes.InvalidArgument, "spec.sizeBytes"},
		{"a negative size", &csipb.CreateVolumeRequest{CapacityRange: &csipb.CapacityRange{RequiredBytes: -1}}, codes.OutOfRange, "negative"},
		{"a limit below the required size", &csipb.CreateVolumeRequest{CapacityRange: &csipb.CapacityRange{RequiredBytes: 2 << 20, LimitBytes: 1 << 20}}, codes.OutOfRange, "limit_bytes"},
		{"a limit below the smallest xfs", &csipb.CreateVolumeRequest{CapacityRange: &csipb.CapacityRange{RequiredBytes: 1 << 20, LimitBytes: 100 << 20}}, codes.OutOfRange, "smallest xfs file system"},
		{"an unknown zone", &csipb.CreateVolumeRequest{AccessibilityRequirements: zone("moon-1")}, codes.InvalidArgument, "moon-1"},
		{"a topology key of another driver", &csipb.CreateVolumeRequest{AccessibilityRequirements: &csipb.TopologyRequirement{
			Preferred: []*csipb.Topology{{Segments: map[string]string{"topology.ebs.csi.aws.com/zone": "a"}}}}}, codes.InvalidArgument, "topology.ebs.csi.aws.com/zone"},
		{"a multi-node access mode", &csipb.CreateVolumeRequest{VolumeCapabilities: []*csipb.VolumeCapability{multi}}, codes.InvalidArgument, "MULTI_NODE_MULTI_WRITER"},
		{"a file system the node does not format", &csipb.CreateVolumeRequest{VolumeCapabilities: []*csipb.VolumeCapability{btrfs}}, codes.InvalidArgument, "btrfs"},
		{"a snapshot source", &csipb.CreateVolumeRequest{VolumeContentSource: &csipb.VolumeContentSource{
			Type: &csipb.VolumeContentSource_Snapshot{Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: "snap-1"}}}}, codes.InvalidArgument, "volume_content_source"},
	}
	before, err := admin.CallCounts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Name = "pvc-" + strings.ReplaceAll(tt.name, " ", "-")
			if tt.req.VolumeCapabilities == nil {
				tt.req.VolumeCapabilities = []*csipb.VolumeCapability{mountCap()}
			}
			_, err := ctl.CreateVolume(t.Context(), tt.req)
			if st, _ := status.FromError(err); st.Code() != tt.code || !strings.Contains(st.Message(), tt.mention) {
				t.Errorf("CreateVolume = %v, want %s mentioning %s", err, tt.code, tt.mention)
			}
		})
	}
	if vols, err := admin.ListVolumes(t.Context()); err != nil || len(vols) != 0 {
		t.Errorf("volumes after refused creates: %+v, %v; want none", vols, err)
	}
	after, err := admin.CallCounts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	calls := after.Since(before)
	if made := calls.Code(api.OpVolumesCreate, http.StatusCreated); made != 0 {
		t.Errorf("the cloud's call log shows %d volumes created, want none", made)
	}
	// What the driver or the provider can refuse never reaches the cloud: only the
	// unknown zone and the size over this cloud's maximum, which only the cloud knows,
	// make a call, answered 400.
	if n := calls.Code(api.OpVolumesCreate, http.StatusBadRequest); n != 2 || calls.Total(api.OpVolumesCreate) != 2 {
		t.Errorf("the driver's volumes.create calls for bad requests: %v, want two answered 400 (the unknown zone, the size)", calls[api.OpVolumesCreate])
	}
}

// TestCreateConvergesThroughCloudFailures: a create the cloud fails (an outage, then an
// internal error) answers a code the provisioner retries and makes nothing; the retry makes
// the volume once, and a retry after an answer that was lost returns the same volume.
func TestCreateConvergesThroughCloudFailures(t *testing.T) {
	ctl, admin := controllerClient(t, server.Config{})
	req := &csipb.CreateVolumeRequest{Name: "pvc-retried", VolumeCapabilities: []*csipb.VolumeCapability{mountCap()},
		CapacityRange: &csipb.CapacityRange{RequiredBytes: 8 << 20}}
	for _, f := range []api.Fault{
		{Operation: "volumes.create", Outage: true},
		{Operation: "volumes.*", ErrorRate: 1},
	} {
		if err := admin.SetFaults(t.Context(), []api.Fault{f}); err != nil {
			t.Fatal(err)
		}
		_, err := ctl.CreateVolume(t.Context(), req)
		if c := status.Code(err); c != codes.Unavailable {
			t.Errorf("CreateVolume with fault %+v = %v, want Unavailable (retried by the provisioner)", f, err)
		}
	}
	if err := admin.ClearFaults(t.Context()); err != nil {
		t.Fatal(err)
	}
	first, err := ctl.CreateVolume(t.Context(), req)
	if err != nil {
		t.Fatalf("CreateVolume after the faults cleared: %v", err)
	}
	again, err := ctl.CreateVolume(t.Context(), req)
	if err != nil || again.GetVolume().GetVolumeId() != first.GetVolume().GetVolumeId() {
		t.Errorf("CreateVolume again = %v, %v; want volume %s", again, err, first.GetVolume().GetVolumeId())
	}
	if vols, err := admin.ListVolumes(t.Context()); err != nil || len(vols) != 1 {
		t.Errorf("volumes = %+v, %v; want exactly one", vols, err)
	}
}

// TestPublishOnOneNode: a volume published to one node is refused to another
// (FAILED_PRECONDITION), an unpublish from a node it is not on is OK and leaves it where
// it is, and a node at its attach limit answers RESOURCE_EXHAUSTED.
func TestPublishOnOneNode(t *testing.T) {
	ctl, admin := controllerClient(t, server.Config{VolumeAttachLimit: 1})
	for _, n := range []string{"node-a", "node-b"} {
		if _, err := admin.CreateInstance(t.Context(), api.InstanceSpec{Name: n, Zone: "local-a"}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(name string) string {
		t.Helper()
		resp, err := ctl.CreateVolume(t.Context(), &csipb.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csipb.VolumeCapability{mountCap()},
			AccessibilityRequirements: &csipb.TopologyRequirement{Preferred: []*csipb.Topology{{Segments: map[string]string{csi.TopologyKey: "local-a"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetVolume().GetVolumeId()
	}
	publish := func(id, node string) error {
		_, err := ctl.ControllerPublishVolume(t.Context(), &csipb.ControllerPublishVolumeRequest{VolumeId: id, NodeId: node, VolumeCapability: mountCap()})
		return err
	}
	v1, v2 := create("pvc-1"), create("pvc-2")
	if err := publish(v1, "node-a"); err != nil {
		t.Fatal(err)
	}
	if err := publish(v1, "node-b"); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("publishing a volume on node-a to node-b: %v, want FailedPrecondition", err)
	}
	if _, err := ctl.ControllerUnpublishVolume(t.Context(), &csipb.ControllerUnpublishVolumeRequest{VolumeId: v1, NodeId: "node-b"}); err != nil {
		t.Errorf("unpublishing from a node the volume is not on: %v, want OK", err)
	}
	if got, err := ctl.ControllerGetVolume(t.Context(), &csipb.ControllerGetVolumeRequest{VolumeId: v1}); err != nil || len(got.GetStatus().GetPublishedNodeIds()) != 1 || got.GetStatus().GetPublishedNodeIds()[0] != "node-a" {
		t.Errorf("volume after an unpublish from another node: %v, %v; want it still on node-a", got, err)
	}
	if err := publish(v2, "node-a"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("publishing past node-a's attach limit: %v, want ResourceExhausted", err)
	}
}

// TestSizeFitsTheFileSystem: a volume is made at least as large as its file system
// formats (300 MiB for xfs, the default), and as asked otherwise.
func TestSizeFitsTheFileSystem(t *testing.T) {
	ctl, _ := controllerClient(t, server.Config{})
	block := &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	for _, tc := range []struct {
		name     string
		cap      *csipb.VolumeCapability
		required int64
		want     int64
	}{
		{"default-fs", fsCap(""), 1 << 20, 300 << 20},
		{"xfs", fsCap("xfs"), 64 << 20, 300 << 20},
		{"xfs-larger", fsCap("xfs"), 1 << 30, 1 << 30},
		{"ext4", fsCap("ext4"), 1 << 20, 1 << 20},
		{"block", block, 1 << 20, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := ctl.CreateVolume(t.Context(), &csipb.CreateVolumeRequest{Name: "pvc-size-" + tc.name,
				VolumeCapabilities: []*csipb.VolumeCapability{tc.cap}, CapacityRange: &csipb.CapacityRange{RequiredBytes: tc.required}})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.GetVolume().GetCapacityBytes(); got != tc.want {
				t.Errorf("a volume of %d bytes asked for %s is %d bytes; want %d", tc.required, tc.name, got, tc.want)
			}
		})
	}
}

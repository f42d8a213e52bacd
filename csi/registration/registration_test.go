package registration_test

import (
	"context"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/nephele-dev/nephele/csi"
	"github.com/nephele-dev/nephele/csi/registration"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
)

// TestKubeletRegistersTheDriver plays kubelet's plugin watcher against the socket: it
// asks what the plugin is, then says it registered it.
func TestKubeletRegistersTheDriver(t *testing.T) {
	s, err := registration.New(registration.Config{Driver: "csi.nephele.dev", Endpoint: "/var/lib/kubelet/plugins/csi.nephele.dev/csi.sock", Logger: testlog.New(t, 0)})
	if err != nil {
		t.Fatal(err)
	}
	sock := registration.SocketPath(t.TempDir(), "csi.nephele.dev")
	if filepath.Base(sock) != "csi.nephele.dev-reg.sock" {
		t.Errorf("socket %s, want kubelet's <driver>-reg.sock", sock)
	}
	ln, err := csi.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	kubelet := registerapi.NewRegistrationClient(conn)
	info, err := kubelet.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	if info.GetType() != registerapi.CSIPlugin || info.GetName() != "csi.nephele.dev" ||
		info.GetEndpoint() != "/var/lib/kubelet/plugins/csi.nephele.dev/csi.sock" || len(info.GetSupportedVersions()) != 1 || info.GetSupportedVersions()[0] != "1.0.0" {
		t.Errorf("GetInfo = %v, want a CSI plugin csi.nephele.dev at its socket speaking 1.0.0", info)
	}
	if notified, _, _ := s.Status(); notified {
		t.Error("Status says kubelet notified before it did")
	}
	if _, err := kubelet.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: "version 0.3 is not supported"}); err != nil {
		t.Fatal(err)
	}
	if notified, ok, reason := s.Status(); !notified || ok || reason != "version 0.3 is not supported" {
		t.Errorf("after a refusal Status = %v, %v, %q", notified, ok, reason)
	}
	if _, err := kubelet.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Status(); !ok {
		t.Error("after kubelet registered the driver Status says it did not")
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, cfg := range []registration.Config{{Endpoint: "/csi.sock"}, {Driver: "d", Endpoint: "csi.sock"}} {
		if _, err := registration.New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

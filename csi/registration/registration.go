// Package registration registers a CSI node plugin with kubelet, as the
// node-driver-registrar sidecar does: it serves kubelet's plugin registration API on a
// socket in kubelet's plugins_registry directory; kubelet's plugin watcher finds the
// socket, asks it what it is (GetInfo: a CSI plugin, its name, the socket kubelet reaches
// its Node service on, the CSI versions) and says whether it registered it
// (NotifyRegistrationStatus). The protocol is kubelet's pluginregistration/v1.
package registration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// DefaultRegistryDir is kubelet's plugin registration directory, which its plugin
// watcher watches.
const DefaultRegistryDir = "/var/lib/kubelet/plugins_registry"

// SocketPath is the registration socket of a driver in kubelet's registry directory.
func SocketPath(registryDir, driver string) string {
	return filepath.Join(registryDir, driver+"-reg.sock")
}

// Config says what to register.
type Config struct {
	// Driver is the CSI driver's name.
	Driver string
	// Endpoint is the path of the driver's CSI socket as kubelet sees it.
	Endpoint string
	// Versions are the CSI versions the driver speaks; empty is ["1.0.0"].
	Versions []string
	// Logger receives what kubelet says.
	Logger logr.Logger
}

// Server is the registration service of one driver.
type Server struct {
	registerapi.UnimplementedRegistrationServer
	cfg Config

	mu         sync.Mutex
	registered bool
	err        string
	notified   bool
}

// New checks cfg and returns the server.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Driver == "":
		return nil, errors.New("registration: the driver's name is required")
	case !filepath.IsAbs(cfg.Endpoint):
		return nil, fmt.Errorf("registration: endpoint %q: want the absolute path of the driver's socket", cfg.Endpoint)
	}
	if len(cfg.Versions) == 0 {
		cfg.Versions = []string{"1.0.0"}
	}
	return &Server{cfg: cfg}, nil
}

// GetInfo implements the registration API: a CSI plugin, its name, its socket and
// versions.
func (s *Server) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              s.cfg.Driver,
		Endpoint:          s.cfg.Endpoint,
		SupportedVersions: s.cfg.Versions,
	}, nil
}

// NotifyRegistrationStatus implements the registration API: kubelet says whether it
// registered the plugin; a refusal is logged with kubelet's reason.
func (s *Server) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	s.mu.Lock()
	s.notified, s.registered, s.err = true, st.GetPluginRegistered(), st.GetError()
	s.mu.Unlock()
	if st.GetPluginRegistered() {
		s.cfg.Logger.Info("kubelet registered the CSI driver", "driver", s.cfg.Driver, "endpoint", s.cfg.Endpoint)
	} else {
		s.cfg.Logger.Error(errors.New(st.GetError()), "kubelet refused to register the CSI driver", "driver", s.cfg.Driver)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Status returns what kubelet last said: whether it has said anything, whether it
// registered the driver, and why not.
func (s *Server) Status() (notified, registered bool, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notified, s.registered, s.err
}

// Serve serves the registration API on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	g := grpc.NewServer()
	registerapi.RegisterRegistrationServer(g, s)
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving kubelet's plugin registration: %w", err)
	case <-ctx.Done():
		g.GracefulStop()
		<-errc
		return nil
	}
}

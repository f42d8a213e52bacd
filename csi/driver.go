package csi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"
)

// DefaultName is the driver's name unless configured otherwise: the CSIDriver object's
// name and the StorageClass's provisioner.
const DefaultName = "csi.nephele.dev"

// TopologyKey is the topology segment a volume and a node are placed by: the zone
// label the CCM sets on every Node.
const TopologyKey = corev1.LabelTopologyZone

// Config configures a Driver. At least one of Volumes (the Controller service) and
// Node (the Node service) is set.
type Config struct {
	// Name is the driver's name (DefaultName when empty): a domain name, at most 63
	// characters.
	Name string
	// Version is reported by GetPluginInfo.
	Version string
	// Volumes is the provider's volume capability; set, the driver serves the
	// Controller service.
	Volumes cloud.Volumes
	// Node, set, makes the driver serve the Node service on this node.
	Node *NodeConfig
	// Logger receives the driver's logs.
	Logger logr.Logger
}

// driverName is what the CSI spec allows as a plugin name.
var driverName = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9.]{0,61}[a-zA-Z0-9])?$`)

// Driver is a CSI plugin. Register adds its services to a gRPC server; Serve runs one.
type Driver struct {
	cfg   Config
	log   logr.Logger
	ident identity
	ctrl  *controller
	node  *node
}

// New checks cfg and returns the driver.
func New(cfg Config) (*Driver, error) {
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if !driverName.MatchString(cfg.Name) {
		return nil, fmt.Errorf("driver name %q: want a domain name of at most 63 characters", cfg.Name)
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Volumes == nil && cfg.Node == nil {
		return nil, errors.New("a CSI driver serves the controller (a provider's volumes), the node, or both: give one")
	}
	d := &Driver{cfg: cfg, log: cfg.Logger}
	d.ident = identity{d: d}
	if cfg.Volumes != nil {
		d.ctrl = &controller{vols: cfg.Volumes, limits: cfg.Volumes.Limits(), log: cfg.Logger.WithName("controller")}
	}
	if cfg.Node != nil {
		n, err := newNode(*cfg.Node, cfg.Logger.WithName("node"))
		if err != nil {
			return nil, err
		}
		d.node = n
	}
	return d, nil
}

// Name returns the driver's name.
func (d *Driver) Name() string { return d.cfg.Name }

// Register adds the driver's services to s: Identity always, Controller and Node as
// configured.
func (d *Driver) Register(s grpc.ServiceRegistrar) {
	csipb.RegisterIdentityServer(s, d.ident)
	if d.ctrl != nil {
		csipb.RegisterControllerServer(s, d.ctrl)
	}
	if d.node != nil {
		csipb.RegisterNodeServer(s, d.node)
	}
}

// Listen opens the Unix socket a driver serves on, replacing a socket file an earlier
// run left; its directory is created (0750) if missing.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("creating the socket's directory: %w", err)
	}
	if info, err := os.Lstat(path); err == nil {
		if info.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket: remove it or choose another path", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing the socket an earlier run left: %w", err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	return ln, nil
}

// Serve serves the driver's services on ln until ctx ends, then stops gracefully.
func (d *Driver) Serve(ctx context.Context, ln net.Listener) error {
	s := grpc.NewServer(grpc.ChainUnaryInterceptor(d.logCalls))
	d.Register(s)
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	d.log.Info("CSI driver serving", "name", d.cfg.Name, "address", ln.Addr().String(), "controller", d.ctrl != nil, "node", d.node != nil)
	select {
	case err := <-errc:
		return fmt.Errorf("serving CSI: %w", err)
	case <-ctx.Done():
		s.GracefulStop()
		<-errc
		return nil
	}
}

// logCalls logs every call, and its failure, at verbosity 2 and 0.
func (d *Driver) logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil {
		d.log.Error(err, "CSI call failed", "method", info.FullMethod)
	} else {
		d.log.V(2).Info("CSI call", "method", info.FullMethod)
	}
	return resp, err
}

// identity is the Identity service.
type identity struct {
	csipb.UnimplementedIdentityServer
	d *Driver
}

func (i identity) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return &csipb.GetPluginInfoResponse{Name: i.d.cfg.Name, VendorVersion: i.d.cfg.Version}, nil
}

func (i identity) GetPluginCapabilities(context.Context, *csipb.GetPluginCapabilitiesRequest) (*csipb.GetPluginCapabilitiesResponse, error) {
	svc := func(t csipb.PluginCapability_Service_Type) *csipb.PluginCapability {
		return &csipb.PluginCapability{Type: &csipb.PluginCapability_Service_{Service: &csipb.PluginCapability_Service{Type: t}}}
	}
	caps := []*csipb.PluginCapability{svc(csipb.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)}
	if i.d.ctrl != nil {
		caps = append(caps, svc(csipb.PluginCapability_Service_CONTROLLER_SERVICE),
			&csipb.PluginCapability{Type: &csipb.PluginCapability_VolumeExpansion_{VolumeExpansion: &csipb.PluginCapability_VolumeExpansion{
				Type: csipb.PluginCapability_VolumeExpansion_ONLINE}}})
	}
	return &csipb.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

func (i identity) Probe(context.Context, *csipb.ProbeRequest) (*csipb.ProbeResponse, error) {
	return &csipb.ProbeResponse{}, nil
}

// Command csi-driver is nephele's CSI driver with the local cloud's provider built in
// (package csi): in controller mode it serves the Controller service over the
// provider's volumes beside the CSI sidecars; in node mode the Node service on one node,
// registered with kubelet through its plugin registration socket.
//
//	csi-driver --mode controller --endpoint /csi/csi.sock --cloud-config /etc/nephele/cloud.yaml
//	csi-driver --mode node --endpoint /csi/csi.sock --node-name "$NODE_NAME"
//
// See docs/volumes.md.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/csi"
	"github.com/nephele-dev/nephele/csi/registration"
	"github.com/nephele-dev/nephele/internal/smallfile"
	"github.com/nephele-dev/nephele/internal/waitfor"
	"github.com/nephele-dev/nephele/manager"
	"github.com/nephele-dev/nephele/providers/local"
)

// Modes.
const (
	modeController = "controller"
	modeNode       = "node"
)

// maxCloudConfigSize bounds what is read of --cloud-config.
const maxCloudConfigSize = 1 << 20

// zoneWait bounds the wait for the Node's zone label: the CCM sets it when it
// initializes the Node, which may come after the node plugin starts.
const zoneWait = 10 * time.Minute

type options struct {
	mode, endpoint, driverName string
	cloudProvider, cloudConfig string
	nodeName, zone, kubeconfig string
	maxVolumes                 int64
	registryDir                string
	kubeletEndpoint            string
	verbosity                  int
	loggingFormat              string
}

func (o *options) flags(fs *pflag.FlagSet) {
	fs.StringVar(&o.mode, "mode", "", "controller (the Controller service, beside the CSI sidecars) or node (the Node service, on every node); required")
	fs.StringVar(&o.endpoint, "endpoint", "/csi/csi.sock", "the Unix socket the driver serves CSI on")
	fs.StringVar(&o.driverName, "driver-name", csi.DefaultName, "the driver's name: the CSIDriver object's and the StorageClass's provisioner")
	fs.StringVar(&o.cloudProvider, "cloud-provider", local.ProviderName, "controller mode: the provider whose volumes the driver serves")
	fs.StringVar(&o.cloudConfig, "cloud-config", "", "controller mode: the provider's cloud config (for the local provider, a token that may manage volumes); required")
	fs.StringVar(&o.nodeName, "node-name", "", "node mode: this node's Node name, the CSI node ID (from the downward API's spec.nodeName); required")
	fs.StringVar(&o.zone, "zone", "", "node mode: this node's zone; empty reads its Node's topology.kubernetes.io/zone label (waiting for the CCM to set it)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "node mode: kubeconfig to read the Node with; empty is the pod's service account")
	fs.Int64Var(&o.maxVolumes, "max-volumes-per-node", 16, "node mode: how many volumes the node takes (the cloud's attach limit), for the scheduler; 0 reports none")
	fs.StringVar(&o.registryDir, "kubelet-registration-dir", registration.DefaultRegistryDir, "node mode: kubelet's plugin registration directory, where the driver's registration socket goes; empty does not register")
	fs.StringVar(&o.kubeletEndpoint, "kubelet-endpoint", "", "node mode: the driver's socket as kubelet reaches it (default /var/lib/kubelet/plugins/<driver-name>/csi.sock)")
	fs.IntVarP(&o.verbosity, "v", "v", 0, "log verbosity")
	fs.StringVar(&o.loggingFormat, "logging-format", "text", "log format: text or json")
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends or serving fails.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	var o options
	fs := pflag.NewFlagSet("csi-driver", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	o.flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	log, err := manager.NewLogger(stderr, o.loggingFormat, o.verbosity)
	if err != nil {
		return err
	}
	if !filepath.IsAbs(o.endpoint) {
		return fmt.Errorf("--endpoint %q: want the absolute path of a Unix socket", o.endpoint)
	}
	cfg := csi.Config{Name: o.driverName, Logger: log}
	switch o.mode {
	case modeController:
		if err := only(fs, "node mode", "node-name", "zone", "kubeconfig", "max-volumes-per-node", "kubelet-registration-dir", "kubelet-endpoint"); err != nil {
			return err
		}
		if cfg.Volumes, err = o.volumes(); err != nil {
			return err
		}
	case modeNode:
		if err := only(fs, "controller mode", "cloud-provider", "cloud-config"); err != nil {
			return err
		}
		if cfg.Node, err = o.node(ctx, log); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--mode %q: want %s or %s", o.mode, modeController, modeNode)
	}
	d, err := csi.New(cfg)
	if err != nil {
		return err
	}
	// Everything that can fail is set up before anything serves: nothing is left
	// running behind an error.
	var reg *registration.Server
	if o.mode == modeNode && o.registryDir != "" {
		endpoint := o.kubeletEndpoint
		if endpoint == "" {
			endpoint = filepath.Join("/var/lib/kubelet/plugins", o.driverName, "csi.sock")
		}
		if reg, err = registration.New(registration.Config{Driver: d.Name(), Endpoint: endpoint, Logger: log.WithName("registration")}); err != nil {
			return err
		}
	}
	ln, err := csi.Listen(o.endpoint)
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	if reg != nil {
		// Registered only once the driver's own socket listens: kubelet calls it next.
		rln, err := csi.Listen(registration.SocketPath(o.registryDir, d.Name()))
		if err != nil {
			_ = ln.Close()
			return err
		}
		g.Go(func() error { return reg.Serve(ctx, rln) })
	}
	g.Go(func() error { return d.Serve(ctx, ln) })
	return g.Wait()
}

// only refuses flags of the other mode.
func only(fs *pflag.FlagSet, other string, names ...string) error {
	for _, n := range names {
		if fs.Changed(n) {
			return fmt.Errorf("--%s is a flag of %s", n, other)
		}
	}
	return nil
}

// volumes builds the provider and returns its volume capability.
func (o *options) volumes() (cloud.Volumes, error) {
	if o.cloudConfig == "" {
		return nil, errors.New("--cloud-config is required in controller mode")
	}
	raw, err := smallfile.Read(o.cloudConfig, maxCloudConfigSize)
	if err != nil {
		return nil, fmt.Errorf("--cloud-config: %w", err)
	}
	registry := cloud.NewRegistry()
	if err := local.Register(registry); err != nil {
		return nil, err
	}
	p, err := registry.New(o.cloudProvider, bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("--cloud-provider %s: %w", o.cloudProvider, err)
	}
	vp, ok := p.(cloud.VolumeProvider)
	if !ok {
		return nil, fmt.Errorf("--cloud-provider %s has no volumes", o.cloudProvider)
	}
	vols, ok := vp.Volumes()
	if !ok {
		return nil, fmt.Errorf("--cloud-provider %s has no volumes", o.cloudProvider)
	}
	return vols, nil
}

// node returns the node service's configuration, reading the zone from the Node when
// --zone does not give it.
func (o *options) node(ctx context.Context, log logr.Logger) (*csi.NodeConfig, error) {
	if o.nodeName == "" {
		return nil, errors.New("--node-name is required in node mode (the downward API's spec.nodeName)")
	}
	if o.maxVolumes < 0 {
		return nil, fmt.Errorf("--max-volumes-per-node %d: must not be negative", o.maxVolumes)
	}
	cfg := &csi.NodeConfig{NodeID: o.nodeName, Zone: o.zone, MaxVolumes: o.maxVolumes}
	if cfg.Zone != "" {
		return cfg, nil
	}
	var rc *rest.Config
	var err error
	if o.kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("a client to read Node %s's zone (or give --zone): %w", o.nodeName, err)
	}
	rc.UserAgent = "nephele-csi-driver"
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	err = waitfor.Condition(ctx, zoneWait, func(ctx context.Context) error {
		n, err := kc.CoreV1().Nodes().Get(ctx, o.nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cfg.Zone = n.Labels[csi.TopologyKey]; cfg.Zone == "" {
			return fmt.Errorf("the Node %s has no %s label yet (the CCM sets it when it initializes the Node)", o.nodeName, csi.TopologyKey)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading Node %s's zone: %w", o.nodeName, err)
	}
	log.Info("node's zone", "node", o.nodeName, "zone", cfg.Zone)
	return cfg, nil
}

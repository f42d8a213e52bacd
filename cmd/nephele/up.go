package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/localcloud/hosts"
	"github.com/nephele-dev/nephele/localcloud/server"
	"github.com/nephele-dev/nephele/localcluster"
)

// upOptions are the flags of `nephele up`.
type upOptions struct {
	dir          string
	binDir       string
	nodes        int
	smoke        bool
	fresh        bool
	build        bool
	kwok         bool
	vipPool      string
	instanceCIDR string
	clusterCIDR  string
	serviceCIDR  string
	bridge       string
	ccm          string
	timeout      time.Duration
}

// maxKwokNodes bounds --nodes with --kwok: every node is a Node object, a cloud instance
// and a set of node agent listeners on this machine. Real nodes are bounded by
// localcluster.MaxNodes.
const maxKwokNodes = 100

// Defaults of the flags whose default depends on the mode.
var (
	// kwokInstanceCIDR is --instance-cidr with --kwok: loopback addresses, which need
	// no root.
	kwokInstanceCIDR = server.DefaultInstanceCIDR.String()
	// realInstanceCIDR is --instance-cidr for real nodes: a range on the cloud's bridge.
	realInstanceCIDR = hosts.DefaultRange.String()
)

func newUpCommand() *cobra.Command {
	o := upOptions{
		dir:         filepath.Join(".nephele", "up"),
		nodes:       3,
		build:       true,
		vipPool:     server.DefaultVIPPool.String(),
		clusterCIDR: localcluster.DefaultClusterCIDR.String(),
		timeout:     3 * time.Minute,
	}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a cluster with the local cloud and a cloud-controller-manager on this machine",
		Long: `up builds a real Kubernetes cluster on this machine, on the local cloud's host
instances: a control plane (etcd, kube-apiserver, kube-controller-manager with
--cloud-provider=external, kube-scheduler), the local cloud with --nodes hosts (network
and mount namespaces on a bridge), each booting containerd, kubelet
(--cloud-provider=external) and kube-proxy, and nephele's cloud-controller-manager with
the local provider initializing the nodes and creating load balancers and routes in the
cloud. Pods on different nodes reach each other only through those routes. It needs
Linux, root and a few Debian packages (make node-deps); where they are missing it stops
before changing anything and says what to do.

With --kwok it runs the simulated cluster instead, which needs no root: kwok stands in
for the kubelets and a node agent for kube-proxy and the workload, on loopback addresses.

It runs until Ctrl-C (SIGINT or SIGTERM) and then stops everything in order and leaves
the machine as it found it. With --smoke it runs a scripted check instead, stops, and
exits 0 only if every check passed.

Every run starts a fresh control plane in DIR/run (its logs stay there afterwards).
Real nodes start on a fresh cloud every run; whatever a killed run left on the machine
is removed first. With --kwok the local cloud's state (DIR/cloud) is kept across runs.
--fresh wipes DIR first.

Binaries come from --bin-dir (bin/ of the source tree): make tools builds the Kubernetes
components, and up builds cmd/localcloud, cmd/cloud-controller-manager, cmd/nephele and
the node images there unless --build=false. See docs/up.md.`,
		Example: `  sudo make up
  make up UP_FLAGS=--kwok
  go run ./cmd/nephele up --nodes 2 --smoke`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.complete(); err != nil {
				return err
			}
			return runUp(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.dir, "dir", o.dir, "directory for the cluster's state, kubeconfig and logs")
	fs.StringVar(&o.binDir, "bin-dir", "", "directory holding the binaries (default: bin/ of the nephele source tree, or $"+controlplane.BinDirEnv+")")
	fs.IntVar(&o.nodes, "nodes", o.nodes, fmt.Sprintf("number of nodes (1-%d; with --kwok 1-%d)", localcluster.MaxNodes, maxKwokNodes))
	fs.BoolVar(&o.smoke, "smoke", false, "run the smoke checks, stop, and exit 0 only if all passed")
	fs.BoolVar(&o.fresh, "fresh", false, "delete everything in --dir first, the local cloud's state included")
	fs.BoolVar(&o.build, "build", o.build, "go build cmd/localcloud, cmd/cloud-controller-manager, cmd/nephele and the node images into --bin-dir first (needs the source tree)")
	fs.BoolVar(&o.kwok, "kwok", false, "simulated nodes (kwok and node agents on loopback addresses) instead of real ones: no root needed")
	fs.StringVar(&o.vipPool, "vip-pool", o.vipPool, "range the local cloud allocates load balancer VIPs from")
	fs.StringVar(&o.instanceCIDR, "instance-cidr", "", fmt.Sprintf("range the local cloud assigns node addresses from (default %s, with --kwok %s)", realInstanceCIDR, kwokInstanceCIDR))
	fs.StringVar(&o.clusterCIDR, "cluster-cidr", o.clusterCIDR, "the pod range: each node gets a /24 of it, routed by the cloud-controller-manager")
	fs.StringVar(&o.serviceCIDR, "service-cidr", "", "the Service range (real nodes only; default "+controlplane.DefaultServiceCIDR.String()+")")
	fs.StringVar(&o.bridge, "bridge", "", "the local cloud's bridge for the hosts (real nodes only; default "+hosts.DefaultBridge+")")
	fs.StringVar(&o.ccm, "ccm", string(localcluster.CCMProcess), "where the cloud-controller-manager runs (real nodes only): "+string(localcluster.CCMProcess)+
		", a process on this machine; "+string(localcluster.CCMInCluster)+", a Deployment installed with kubectl from the manifests of nephele manifests, its image pulled from the cluster's registry; or "+
		string(localcluster.CCMOperator)+", nephele-operator installed from its manifests, managing the CCM of a CloudControllerManager")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "bound on starting, and on each smoke check")
	return cmd
}

// complete checks the options and fills in defaults that need the environment.
func (o *upOptions) complete() error {
	var errs []error
	maxNodes := localcluster.MaxNodes
	if o.kwok {
		maxNodes = maxKwokNodes
	}
	if o.nodes < 1 || o.nodes > maxNodes {
		errs = append(errs, fmt.Errorf("--nodes %d: want 1 to %d", o.nodes, maxNodes))
	}
	if o.dir == "" {
		errs = append(errs, errors.New("--dir must not be empty"))
	}
	if o.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %s: must be positive", o.timeout))
	}
	if o.ccm == "" {
		o.ccm = string(localcluster.CCMProcess)
	}
	if o.instanceCIDR == "" {
		o.instanceCIDR = realInstanceCIDR
		if o.kwok {
			o.instanceCIDR = kwokInstanceCIDR
		}
	}
	loopback := netip.MustParsePrefix("127.0.0.0/8")
	prefix := func(name, v string) netip.Prefix {
		p, err := netip.ParsePrefix(v)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s %q: %w", name, v, err))
		case !p.Addr().Is4():
			errs = append(errs, fmt.Errorf("%s %q: want an IPv4 range", name, v))
		default:
			return p
		}
		return netip.Prefix{}
	}
	vips, inst := prefix("--vip-pool", o.vipPool), prefix("--instance-cidr", o.instanceCIDR)
	if vips.IsValid() && (!loopback.Contains(vips.Addr()) || vips.Bits() < 8) {
		errs = append(errs, fmt.Errorf("--vip-pool %q: want an IPv4 range inside 127.0.0.0/8, which needs no root", o.vipPool))
	}
	prefix("--cluster-cidr", o.clusterCIDR)
	if o.kwok {
		if inst.IsValid() && (!loopback.Contains(inst.Addr()) || inst.Bits() < 8) {
			errs = append(errs, fmt.Errorf("--instance-cidr %q: want an IPv4 range inside 127.0.0.0/8, which needs no root", o.instanceCIDR))
		} else if inst.IsValid() && inst.Bits() < 32 && 1<<(32-inst.Bits())-2 < o.nodes {
			errs = append(errs, fmt.Errorf("--instance-cidr %s has fewer addresses than --nodes %d", o.instanceCIDR, o.nodes))
		}
		if o.bridge != "" || o.serviceCIDR != "" {
			errs = append(errs, errors.New("--bridge and --service-cidr are for real nodes: --kwok has no bridge, and the control plane's own Service range"))
		}
		if o.ccm != string(localcluster.CCMProcess) {
			errs = append(errs, fmt.Errorf("--ccm %s is for real nodes: with --kwok the CCM runs as a process", o.ccm))
		}
	} else {
		if o.bridge == "" {
			o.bridge = hosts.DefaultBridge
		}
		if o.serviceCIDR == "" {
			o.serviceCIDR = controlplane.DefaultServiceCIDR.String()
		}
		prefix("--service-cidr", o.serviceCIDR)
		if inst.IsValid() {
			if err := hosts.ValidateRange(inst); err != nil {
				errs = append(errs, fmt.Errorf("--instance-cidr: %w", err))
			}
		}
		if err := hosts.ValidateBridgeName(o.bridge); err != nil {
			errs = append(errs, fmt.Errorf("--bridge: %w", err))
		}
		if !slices.Contains(localcluster.CCMModes, localcluster.CCMMode(o.ccm)) {
			errs = append(errs, fmt.Errorf("--ccm %q: want %s, %s or %s", o.ccm, localcluster.CCMProcess, localcluster.CCMInCluster, localcluster.CCMOperator))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	abs, err := filepath.Abs(o.dir)
	if err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	o.dir = abs
	if o.binDir == "" {
		if o.binDir, err = controlplane.BinDir(); err != nil {
			return fmt.Errorf("%w (or give --bin-dir)", err)
		}
	}
	if o.binDir, err = filepath.Abs(o.binDir); err != nil {
		return fmt.Errorf("--bin-dir: %w", err)
	}
	return nil
}

// runUp runs the real cluster, or with --kwok the simulated one.
func runUp(ctx context.Context, o upOptions, out io.Writer) error {
	if !o.kwok {
		return runReal(ctx, o, out)
	}
	return runKwok(ctx, o, out)
}

// runKwok starts the simulated cluster, then runs the smoke checks or waits for a
// signal, and stops everything.
func runKwok(ctx context.Context, o upOptions, out io.Writer) error {
	c, err := startCluster(ctx, o, out)
	if err != nil {
		return err
	}
	var runErr error
	if o.smoke {
		runErr = runSmoke(ctx, c, out)
	} else {
		c.printUsage(out)
		runErr = c.wait(ctx)
	}
	return errors.Join(runErr, c.stop(out))
}

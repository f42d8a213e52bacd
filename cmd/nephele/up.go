package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/localcloud/server"
)

// upOptions are the flags of `nephele up`.
type upOptions struct {
	dir          string
	binDir       string
	nodes        int
	smoke        bool
	fresh        bool
	build        bool
	vipPool      string
	instanceCIDR string
	timeout      time.Duration
}

// maxNodes bounds --nodes: every node is a Node object, a cloud instance and a set of
// node agent listeners on this machine.
const maxNodes = 100

func newUpCommand() *cobra.Command {
	o := upOptions{
		dir:          filepath.Join(".nephele", "up"),
		nodes:        3,
		build:        true,
		vipPool:      server.DefaultVIPPool.String(),
		instanceCIDR: server.DefaultInstanceCIDR.String(),
		timeout:      3 * time.Minute,
	}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a cluster with the local cloud and a cloud-controller-manager on this machine",
		Long: `up starts a real control plane (etcd, kube-apiserver, kube-controller-manager with
--cloud-provider=external, kube-scheduler), kwok simulating the kubelets, the local cloud,
and the cloud-controller-manager with the local provider. It registers --nodes nodes the
way kubelets with --cloud-provider=external do, creates their instances in the local
cloud, and runs a node agent on each node address that stands in for kube-proxy and the
workload, so a Service of type LoadBalancer really answers through the cloud's VIP.

It runs until Ctrl-C (SIGINT or SIGTERM) and then stops everything: the
cloud-controller-manager first, then the local cloud, then the control plane. With
--smoke it runs a scripted check instead, stops, and exits 0 only if every check passed.

Every run starts a fresh control plane in DIR/run (its logs stay there afterwards). The
local cloud's state (DIR/cloud) is kept across runs, so the nodes' instances keep their
IDs and addresses; load balancers and routes left by a previous run are deleted, since
their Services went with the old control plane. --fresh wipes DIR first.

Binaries come from --bin-dir (bin/ of the source tree): make tools builds the control
plane, and up builds cmd/localcloud and cmd/cloud-controller-manager there unless
--build=false. See docs/up.md.`,
		Example: `  make up
  go run ./cmd/nephele up --nodes 5
  go run ./cmd/nephele up --smoke`,
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
	fs.IntVar(&o.nodes, "nodes", o.nodes, fmt.Sprintf("number of nodes to register (1-%d)", maxNodes))
	fs.BoolVar(&o.smoke, "smoke", false, "run the smoke checks, stop, and exit 0 only if all passed")
	fs.BoolVar(&o.fresh, "fresh", false, "delete everything in --dir first, the local cloud's state included")
	fs.BoolVar(&o.build, "build", o.build, "go build cmd/localcloud and cmd/cloud-controller-manager into --bin-dir first (needs the source tree)")
	fs.StringVar(&o.vipPool, "vip-pool", o.vipPool, "range the local cloud allocates load balancer VIPs from")
	fs.StringVar(&o.instanceCIDR, "instance-cidr", o.instanceCIDR, "range the local cloud assigns node addresses from")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "bound on starting, and on each smoke check")
	return cmd
}

// complete checks the options and fills in defaults that need the environment.
func (o *upOptions) complete() error {
	var errs []error
	if o.nodes < 1 || o.nodes > maxNodes {
		errs = append(errs, fmt.Errorf("--nodes %d: want 1 to %d", o.nodes, maxNodes))
	}
	if o.dir == "" {
		errs = append(errs, errors.New("--dir must not be empty"))
	}
	if o.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %s: must be positive", o.timeout))
	}
	for name, v := range map[string]string{"--vip-pool": o.vipPool, "--instance-cidr": o.instanceCIDR} {
		p, err := netip.ParsePrefix(v)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s %q: %w", name, v, err))
		case !p.Addr().Is4() || !netip.MustParsePrefix("127.0.0.0/8").Contains(p.Addr()) || p.Bits() < 8:
			errs = append(errs, fmt.Errorf("%s %q: want an IPv4 range inside 127.0.0.0/8, which needs no root", name, v))
		}
	}
	if o.nodes > 0 && len(errs) == 0 {
		if p := netip.MustParsePrefix(o.instanceCIDR); p.Bits() < 32 && 1<<(32-p.Bits())-2 < o.nodes {
			errs = append(errs, fmt.Errorf("--instance-cidr %s has fewer addresses than --nodes %d", o.instanceCIDR, o.nodes))
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

// runUp starts the cluster, then runs the smoke checks or waits for a signal, and stops
// everything.
func runUp(ctx context.Context, o upOptions, out io.Writer) error {
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

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/securedir"
	"github.com/nephele-dev/nephele/localcloud/hosts"
	"github.com/nephele-dev/nephele/localcloud/server"
	"github.com/nephele-dev/nephele/localcluster"
	"github.com/nephele-dev/nephele/localcluster/smoke"
	"github.com/nephele-dev/nephele/localcluster/upstreame2e"
)

// Default state directories. Real nodes' is root's own: up acts as root on what it finds
// there (a killed run's journal), so a directory another user could write is refused
// (securedir), and a checkout's .nephele/up is often the user's who ran sudo.
const (
	realDir = "/var/lib/nephele/up"
	kwokDir = ".nephele/up"
)

// upOptions are the flags of `nephele up`.
type upOptions struct {
	dir    string
	binDir string
	nodes  int
	smoke  bool
	fresh  bool
	build  bool
	kwok   bool
	// volumes deploys the CSI driver; volumesSet says the flag was given, so that a
	// cluster it cannot serve (kwok, hybrid) is refused rather than quietly run without.
	volumes, volumesSet bool
	vipPool             string
	instanceCIDR        string
	clusterCIDR         string
	serviceCIDR         string
	bridge              string
	ccm                 string
	hybridNodes         int
	unownedNode         bool
	// hybridBridge, hybridInstanceCIDR and hybridVIPPool are the second cloud's.
	hybridBridge       string
	hybridInstanceCIDR string
	hybridVIPPool      string
	timeout            time.Duration
	e2e                e2eOptions
}

// e2eOptions are the flags of `nephele up --e2e`.
type e2eOptions struct {
	run         bool
	focus, skip string
	parallel    int
	timeout     time.Duration
	reportDir   string
	// network and cloudProvider say whether those suites run; the storage suite runs
	// on a cluster with volumes.
	network, cloudProvider bool
}

func newUpCommand() *cobra.Command {
	o := upOptions{
		nodes:       localcluster.DefaultNodes,
		build:       true,
		volumes:     true,
		clusterCIDR: localcluster.DefaultClusterCIDR.String(),
		timeout:     3 * time.Minute,
		e2e: e2eOptions{parallel: upstreame2e.DefaultParallel, timeout: upstreame2e.DefaultTimeout,
			network: true, cloudProvider: true},
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
Both run the cloud-controller-manager the same way, with leader election.

It runs until Ctrl-C (SIGINT or SIGTERM) and then stops everything in order and leaves
the machine as it found it. With --smoke it runs a scripted check instead, stops, and
exits 0 only if every check passed.

Every run starts afresh in DIR: a new control plane and a new local cloud; whatever a
killed run left on the machine is removed first. The logs of the last run stay in DIR.

Binaries come from --bin-dir (bin/ of the source tree): make tools builds the Kubernetes
components, and up builds cmd/localcloud, cmd/cloud-controller-manager, cmd/nephele and
the node images there unless --build=false. See docs/up.md.

With --e2e it runs upstream Kubernetes' end-to-end suite against the cluster instead, as
cloud-provider-kind's CI does against kind (make e2e-bins builds it): every
[Feature:LoadBalancer] test and the [sig-network] [Conformance] tests on --e2e-parallel
ginkgo nodes, then the [Feature:CloudProvider] node test; JUnit and summary.md go to
--e2e-report-dir. It stops the cluster and exits 0 only if no test failed. See
docs/conformance.md.`,
		Example: `  sudo make up
  make up UP_FLAGS=--kwok
  go run ./cmd/nephele up --nodes 2 --smoke`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.volumesSet = cmd.Flags().Changed("volumes")
			cfg, err := o.config()
			if err != nil {
				return err
			}
			return runUp(cmd.Context(), o, cfg, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.dir, "dir", "", "directory for the cluster's state, kubeconfig and logs (default "+realDir+", with --kwok "+kwokDir+"); only root (or you, with --kwok) may be able to write it and every directory above it")
	fs.StringVar(&o.binDir, "bin-dir", "", "directory holding the binaries (default: bin/ of the nephele source tree, or $"+controlplane.BinDirEnv+")")
	fs.IntVar(&o.nodes, "nodes", o.nodes, fmt.Sprintf("number of nodes (1-%d; with --kwok 1-%d)", localcluster.MaxNodes, localcluster.MaxKwokNodes))
	fs.BoolVar(&o.smoke, "smoke", false, "run the smoke checks, stop, and exit 0 only if all passed")
	fs.BoolVar(&o.fresh, "fresh", false, "start afresh")
	_ = fs.MarkDeprecated("fresh", "every run starts afresh now")
	fs.BoolVar(&o.build, "build", o.build, "go build cmd/localcloud, cmd/cloud-controller-manager, cmd/nephele and the node images into --bin-dir first (needs the source tree)")
	fs.BoolVar(&o.volumes, "volumes", o.volumes, "deploy nephele's CSI driver and a default StorageClass (WaitForFirstConsumer, expansion allowed), so that PersistentVolumeClaims get local cloud volumes; real nodes of one cloud (on by default there, off with --kwok or --hybrid-nodes)")
	fs.BoolVar(&o.kwok, "kwok", false, "simulated nodes (kwok and node agents on loopback addresses) instead of real ones: no root needed")
	fs.StringVar(&o.vipPool, "vip-pool", "", fmt.Sprintf("range the local cloud allocates load balancer VIPs from (default %s, routed to the nodes by the kernel, ipMode VIP; with --kwok %s, user-space proxies on loopback, ipMode Proxy)", hosts.DefaultVIPPool, server.DefaultVIPPool))
	fs.StringVar(&o.instanceCIDR, "instance-cidr", "", fmt.Sprintf("range the local cloud assigns node addresses from (default %s, with --kwok %s)", hosts.DefaultRange, server.DefaultInstanceCIDR))
	fs.StringVar(&o.clusterCIDR, "cluster-cidr", o.clusterCIDR, "the pod range: each node gets a /24 of it, routed by the cloud-controller-manager")
	fs.StringVar(&o.serviceCIDR, "service-cidr", controlplane.DefaultServiceCIDR.String(), "the Service range")
	fs.StringVar(&o.bridge, "bridge", "", "the local cloud's bridge for the hosts (real nodes only; default "+hosts.DefaultBridge+")")
	fs.StringVar(&o.ccm, "ccm", string(localcluster.CCMProcess), "where the cloud-controller-manager runs (real nodes only): "+string(localcluster.CCMProcess)+
		", a process on this machine; "+string(localcluster.CCMInCluster)+", a Deployment installed with kubectl from the manifests of nephele manifests, its image pulled from the cluster's registry; or "+
		string(localcluster.CCMOperator)+", nephele-operator installed from its manifests, managing the CCM of a CloudControllerManager")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "bound on starting, and on each smoke check")
	fs.IntVar(&o.hybridNodes, "hybrid-nodes", 0, "make the cluster hybrid: this many nodes in a second local cloud (bridge "+localcluster.DefaultHybridBridge+", "+
		localcluster.DefaultHybridRange.String()+", VIPs "+localcluster.DefaultHybridVIPPool.String()+"), one CCM serving both clouds, each with its load balancer class ("+
		localcluster.FirstCloudClass+", the default, and "+localcluster.SecondCloudClass+"); real nodes and --ccm "+string(localcluster.CCMProcess)+" only; docs/hybrid.md")
	fs.StringVar(&o.hybridBridge, "hybrid-bridge", "", "with --hybrid-nodes: the second cloud's bridge (default "+localcluster.DefaultHybridBridge+")")
	fs.StringVar(&o.hybridInstanceCIDR, "hybrid-instance-cidr", "", "with --hybrid-nodes: the second cloud's node range (default "+localcluster.DefaultHybridRange.String()+")")
	fs.StringVar(&o.hybridVIPPool, "hybrid-vip-pool", "", "with --hybrid-nodes: the second cloud's VIP range (default "+localcluster.DefaultHybridVIPPool.String()+")")
	fs.BoolVar(&o.unownedNode, "unowned-node", false, "with --hybrid-nodes: add a node that declares platform "+localcluster.UnownedPlatform+", which no cloud owns and nothing may touch")
	fs.BoolVar(&o.e2e.run, "e2e", false, "run upstream's e2e suite against the cluster (make e2e-bins), stop, and exit 0 only if no test failed")
	fs.StringVar(&o.e2e.focus, "e2e-focus", "", "ginkgo --focus of the first suite that runs (the main one, or with --e2e-network=false the storage suite) instead of its own")
	fs.StringVar(&o.e2e.skip, "e2e-skip", "", "ginkgo --skip of the first suite that runs instead of its own (the main suite's: cloud-provider-kind's skip list less its two load balancer skips)")
	fs.IntVar(&o.e2e.parallel, "e2e-parallel", o.e2e.parallel, "ginkgo nodes of the main suite")
	fs.DurationVar(&o.e2e.timeout, "e2e-timeout", o.e2e.timeout, "bound on each suite (ginkgo --timeout)")
	fs.StringVar(&o.e2e.reportDir, "e2e-report-dir", "", "directory for the JUnit reports, logs and summary.md (default DIR/e2e-report)")
	fs.BoolVar(&o.e2e.network, "e2e-network", o.e2e.network, "run the main suite: the load balancer and sig-network Conformance tests (or --e2e-focus)")
	fs.BoolVar(&o.e2e.cloudProvider, "e2e-cloud-provider", o.e2e.cloudProvider, "after the main suite, run the [Feature:CloudProvider] node test, which deletes a node")
	return cmd
}

// config turns the flags into the cluster's configuration. It checks what only the
// command knows (the flags' syntax and the directories); localcluster.Start checks the
// rest before it changes anything.
func (o *upOptions) config() (localcluster.Config, error) {
	var errs []error
	if o.dir == "" {
		o.dir = realDir
		if o.kwok {
			o.dir = kwokDir
		}
	}
	if o.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %s: must be positive", o.timeout))
	}
	if o.e2e.run && (o.smoke || o.kwok) {
		errs = append(errs, errors.New("--e2e: not with --smoke or --kwok (the suite needs real nodes)"))
	}
	if o.e2e.run && (o.e2e.parallel < 1 || o.e2e.timeout <= 0) {
		errs = append(errs, fmt.Errorf("--e2e-parallel %d, --e2e-timeout %s: want positive values", o.e2e.parallel, o.e2e.timeout))
	}
	if o.hybridNodes < 0 || o.hybridNodes == 0 && (o.unownedNode || o.hybridBridge != "" || o.hybridInstanceCIDR != "" || o.hybridVIPPool != "") {
		errs = append(errs, fmt.Errorf("--hybrid-nodes %d: want at least 1 for a hybrid cluster (--unowned-node and the --hybrid-* flags need one), or 0", o.hybridNodes))
	}
	if o.nodes < 1 {
		// localcluster takes 0 for its default; a flag of 0 is a mistake.
		errs = append(errs, fmt.Errorf("--nodes %d: want at least 1", o.nodes))
	}
	prefix := func(flag, v string) netip.Prefix {
		if v == "" {
			return netip.Prefix{} // the mode's default
		}
		p, err := netip.ParsePrefix(v)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--%s %q: %w", flag, v, err))
		case !p.Addr().Is4():
			errs = append(errs, fmt.Errorf("--%s %q: want an IPv4 range", flag, v))
		}
		return p
	}
	cfg := localcluster.Config{
		NodeMode:     localcluster.NodesReal,
		Nodes:        o.nodes,
		Bridge:       o.bridge,
		InstanceCIDR: prefix("instance-cidr", o.instanceCIDR),
		ClusterCIDR:  prefix("cluster-cidr", o.clusterCIDR),
		ServiceCIDR:  prefix("service-cidr", o.serviceCIDR),
		VIPPool:      prefix("vip-pool", o.vipPool),
		ClusterName:  localcluster.DefaultClusterName,
		CCM:          localcluster.CCMMode(o.ccm),
		// On by default where a cluster can serve volumes; asked for elsewhere, refused.
		Volumes: o.volumes && (o.volumesSet || (!o.kwok && o.hybridNodes == 0)),
	}
	if o.kwok {
		cfg.NodeMode = localcluster.NodesKwok
	}
	if o.hybridNodes > 0 {
		cfg.Hybrid = &localcluster.Hybrid{Nodes: o.hybridNodes, UnownedNode: o.unownedNode, Bridge: o.hybridBridge,
			InstanceCIDR: prefix("hybrid-instance-cidr", o.hybridInstanceCIDR), VIPPool: prefix("hybrid-vip-pool", o.hybridVIPPool)}
	}
	if o.e2e.run {
		// Refused here, before the cluster starts, not after.
		if _, err := o.e2eSuites(cfg.Volumes); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return cfg, errors.Join(errs...)
	}
	var err error
	if cfg.Dir, err = filepath.Abs(o.dir); err != nil {
		return cfg, fmt.Errorf("--dir: %w", err)
	}
	if o.binDir == "" {
		if o.binDir, err = controlplane.BinDir(); err != nil {
			return cfg, fmt.Errorf("%w (or give --bin-dir)", err)
		}
	}
	if cfg.BinDir, err = filepath.Abs(o.binDir); err != nil {
		return cfg, fmt.Errorf("--bin-dir: %w", err)
	}
	if o.build {
		wd, err := os.Getwd()
		if err != nil {
			return cfg, err
		}
		if cfg.BuildFrom, err = goModuleDir(context.Background(), wd); err != nil {
			return cfg, fmt.Errorf("--build: %w (run up inside the nephele source tree, or make build node-images and --build=false)", err)
		}
	}
	if o.smoke {
		smoke.Configure(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, upFlagErrors(err)
	}
	return cfg, nil
}

// upFlags are the flags of up that set each field of localcluster.Config.
var upFlags = map[string]string{
	"nodes": "--nodes", "bridge": "--bridge", "instanceCIDR": "--instance-cidr", "clusterCIDR": "--cluster-cidr",
	"serviceCIDR": "--service-cidr", "vipPool": "--vip-pool", "ccm": "--ccm", "volumes": "--volumes", "dir": "--dir", "binDir": "--bin-dir",
	"hybrid": "--hybrid-nodes", "hybrid.nodes": "--hybrid-nodes", "hybrid.bridge": "--hybrid-bridge",
	"hybrid.instanceCIDR": "--hybrid-instance-cidr", "hybrid.vipPool": "--hybrid-vip-pool",
}

// upFlagErrors says a localcluster.ConfigError's problems in terms of up's flags: one
// line each, naming the flag.
func upFlagErrors(err error) error {
	var ce *localcluster.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	errs := make([]error, 0, len(ce.Errs))
	for _, e := range ce.Errs {
		name := e.Field
		if flag, ok := upFlags[name]; ok {
			name = flag
		}
		if e.BadValue != nil && fmt.Sprint(e.BadValue) != "" {
			name += " " + fmt.Sprint(e.BadValue)
		}
		detail := e.Detail
		if detail == "" {
			detail = e.ErrorBody()
		}
		for _, field := range []string{"instanceCIDR", "clusterCIDR", "serviceCIDR", "vipPool"} {
			// "overlaps clusterCIDR 10.244.0.0/16": the other range by its flag too.
			detail = strings.ReplaceAll(detail, " "+field+" ", " "+upFlags[field]+" ")
		}
		errs = append(errs, fmt.Errorf("%s: %s", name, detail))
	}
	return errors.Join(errs...)
}

// runUp runs the cluster cfg describes: it takes the state directory, starts the cluster,
// then runs the smoke checks or waits for a signal, and stops it.
func runUp(ctx context.Context, o upOptions, cfg localcluster.Config, out io.Writer) error {
	what := plural(cfg.Nodes, "real node") + " on the local cloud's hosts"
	if o.kwok {
		what = plural(cfg.Nodes, "kwok node")
	}
	fmt.Fprintf(out, "nephele up: %s, state in %s\n", what, cfg.Dir)
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return err
	}
	// Before anything in it is opened: another user's directory could hold a planted
	// link where the lock or a journal is.
	if err := securedir.Check(cfg.Dir); err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	lock, err := lockDir(cfg.Dir)
	if err != nil {
		return err
	}
	defer func() { _ = lock.release() }()

	cfg.Progress = newProgress(out)
	startCtx, cancel := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("not up within --timeout %s", o.timeout))
	defer cancel()
	c, err := localcluster.Start(startCtx, cfg)
	var pre *localcluster.PreflightError
	if errors.As(err, &pre) && !pre.Kwok {
		return fmt.Errorf("%w\nor run the simulated cluster, which needs none of this: nephele up --kwok (make up UP_FLAGS=--kwok)", err)
	}
	if err != nil {
		return err
	}
	cancel()
	if err := publishCredentials(cfg.Dir, c); err != nil {
		return errors.Join(err, stop(c, cfg.Dir, out))
	}
	var runErr error
	switch {
	case o.smoke:
		_, runErr = smoke.Run(ctx, c, smoke.Options{Out: out, Timeout: o.timeout})
	case o.e2e.run:
		runErr = runE2E(ctx, o, c, out)
	default:
		printUsage(out, c, cfg.Dir)
		runErr = c.Wait(ctx)
	}
	return errors.Join(runErr, stop(c, cfg.Dir, out))
}

// runE2E runs upstream's e2e suites (upstreame2e.Suites, or the focus and skip of the
// flags) against c.
func runE2E(ctx context.Context, o upOptions, c *localcluster.Cluster, out io.Writer) error {
	suites, err := o.e2eSuites(c.Config().Volumes)
	if err != nil {
		return err
	}
	reportDir := o.e2e.reportDir
	if reportDir == "" {
		reportDir = filepath.Join(c.Config().Dir, "e2e-report")
	}
	reports, err := upstreame2e.RunSuites(ctx, c, upstreame2e.Options{
		BinDir: c.Config().BinDir, Dir: filepath.Join(c.Config().Dir, "e2e"), ReportDir: reportDir,
		Suites: suites, Out: out,
	})
	if len(reports) > 0 {
		fmt.Fprintf(out, "upstream e2e: reports in %s (summary.md)\n", reportDir)
	}
	return err
}

// e2eSuites are the suites --e2e runs on a cluster with or without volumes: the network,
// storage and cloud-provider suites the flags leave on, the first with the flags' focus
// and skip. It is an error when the flags turn every suite off.
func (o *upOptions) e2eSuites(volumes bool) ([]upstreame2e.Suite, error) {
	suites := upstreame2e.Suites(o.e2e.parallel, o.e2e.timeout, volumes)
	suites = slices.DeleteFunc(suites, func(s upstreame2e.Suite) bool {
		return (s.Name == "cloud-provider" && !o.e2e.cloudProvider) || (s.Name == "network" && !o.e2e.network)
	})
	if len(suites) == 0 {
		return nil, errors.New("--e2e: every suite is off (--e2e-network=false, --e2e-cloud-provider=false, and no --volumes for the storage suite): leave one on; --e2e-focus applies to the first")
	}
	// The focus and skip of the flags are the first suite's: the network suite's, or
	// with --e2e-network=false the storage suite's.
	if o.e2e.focus != "" {
		suites[0].Focus = o.e2e.focus
	}
	if o.e2e.skip != "" {
		suites[0].Skip = o.e2e.skip
	}
	return suites, nil
}

// credentialFiles are the admin's kubeconfig and token, which up writes into the state
// directory while the cluster runs.
func credentialFiles(dir string) (kubeconfig, token string) {
	return filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "token")
}

// publishCredentials puts the admin kubeconfig and token where the user looks for them.
func publishCredentials(dir string, c *localcluster.Cluster) error {
	kubeconfigFile, tokenFile := credentialFiles(dir)
	kubeconfig, err := os.ReadFile(c.Env.Kubeconfig)
	if err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfigFile, kubeconfig, 0o600); err != nil {
		return err
	}
	return os.WriteFile(tokenFile, []byte(c.Env.Token+"\n"), 0o600)
}

// stop stops the cluster and removes the credentials of an apiserver that is gone.
func stop(c *localcluster.Cluster, dir string, out io.Writer) error {
	fmt.Fprintln(out, "stopping (Ctrl-C again kills at once; the next nephele up cleans up after that)")
	err := c.Stop(context.Background())
	kubeconfig, token := credentialFiles(dir)
	for _, p := range []string{kubeconfig, token} {
		if rmErr := os.Remove(p); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			err = errors.Join(err, rmErr)
		}
	}
	if err == nil {
		fmt.Fprintf(out, "stopped; logs kept in %s\n", strings.Join(c.LogDirs(), ", "))
	}
	return err
}

// printUsage tells a person how to use the cluster that is up.
func printUsage(out io.Writer, c *localcluster.Cluster, dir string) {
	kubeconfig, _ := credentialFiles(dir)
	var nodes []string
	for _, n := range c.Nodes {
		nodes = append(nodes, n.Name+" "+n.Address.String())
	}
	kubectl := c.Kubectl
	cfg := c.Config()
	fmt.Fprintf(out, "\nnephele is up: %s (%s), kube-apiserver %s, local cloud %s\n\nUse it with kubectl:\n  export KUBECONFIG=%s\n",
		plural(len(c.Nodes), string(cfg.NodeMode)+" node"), strings.Join(nodes, ", "), c.Env.APIServerURL, c.CloudURL, kubeconfig)
	if cfg.NodeMode == localcluster.NodesReal {
		fmt.Fprintf(out, `  %[1]s get nodes -o wide -L topology.kubernetes.io/zone
  %[1]s create deployment hello --image=%[2]s --replicas=%[3]d --port=8080
  %[1]s expose deployment hello --type=LoadBalancer --port=8080
  %[1]s get service hello          # EXTERNAL-IP: a VIP of the local cloud's load balancer
  curl http://<EXTERNAL-IP>:8080/   # a pod answers with its name
  %[1]s logs deploy/hello
  %[1]s exec deploy/hello -- /demo-http get http://<another pod's IP>:8080/
`, kubectl, localcluster.DemoImage, len(c.Nodes))
	} else {
		fmt.Fprintf(out, `  %[1]s get nodes -L topology.kubernetes.io/zone,node.kubernetes.io/instance-type
  %[1]s create service loadbalancer hello --tcp=8080:8080
  %[1]s get service hello          # EXTERNAL-IP comes from the local cloud
  curl http://<EXTERNAL-IP>:8080/   # answered by a node agent, through the cloud's load balancer
`, kubectl)
	}
	fmt.Fprintf(out, `
The cloud:
  curl --cacert %[5]s -H "Authorization: Bearer $(cat %[1]s)" %[2]s/v1/instances
  curl --cacert %[5]s -H "Authorization: Bearer $(cat %[1]s)" %[2]s/v1/clusters/%[3]s/routes

Logs: %[4]s
Press Ctrl-C to stop.
`, c.CloudTokenFile, c.CloudURL, cfg.ClusterName, strings.Join(c.LogDirs(), ", "), c.CloudCAFile)
}

// plural says "1 route", "2 routes".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

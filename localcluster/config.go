package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/kubenode"
	"github.com/nephele-dev/nephele/localcloud/hosts"
	"github.com/nephele-dev/nephele/localcloud/server"
)

// Defaults of Config's optional fields.
const (
	DefaultNodes       = 3
	DefaultClusterName = "kubernetes"
	// MaxNodes bounds Config.Nodes: each node runs a kubelet, containerd and kube-proxy
	// (about 200 MiB together) on this one machine.
	MaxNodes = 20
	// nodeCIDRMaskSize is the size of each node's pod CIDR (kube-controller-manager's
	// --node-cidr-mask-size).
	nodeCIDRMaskSize = 24
)

// DefaultClusterCIDR is the pod range of a cluster started without Config.ClusterCIDR.
var DefaultClusterCIDR = netip.MustParsePrefix("10.244.0.0/16")

// Config says what cluster Start brings up.
type Config struct {
	// Dir is the cluster's directory: the control plane in Dir/run, the local cloud in
	// Dir/cloud, its hosts in Dir/hosts, the nodes' configurations (and after Stop, their
	// logs) in Dir/nodes. Start removes what an earlier run left in them. Required.
	Dir string
	// BinDir holds every program: etcd, the Kubernetes components, kubectl, containerd,
	// its shim, ctr and the CNI plugins (make tools), localcloud,
	// cloud-controller-manager and nephele (make build), and the image archives in
	// BinDir/images (ImageDir). Required.
	BinDir string
	// Nodes is the number of nodes, 1 to MaxNodes; default DefaultNodes.
	Nodes int
	// Bridge is the local cloud's bridge; default hosts.DefaultBridge. It names the
	// hosts' network namespaces and cgroups, so two clusters need two bridges.
	Bridge string
	// InstanceCIDR is the range of the hosts' addresses; the bridge, and the apiserver,
	// get its first address. Default hosts.DefaultRange.
	InstanceCIDR netip.Prefix
	// ClusterCIDR is the pod range: each node gets a /24 of it. Default
	// DefaultClusterCIDR.
	ClusterCIDR netip.Prefix
	// ServiceCIDR is the Service range; default controlplane.DefaultServiceCIDR.
	ServiceCIDR netip.Prefix
	// VIPPool is where load balancer VIPs come from; default server.DefaultVIPPool.
	VIPPool netip.Prefix
	// ClusterName is the cloud-controller-manager's --cluster-name, under which the cloud
	// files load balancers and routes; default DefaultClusterName.
	ClusterName string
	// APIServerArgs are added to kube-apiserver's flags, e.g. an audit policy.
	APIServerArgs []string
	// ControllerManagerArgs are added to kube-controller-manager's flags (a flag given
	// here overrides the default of the same name), e.g. a short
	// --node-monitor-grace-period.
	ControllerManagerArgs []string
	// CCMArgs are added to the cloud-controller-manager's flags, e.g. a short
	// --route-reconciliation-period.
	CCMArgs []string
	// CCM says where nephele's cloud-controller-manager runs; default CCMProcess.
	CCM CCMMode
	// CCMReplicas is the CCM Deployment's replicas (CCMInCluster, CCMOperator); default
	// render.DefaultReplicas.
	CCMReplicas int
	// DeferCCM makes Start stop before the cloud-controller-manager: the nodes are Ready
	// but uninitialized and nothing routes pod traffic between them, until StartCCM.
	DeferCCM bool
	// Progress receives every step of Start and Stop; nil runs them silently.
	Progress Progress
}

// CCMMode is where a cluster runs nephele's cloud-controller-manager.
type CCMMode string

const (
	// CCMProcess runs it as a process on the machine, beside the control plane, with the
	// admin's kubeconfig: the way a control plane node runs it as a static pod.
	CCMProcess CCMMode = "process"
	// CCMInCluster installs it the way docs/deploy.md tells users to: the manifests of
	// `nephele manifests` (deploy/render), with the cloud config in a Secret, applied
	// with kubectl; its pods pull the image from the cluster's registry and run on the
	// nodes with their ServiceAccounts' credentials.
	CCMInCluster CCMMode = "in-cluster"
	// CCMOperator installs nephele-operator from its manifests (kubectl apply
	// --server-side, its image pulled from the cluster's registry) and creates the
	// CloudControllerManager of the local platform: the operator renders, runs and
	// watches the CCM.
	CCMOperator CCMMode = "operator"
)

// CCMModes are the values of Config.CCM, for flags.
var CCMModes = []CCMMode{CCMProcess, CCMInCluster, CCMOperator}

// Progress runs the steps of Start and Stop: it calls fn, and may report name, how long
// fn took and the detail it returned (cmd/nephele prints one line per step).
type Progress interface {
	Step(ctx context.Context, name string, fn func(context.Context) (detail string, err error)) error
}

// silent is the Progress of a Config without one.
type silent struct{}

func (silent) Step(ctx context.Context, _ string, fn func(context.Context) (string, error)) error {
	_, err := fn(ctx)
	return err
}

// ImageDir is where a cluster takes the image archives from: BinDir/images, written by
// `nephele node images --out BinDir/images` (make node-images) or images.Build.
func ImageDir(binDir string) string { return filepath.Join(binDir, "images") }

// Images are the images a cluster's registry serves to its nodes: the pod sandbox, the
// demo HTTP server, and the cloud-controller-manager.
var Images = images.InCluster

// DemoImage is the reference of the demo HTTP server's image on every node.
var DemoImage = images.DemoHTTP.Ref(images.DefaultVersion)

// complete checks c and fills in the defaults.
func (c *Config) complete() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("Dir is required"))
	}
	if c.BinDir == "" {
		errs = append(errs, errors.New("BinDir is required"))
	}
	if c.Nodes == 0 {
		c.Nodes = DefaultNodes
	}
	if c.Nodes < 1 || c.Nodes > MaxNodes {
		errs = append(errs, fmt.Errorf("nodes %d: want 1 to %d", c.Nodes, MaxNodes))
	}
	if c.Bridge == "" {
		c.Bridge = hosts.DefaultBridge
	}
	if err := hosts.ValidateBridgeName(c.Bridge); err != nil {
		errs = append(errs, err)
	}
	def := func(p *netip.Prefix, d netip.Prefix) {
		if !p.IsValid() {
			*p = d
		}
		*p = p.Masked()
	}
	def(&c.InstanceCIDR, hosts.DefaultRange)
	def(&c.ClusterCIDR, DefaultClusterCIDR)
	def(&c.ServiceCIDR, controlplane.DefaultServiceCIDR)
	def(&c.VIPPool, server.DefaultVIPPool)
	if err := hosts.ValidateRange(c.InstanceCIDR); err != nil {
		errs = append(errs, err)
	} else if max := 1<<(32-c.InstanceCIDR.Bits()) - 2; c.Nodes > max-1 {
		errs = append(errs, fmt.Errorf("instance range %s has room for %s, fewer than %d nodes", c.InstanceCIDR, plural(max-1, "host"), c.Nodes))
	}
	if !c.ClusterCIDR.Addr().Is4() || c.ClusterCIDR.Bits() > nodeCIDRMaskSize-1 {
		errs = append(errs, fmt.Errorf("cluster CIDR %s: want an IPv4 range larger than a /%d", c.ClusterCIDR, nodeCIDRMaskSize))
	} else if perNode := 1 << (nodeCIDRMaskSize - c.ClusterCIDR.Bits()); c.Nodes > perNode {
		errs = append(errs, fmt.Errorf("cluster CIDR %s has %d pod CIDRs of /%d, fewer than %d nodes", c.ClusterCIDR, perNode, nodeCIDRMaskSize, c.Nodes))
	}
	ranges := []struct {
		name string
		p    netip.Prefix
	}{{"instance range", c.InstanceCIDR}, {"cluster CIDR", c.ClusterCIDR}, {"service CIDR", c.ServiceCIDR}, {"VIP pool", c.VIPPool}}
	for i, a := range ranges {
		for _, b := range ranges[i+1:] {
			if a.p.Overlaps(b.p) {
				errs = append(errs, fmt.Errorf("%s %s overlaps %s %s", a.name, a.p, b.name, b.p))
			}
		}
	}
	if c.ClusterName == "" {
		c.ClusterName = DefaultClusterName
	}
	switch c.CCM {
	case "":
		c.CCM = CCMProcess
	case CCMProcess, CCMInCluster, CCMOperator:
	default:
		errs = append(errs, fmt.Errorf("ccm %q: want %s, %s or %s", c.CCM, CCMProcess, CCMInCluster, CCMOperator))
	}
	if c.CCMReplicas == 0 {
		c.CCMReplicas = render.DefaultReplicas
	}
	if c.CCMReplicas < 1 {
		errs = append(errs, fmt.Errorf("ccm replicas %d: want at least 1", c.CCMReplicas))
	} else if c.CCM == CCMProcess && c.CCMReplicas != render.DefaultReplicas {
		errs = append(errs, fmt.Errorf("ccm replicas %d: only a CCM in the cluster (ccm %s or %s) has replicas", c.CCMReplicas, CCMInCluster, CCMOperator))
	}
	if c.Progress == nil {
		c.Progress = silent{}
	}
	if len(errs) > 0 {
		return fmt.Errorf("localcluster: %w", errors.Join(errs...))
	}
	var err error
	if c.Dir, err = filepath.Abs(c.Dir); err != nil {
		return fmt.Errorf("localcluster: dir: %w", err)
	}
	if c.BinDir, err = filepath.Abs(c.BinDir); err != nil {
		return fmt.Errorf("localcluster: bin dir: %w", err)
	}
	// Every host's directory has the same length: its instance ID's is fixed.
	if err := kubenode.CheckHostDir(hosts.HostDir(c.hostDir(), "i-000000000000")); err != nil {
		return fmt.Errorf("localcluster: dir %s: %w", c.Dir, err)
	}
	return nil
}

// Directories of a cluster in Config.Dir.
func (c *Config) runDir() string      { return filepath.Join(c.Dir, "run") }
func (c *Config) cloudDir() string    { return filepath.Join(c.Dir, "cloud") }
func (c *Config) hostDir() string     { return filepath.Join(c.Dir, "hosts") }
func (c *Config) nodesDir() string    { return filepath.Join(c.Dir, "nodes") }
func (c *Config) registryDir() string { return filepath.Join(c.Dir, "registry") }

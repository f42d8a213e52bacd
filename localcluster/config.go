package localcluster

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/localcloud/hosts"
	"github.com/nephele-dev/nephele/localcloud/server"
)

// Defaults of Config's optional fields.
const (
	DefaultNodes       = 3
	DefaultClusterName = "kubernetes"
	// MaxNodes bounds Config.Nodes of real nodes: each runs a kubelet, containerd and
	// kube-proxy (about 200 MiB together) on this one machine.
	MaxNodes = 20
	// MaxKwokNodes bounds Config.Nodes of kwok nodes: each is a Node object, a cloud
	// instance and a set of node agent listeners on this machine.
	MaxKwokNodes = 100
	// nodeCIDRMaskSize is the size of each node's pod CIDR (kube-controller-manager's
	// --node-cidr-mask-size).
	nodeCIDRMaskSize = 24
)

// DefaultClusterCIDR is the pod range of a cluster started without Config.ClusterCIDR.
var DefaultClusterCIDR = netip.MustParsePrefix("10.244.0.0/16")

// loopback is where kwok nodes' addresses and VIPs are: addresses this machine answers
// on without root.
var loopback = netip.MustParsePrefix("127.0.0.0/8")

// NodeMode is what a cluster's nodes are.
type NodeMode string

const (
	// NodesReal are host instances of the local cloud (network and mount namespaces on
	// the cloud's bridge) each booting `nephele node boot`: containerd, kubelet and
	// kube-proxy, so pods, routes and load balancers are all real. It needs Linux and
	// root (Preflight).
	NodesReal NodeMode = "real"
	// NodesKwok are Node objects registered as a kubelet with --cloud-provider=external
	// would, kept Ready by kwok, each backed by an instance of the local cloud on a
	// loopback address where a node agent (internal/nodeagent) answers on the Services'
	// node ports in place of kube-proxy and a workload. Pods do not run. It needs no
	// root: everything listens on loopback.
	NodesKwok NodeMode = "kwok"
)

// Config says what cluster Start brings up.
type Config struct {
	// NodeMode says what the nodes are; default NodesReal.
	NodeMode NodeMode
	// Dir is the cluster's directory: the control plane in Dir/run, the local cloud in
	// Dir/cloud, its hosts in Dir/hosts, the nodes' configurations (and after Stop, their
	// logs) in Dir/nodes. Start removes what an earlier run left in them. Required.
	Dir string
	// BinDir holds every program: etcd, the Kubernetes components, kubectl, containerd,
	// its shim, ctr and the CNI plugins (make tools), localcloud,
	// cloud-controller-manager and nephele (make build), and the image archives in
	// BinDir/images (ImageDir). Required.
	BinDir string
	// Nodes is the number of nodes, 1 to MaxNodes (MaxKwokNodes for kwok nodes);
	// default DefaultNodes.
	Nodes int
	// Bridge is the local cloud's bridge for real nodes; default hosts.DefaultBridge. It
	// names the hosts' network namespaces and cgroups, so two clusters need two bridges.
	Bridge string
	// InstanceCIDR is the range of the nodes' addresses. For real nodes it is on the
	// bridge, whose address (and the apiserver's) is its first; default
	// hosts.DefaultRange. For kwok nodes it must be inside 127.0.0.0/8; default
	// server.DefaultInstanceCIDR.
	InstanceCIDR netip.Prefix
	// ClusterCIDR is the pod range: each node gets a /24 of it. Default
	// DefaultClusterCIDR.
	ClusterCIDR netip.Prefix
	// ServiceCIDR is the Service range; default controlplane.DefaultServiceCIDR.
	ServiceCIDR netip.Prefix
	// VIPPool is where load balancer VIPs come from. Real nodes' load balancers are the
	// kernel's, routing each connection to a node unchanged (ipMode VIP): the pool must
	// be outside 127.0.0.0/8, which is every node's and pod's own loopback; default
	// hosts.DefaultVIPPool. Kwok nodes' are user-space proxies on loopback VIPs (ipMode
	// Proxy): the pool must be inside 127.0.0.0/8; default server.DefaultVIPPool.
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
	// CCM says where nephele's cloud-controller-manager runs; default CCMProcess, the
	// only mode of kwok nodes (nothing runs in a kwok cluster's pods).
	CCM CCMMode
	// CCMReplicas is the CCM Deployment's replicas (CCMInCluster, CCMOperator); default
	// render.DefaultReplicas.
	CCMReplicas int
	// Hybrid, when set, spans the cluster over two local clouds (docs/hybrid.md).
	// Real nodes and a CCM process only.
	Hybrid *Hybrid
	// Volumes deploys nephele's CSI driver (the controller, the node plugin, the default
	// StorageClass, docs/volumes.md) once the CCM has initialized the nodes, so that a
	// PersistentVolumeClaim is provisioned from the local cloud's volumes. Real nodes of
	// one cloud only.
	Volumes bool
	// VolumeAttachLimit is how many volumes one instance of the cloud takes (localcloud
	// --volume-attach-limit), which the CSI driver tells the scheduler; default the
	// cloud's, 16. Raising it lets many claims share few nodes (the volume benchmark).
	VolumeAttachLimit int
	// DeferCCM makes Start stop before the cloud-controller-manager: the nodes are Ready
	// but uninitialized and nothing routes pod traffic between them, until StartCCM.
	DeferCCM bool
	// BuildFrom, when set, is nephele's source tree: Start builds nephele's commands
	// (BuiltBinaries) and, for real nodes, the image archives (Images) into BinDir from it
	// before anything else, and Preflight does not ask for them. Empty: they must be in
	// BinDir (make build, make node-images).
	BuildFrom string
	// Progress receives every step of Start and Stop; nil runs them silently.
	Progress Progress
}

// Hybrid is the second local cloud of a hybrid cluster (Config.Hybrid): a cloud of its
// own (Dir/cloud-b, its hosts in Dir/hosts-b) on a bridge and ranges of its own, a
// peer of the first (hosts.Peer), so that pods reach each other across the clouds
// through each cloud's routes. Its nodes declare platform SecondCloud, and one CCM
// process serves both clouds (--clouds-config), each with its own load balancer class:
// the first, the default, also serves Services without a class.
type Hybrid struct {
	// Nodes is the second cloud's number of nodes; default 1. Config.Nodes, Nodes and
	// the unowned node together are at most MaxNodes.
	Nodes int
	// Bridge is the second cloud's bridge; default DefaultHybridBridge.
	Bridge string
	// InstanceCIDR is the second cloud's instance range; default DefaultHybridRange.
	InstanceCIDR netip.Prefix
	// VIPPool is the second cloud's VIP pool; default DefaultHybridVIPPool.
	VIPPool netip.Prefix
	// UnownedNode adds a node, a host of the first cloud, that declares platform
	// UnownedPlatform: no cloud of the CCM owns it, so nothing may initialize, route,
	// balance to or delete it. It keeps the uninitialized taint.
	UnownedNode bool
}

// A hybrid cluster's clouds: the names (and provider-ID schemes, and platforms) and the
// load balancer classes.
const (
	// FirstCloud is the first cloud's name and provider-ID scheme, the local provider's.
	FirstCloud = "local"
	// SecondCloud is the second cloud's name and provider-ID scheme.
	SecondCloud = "local-b"
	// FirstCloudClass and SecondCloudClass are the clouds' load balancer classes.
	FirstCloudClass  = "nephele.dev/local"
	SecondCloudClass = "nephele.dev/local-b"
	// UnownedPlatform is the platform the unowned node declares: no cloud's.
	UnownedPlatform = "on-prem"
	// DefaultHybridBridge is the second cloud's default bridge.
	DefaultHybridBridge = "nephele1"
)

// Default ranges of the second cloud: beside hosts.DefaultRange and
// hosts.DefaultVIPPool, outside the default pod and Service ranges and the ranges the
// real-node tests take (clustertest: 10.86 and 10.87).
var (
	DefaultHybridRange   = netip.MustParsePrefix("10.90.0.0/16")
	DefaultHybridVIPPool = netip.MustParsePrefix("10.91.0.0/16")
)

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

// Images are nephele's images a cluster's registry serves to its nodes: the in-cluster
// programs (the pod sandbox, the demo HTTP server, the cloud-controller-manager, the
// operator) and the CSI driver, which carries this machine's file system tools.
var Images = append(slices.Clone(images.InCluster), images.CSIDriver)

// DemoImage is the reference of the demo HTTP server's image on every node.
var DemoImage = images.DemoHTTP.Ref(images.DefaultVersion)

// ConfigError lists what is wrong with a Config, one field error per problem; the
// fields are the Config's, named as in JSON (nodes, instanceCIDR, ...), so a command can
// name its own flag for each.
type ConfigError struct {
	Errs field.ErrorList
}

// Error implements error.
func (e *ConfigError) Error() string { return "localcluster: " + e.Errs.ToAggregate().Error() }

// Validate checks cfg as Start would, without starting anything: a *ConfigError names
// every problem.
func (c Config) Validate() error { return c.complete() }

// complete checks c and fills in the defaults.
func (c *Config) complete() error {
	var errs field.ErrorList
	bad := func(name string, value any, format string, args ...any) {
		errs = append(errs, field.Invalid(field.NewPath(name), value, fmt.Sprintf(format, args...)))
	}
	if c.Dir == "" {
		errs = append(errs, field.Required(field.NewPath("dir"), "the cluster's directory"))
	}
	if c.BinDir == "" {
		errs = append(errs, field.Required(field.NewPath("binDir"), "the directory of the binaries (make tools)"))
	}
	if c.Nodes == 0 {
		c.Nodes = DefaultNodes
	}
	def := func(p *netip.Prefix, d netip.Prefix) {
		if !p.IsValid() {
			*p = d
		}
		*p = p.Masked()
	}
	switch c.NodeMode {
	case "", NodesReal:
		c.NodeMode = NodesReal
		if c.Nodes < 1 || c.Nodes > MaxNodes {
			bad("nodes", c.Nodes, "want 1 to %d", MaxNodes)
		}
		if c.Bridge == "" {
			c.Bridge = hosts.DefaultBridge
		}
		if err := hosts.ValidateBridgeName(c.Bridge); err != nil {
			bad("bridge", c.Bridge, "%v", err)
		}
		def(&c.InstanceCIDR, hosts.DefaultRange)
		def(&c.VIPPool, hosts.DefaultVIPPool)
		if err := hosts.ValidateVIPPool(c.VIPPool); err != nil {
			bad("vipPool", c.VIPPool.String(), "%v", err)
		}
		if err := hosts.ValidateRange(c.InstanceCIDR); err != nil {
			bad("instanceCIDR", c.InstanceCIDR.String(), "%v", err)
		} else if max := 1<<(32-c.InstanceCIDR.Bits()) - 2; c.Nodes > max-1 {
			bad("instanceCIDR", c.InstanceCIDR.String(), "room for %s, fewer than %d nodes", plural(max-1, "host"), c.Nodes)
		}
	case NodesKwok:
		if c.Nodes < 1 || c.Nodes > MaxKwokNodes {
			bad("nodes", c.Nodes, "want 1 to %d with kwok nodes", MaxKwokNodes)
		}
		if c.Bridge != "" {
			bad("bridge", c.Bridge, "kwok nodes have no bridge (they listen on loopback addresses)")
		}
		def(&c.InstanceCIDR, server.DefaultInstanceCIDR)
		if !loopback.Contains(c.InstanceCIDR.Addr()) || c.InstanceCIDR.Bits() < loopback.Bits() {
			bad("instanceCIDR", c.InstanceCIDR.String(), "kwok nodes need a range inside %s, which needs no root", loopback)
		} else if max := 1<<(32-c.InstanceCIDR.Bits()) - 2; c.InstanceCIDR.Bits() < 32 && c.Nodes > max {
			bad("instanceCIDR", c.InstanceCIDR.String(), "room for %s, fewer than %d nodes", plural(max, "node"), c.Nodes)
		}
		def(&c.VIPPool, server.DefaultVIPPool)
		if !loopback.Contains(c.VIPPool.Addr()) || c.VIPPool.Bits() < loopback.Bits() {
			bad("vipPool", c.VIPPool.String(), "kwok nodes' load balancers are user-space proxies on VIPs inside %s, which they bind without root", loopback)
		}
	default:
		errs = append(errs, field.NotSupported(field.NewPath("nodeMode"), c.NodeMode, []NodeMode{NodesReal, NodesKwok}))
	}
	def(&c.ClusterCIDR, DefaultClusterCIDR)
	def(&c.ServiceCIDR, controlplane.DefaultServiceCIDR)
	if !c.ClusterCIDR.Addr().Is4() || c.ClusterCIDR.Bits() > nodeCIDRMaskSize-1 {
		bad("clusterCIDR", c.ClusterCIDR.String(), "want an IPv4 range larger than a /%d", nodeCIDRMaskSize)
	} else if perNode := 1 << (nodeCIDRMaskSize - c.ClusterCIDR.Bits()); c.Nodes > perNode {
		bad("clusterCIDR", c.ClusterCIDR.String(), "%d pod CIDRs of /%d, fewer than %d nodes", perNode, nodeCIDRMaskSize, c.Nodes)
	}
	ranges := []struct {
		name string
		p    netip.Prefix
	}{{"instanceCIDR", c.InstanceCIDR}, {"clusterCIDR", c.ClusterCIDR}, {"serviceCIDR", c.ServiceCIDR}, {"vipPool", c.VIPPool}}
	for i, a := range ranges {
		for _, b := range ranges[i+1:] {
			if a.p.Overlaps(b.p) {
				bad(b.name, b.p.String(), "overlaps %s %s", a.name, a.p)
			}
		}
	}
	if c.Hybrid != nil {
		errs = append(errs, c.completeHybrid()...)
	}
	if c.ClusterName == "" {
		c.ClusterName = DefaultClusterName
	}
	switch c.CCM {
	case "":
		c.CCM = CCMProcess
	case CCMProcess:
	case CCMInCluster, CCMOperator:
		if c.NodeMode == NodesKwok {
			bad("ccm", c.CCM, "kwok nodes run no pods, so the CCM runs as a process (%s)", CCMProcess)
		}
	default:
		errs = append(errs, field.NotSupported(field.NewPath("ccm"), c.CCM, CCMModes))
	}
	if c.Volumes && c.NodeMode == NodesKwok {
		bad("volumes", c.Volumes, "kwok nodes run no pods, so they mount no volumes: use real nodes")
	}
	if c.Volumes && c.Hybrid != nil {
		bad("volumes", c.Volumes, "the CSI driver serves one cloud's volumes: a hybrid cluster's second cloud has no driver")
	}
	switch {
	case c.VolumeAttachLimit < 0:
		bad("volumeAttachLimit", c.VolumeAttachLimit, "want 0 (the cloud's default) or more")
	case c.VolumeAttachLimit > 0 && c.CCM == CCMOperator:
		bad("volumeAttachLimit", c.VolumeAttachLimit, "nephele-operator's local profile tells the scheduler the cloud's default: leave it 0 with ccm %s", CCMOperator)
	}
	if c.CCMReplicas == 0 {
		c.CCMReplicas = render.DefaultReplicas
	}
	if c.CCMReplicas < 1 {
		bad("ccmReplicas", c.CCMReplicas, "want at least 1")
	} else if c.CCM == CCMProcess && c.CCMReplicas != render.DefaultReplicas {
		bad("ccmReplicas", c.CCMReplicas, "only a CCM in the cluster (ccm %s or %s) has replicas", CCMInCluster, CCMOperator)
	}
	if c.Progress == nil {
		c.Progress = silent{}
	}
	if len(errs) > 0 {
		return &ConfigError{Errs: errs}
	}
	for _, p := range []*string{&c.Dir, &c.BinDir, &c.BuildFrom} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return fmt.Errorf("localcluster: %s: %w", *p, err)
		}
		*p = abs
	}
	return nil
}

// completeHybrid checks Config.Hybrid and fills in its defaults.
func (c *Config) completeHybrid() field.ErrorList {
	var errs field.ErrorList
	h := *c.Hybrid
	c.Hybrid = &h
	path := field.NewPath("hybrid")
	bad := func(name string, value any, format string, args ...any) {
		errs = append(errs, field.Invalid(path.Child(name), value, fmt.Sprintf(format, args...)))
	}
	if c.NodeMode != NodesReal {
		errs = append(errs, field.Invalid(path, "set", "a hybrid cluster needs real nodes: two clouds' networks with pods between them"))
	}
	if c.CCM != "" && c.CCM != CCMProcess {
		errs = append(errs, field.Invalid(path, "set", fmt.Sprintf("the CCM of a hybrid cluster runs as a process (ccm %s): one manager serves both clouds with --clouds-config", CCMProcess)))
	}
	if h.Nodes == 0 {
		h.Nodes = 1
	}
	total := c.Nodes + h.Nodes
	if h.UnownedNode {
		total++
	}
	if h.Nodes < 1 || total > MaxNodes {
		bad("nodes", h.Nodes, "want at least 1, and at most %d nodes in all (%d in the first cloud)", MaxNodes, c.Nodes)
	}
	// Every node of both clouds takes a pod CIDR; the unowned node is a host of the
	// first cloud.
	if perNode := 1 << (nodeCIDRMaskSize - c.ClusterCIDR.Bits()); c.ClusterCIDR.IsValid() && c.ClusterCIDR.Bits() < nodeCIDRMaskSize && total > perNode {
		bad("nodes", h.Nodes, "%d pod CIDRs of /%d in clusterCIDR %s, fewer than the %d nodes of both clouds", perNode, nodeCIDRMaskSize, c.ClusterCIDR, total)
	}
	if h.UnownedNode && c.InstanceCIDR.IsValid() && c.InstanceCIDR.Bits() < 31 {
		if max := 1<<(32-c.InstanceCIDR.Bits()) - 2; c.Nodes+1 > max-1 {
			bad("unownedNode", true, "instanceCIDR %s has room for %s, fewer than the %d nodes and the unowned node", c.InstanceCIDR, plural(max-1, "host"), c.Nodes)
		}
	}
	if h.Bridge == "" {
		h.Bridge = DefaultHybridBridge
	}
	if err := hosts.ValidateBridgeName(h.Bridge); err != nil {
		bad("bridge", h.Bridge, "%v", err)
	} else if h.Bridge == c.Bridge {
		bad("bridge", h.Bridge, "the first cloud's bridge: the second needs its own")
	}
	if !h.InstanceCIDR.IsValid() {
		h.InstanceCIDR = DefaultHybridRange
	}
	h.InstanceCIDR = h.InstanceCIDR.Masked()
	if !h.VIPPool.IsValid() {
		h.VIPPool = DefaultHybridVIPPool
	}
	h.VIPPool = h.VIPPool.Masked()
	if err := hosts.ValidateRange(h.InstanceCIDR); err != nil {
		bad("instanceCIDR", h.InstanceCIDR.String(), "%v", err)
	} else if max := 1<<(32-h.InstanceCIDR.Bits()) - 2; h.Nodes > max-1 {
		bad("instanceCIDR", h.InstanceCIDR.String(), "room for %s, fewer than %d nodes", plural(max-1, "host"), h.Nodes)
	}
	if err := hosts.ValidateVIPPool(h.VIPPool); err != nil {
		bad("vipPool", h.VIPPool.String(), "%v", err)
	}
	for _, r := range []struct {
		name string
		p    netip.Prefix
	}{{"instanceCIDR", c.InstanceCIDR}, {"clusterCIDR", c.ClusterCIDR}, {"serviceCIDR", c.ServiceCIDR}, {"vipPool", c.VIPPool}} {
		if h.InstanceCIDR.Overlaps(r.p) {
			bad("instanceCIDR", h.InstanceCIDR.String(), "overlaps %s %s", r.name, r.p)
		}
		if h.VIPPool.Overlaps(r.p) {
			bad("vipPool", h.VIPPool.String(), "overlaps %s %s", r.name, r.p)
		}
	}
	if h.InstanceCIDR.Overlaps(h.VIPPool) {
		bad("vipPool", h.VIPPool.String(), "overlaps the second cloud's instance range %s", h.InstanceCIDR)
	}
	return errs
}

// Directories of a cluster in Config.Dir.
func (c *Config) runDir() string   { return filepath.Join(c.Dir, "run") }
func (c *Config) cloudDir() string { return filepath.Join(c.Dir, "cloud") }

// nodeZone is the zone of the i-th node of the first cloud: the cloud's round-robin
// (empty) without volumes; with volumes, two nodes per zone of the cloud's default zones,
// so that a pod and its volume, which stays in its zone, can move to another node (as in
// a real region, whose zones hold many machines).
func (c *Config) nodeZone(i int) string {
	if !c.Volumes {
		return ""
	}
	return server.DefaultZones[(i/2)%len(server.DefaultZones)]
}

func (c *Config) hostDir() string     { return filepath.Join(c.Dir, "hosts") }
func (c *Config) nodesDir() string    { return filepath.Join(c.Dir, "nodes") }
func (c *Config) registryDir() string { return filepath.Join(c.Dir, "registry") }

// The second cloud's directories, in a hybrid cluster.
func (c *Config) secondCloudDir() string { return filepath.Join(c.Dir, "cloud-b") }
func (c *Config) secondHostDir() string  { return filepath.Join(c.Dir, "hosts-b") }

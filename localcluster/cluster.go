package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/images/registry"
	"github.com/nephele-dev/nephele/internal/securedir"
	"github.com/nephele-dev/nephele/localcloud/client"
)

// defaultStartTimeout bounds each wait of Start and StartCCM whose context has no
// deadline: far more than three nodes take on a busy two-core machine.
const defaultStartTimeout = 5 * time.Minute

// Cluster is a running real cluster. Its exported fields are set by Start (CCM and CCMURL
// by StartCCM) and must not be changed.
type Cluster struct {
	// Env is the control plane: Env.Client and Env.Kubeconfig are the admin's,
	// Env.APIServerURL is on the bridge's address.
	Env *controlplane.Env
	// Cloud is a client of the local cloud's API, at CloudURL with the administrator's
	// token in CloudTokenFile. CCMTokenFile holds the token every CCM of the cluster
	// gets, whose role is a CCM's (server.IsCCMOperation): it cannot make hosts or set
	// faults.
	Cloud          *client.Client
	CloudURL       string
	CloudTokenFile string
	CCMTokenFile   string
	// CloudCAFile is the certificate the local cloud's HTTPS API is verified with.
	CloudCAFile string
	// Gateway is the bridge's address: where hosts and pods reach the machine (real nodes;
	// with kwok nodes everything is on loopback and Gateway is the zero Addr).
	Gateway netip.Addr
	// Nodes are the nodes, in name order.
	Nodes []Node
	// Registry serves the nodes' images (Images), on the bridge's address.
	Registry *registry.Server
	// CCM is nephele's cloud-controller-manager process, serving at CCMURL; nil until it
	// runs, and in a cluster whose CCM runs in the cluster (CCMInCluster).
	CCM    *controlplane.Process
	CCMURL string
	// Kubectl is the path of kubectl in BinDir.
	Kubectl string
	// Second is a hybrid cluster's second local cloud (Config.Hybrid); nil otherwise.
	// The fields above from Cloud to Gateway are the first's.
	Second *LocalCloud

	cfg         Config
	first       *LocalCloud
	cloudProc   *controlplane.Process
	registryLog *os.File
	pushed      map[string]registry.Pushed // the images Start pushed, by name
	agent       *nodeAgent                 // kwok nodes only
	ccmStarted  bool

	stopOnce sync.Once
	stopErr  error
}

// Node is one node of the cluster: a host instance of a local cloud.
type Node struct {
	// Name is the Node's and the instance's name, node-1, node-2, ... (in a hybrid
	// cluster's second cloud node-b1, ...; the unowned node is node-unowned).
	Name string
	// InstanceID is the cloud's ID of its instance.
	InstanceID string
	// Address is its InternalIP, on its cloud's bridge.
	Address netip.Addr
	// Cloud is the name of the local cloud the instance is in: FirstCloud, or
	// SecondCloud.
	Cloud string
	// Platform is the platform the node declares (cloud.LabelNodePlatform), "" for
	// none: a node of a hybrid cluster's second cloud declares SecondCloud, the unowned
	// node UnownedPlatform.
	Platform string
}

// Owned reports whether a cloud of the CCM owns n: every node but a hybrid cluster's
// unowned one.
func (n Node) Owned() bool { return n.Platform != UnownedPlatform }

// UnownedNodeName is the name of a hybrid cluster's unowned node (Hybrid.UnownedNode).
const UnownedNodeName = "node-unowned"

// SecondCloudNodeName is the name of the i-th node of a hybrid cluster's second cloud,
// counting from 0.
func SecondCloudNodeName(i int) string { return "node-b" + strconv.Itoa(i+1) }

// Config returns the cluster's configuration, defaults filled in.
func (c *Cluster) Config() Config { return c.cfg }

// NodeName is the name of the i-th node, counting from 0.
func NodeName(i int) string { return "node-" + strconv.Itoa(i+1) }

// Start brings the cluster up (see the package documentation), reporting each step to
// cfg.Progress. It checks what the machine lacks first (Preflight for real nodes) and
// changes nothing on the machine when anything is missing. On any other error, whatever was started is stopped again and the machine
// cleaned; the logs stay in cfg.Dir. ctx bounds starting only.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if err := cfg.complete(); err != nil {
		return nil, err
	}
	if err := cfg.preflight(); err != nil {
		return nil, err
	}
	// Start acts as root on what it finds in Dir (a killed run's journal, its hosts): a
	// directory another user could write must not be it.
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	if err := securedir.Check(cfg.Dir); err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	c := &Cluster{cfg: cfg, Kubectl: filepath.Join(cfg.BinDir, "kubectl")}
	if err := c.start(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
				err = fmt.Errorf("%w: %w", err, cause)
			}
		}
		return nil, errors.Join(fmt.Errorf("%w (logs in %s)", err, cfg.Dir), c.Stop(context.WithoutCancel(ctx)))
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	n := c.cfg.Nodes
	type step struct {
		name string
		fn   func(context.Context) (string, error)
	}
	steps := []step{{"clean up after the previous run", c.cleanPrevious}}
	if c.cfg.BuildFrom != "" {
		steps = append(steps, step{"build " + strings.Join(c.cfg.built(), ", "), c.build})
	}
	real := c.cfg.NodeMode == NodesReal
	if real {
		steps = append(steps,
			step{"start the local cloud (hosts on " + c.cfg.Bridge + ")", c.startCloud},
			step{"start the image registry and push " + plural(len(Images), "image"), c.startRegistry},
		)
	} else {
		steps = append(steps, step{"start the local cloud", c.startCloud})
	}
	steps = append(steps,
		step{"start etcd and kube-apiserver", c.startControlPlane},
		step{"start kube-controller-manager", func(ctx context.Context) (string, error) {
			args := append([]string{
				"--allocate-node-cidrs=true",
				"--cluster-cidr=" + c.cfg.ClusterCIDR.String(),
				"--node-cidr-mask-size=" + strconv.Itoa(nodeCIDRMaskSize),
				"--service-cluster-ip-range=" + c.cfg.ServiceCIDR.String(),
				"--use-service-account-credentials=true",
			}, c.cfg.ControllerManagerArgs...)
			_, err := c.Env.StartControllerManager(ctx, args...)
			return "", err
		}},
		step{"start kube-scheduler", func(ctx context.Context) (string, error) {
			_, err := c.Env.StartScheduler(ctx)
			return "", err
		}},
	)
	if h := c.cfg.Hybrid; h != nil {
		n += h.Nodes
		if h.UnownedNode {
			n++
		}
		steps = append(steps,
			step{"start the second local cloud (hosts on " + h.Bridge + ", a peer of " + c.cfg.Bridge + ")", c.startSecondCloud})
	}
	if real {
		steps = append(steps, step{"create " + plural(n, "host instance") + " booting nephele node boot", c.createNodes})
	} else {
		steps = append(steps,
			step{"start kwok (simulated kubelets)", func(ctx context.Context) (string, error) {
				_, err := c.Env.StartKwok(ctx)
				return "", err
			}},
			step{"create " + plural(n, "instance") + " and register their Nodes", c.registerKwokNodes},
			step{"start the node agent", c.startNodeAgent},
		)
	}
	steps = append(steps, step{"wait for " + plural(n, "node") + " to register and be Ready", c.waitNodesReady})
	for _, s := range steps {
		if err := c.cfg.Progress.Step(ctx, s.name, s.fn); err != nil {
			return err
		}
	}
	if c.cfg.DeferCCM {
		return nil
	}
	return c.StartCCM(ctx)
}

// cleanPrevious removes what an earlier run in the directory left: on the machine, from
// the local cloud's journal (hosts and their processes, namespaces, mounts, cgroups, the
// bridge, routes, the forward chain), and in the directory (the control plane, the
// cloud's state, the node configurations). Each run starts a fresh cloud: its hosts
// would otherwise boot against the old control plane's credentials.
func (c *Cluster) cleanPrevious(ctx context.Context) (string, error) {
	recorded, err := Cleanup(ctx, c.cfg.Dir)
	if err != nil {
		return "", err
	}
	for _, d := range []string{c.cfg.runDir(), c.cfg.cloudDir(), c.cfg.secondCloudDir(), c.cfg.nodesDir(), c.cfg.registryDir()} {
		if err := os.RemoveAll(d); err != nil {
			return "", fmt.Errorf("remove the previous run's %s: %w", d, err)
		}
	}
	for _, d := range []string{c.cfg.cloudDir(), c.cfg.nodesDir(), c.cfg.registryDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	if recorded == "" {
		return "nothing left on the machine", nil
	}
	return "removed what a killed run left on the machine: " + recorded, nil
}

// startControlPlane starts etcd and kube-apiserver on the bridge's address.
func (c *Cluster) startControlPlane(ctx context.Context) (string, error) {
	env, err := controlplane.Start(ctx, controlplane.Options{
		Dir:           c.cfg.runDir(),
		BinDir:        c.cfg.BinDir,
		Address:       c.Gateway,
		ServiceCIDR:   c.cfg.ServiceCIDR,
		APIServerArgs: c.cfg.APIServerArgs,
	})
	if err != nil {
		return "", err
	}
	c.Env = env
	return env.APIServerURL, nil
}

// Wait blocks until ctx ends (nil) or a component stops on its own (an error naming it,
// with the end of its log).
func (c *Cluster) Wait(ctx context.Context) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var agentDone <-chan struct{} // nil, never ready, without kwok nodes
	if c.agent != nil {
		agentDone = c.agent.done
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-agentDone:
			return fmt.Errorf("the node agent stopped: %v; its log: %s", c.agent.err, c.agent.log.Name())
		case <-tick.C:
		}
		procs := []*controlplane.Process{c.cloudProc, c.CCM}
		if c.Second != nil {
			procs = append(procs, c.Second.proc)
		}
		if c.Env != nil {
			procs = append(procs, c.Env.Processes()...)
		}
		for _, p := range procs {
			if p == nil {
				continue
			}
			select {
			case <-p.Done():
				return fmt.Errorf("%s exited (%v); the end of %s:\n%s", p.Name(), p.Err(), p.LogPath(), p.LogTail(15))
			default:
			}
		}
	}
}

// LogDirs are where the cluster's logs are: the control plane's and the
// cloud-controller-manager's, the local cloud's, and the nodes' (while they run, in
// their hosts' directories; after Stop, in Dir/nodes).
func (c *Cluster) LogDirs() []string {
	dirs := []string{c.cfg.runDir(), c.cfg.cloudDir(), c.cfg.hostDir(), c.cfg.nodesDir(), c.cfg.registryDir()}
	if c.cfg.Hybrid != nil {
		dirs = append(dirs, c.cfg.secondCloudDir(), c.cfg.secondHostDir())
	}
	return dirs
}

// plural says "1 node", "2 nodes".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

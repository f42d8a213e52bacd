package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/waitfor"
	"github.com/nephele-dev/nephele/manager/clouds"
	"github.com/nephele-dev/nephele/providers/local"
)

// StartCCM starts nephele's cloud-controller-manager with the local provider, where
// Config.CCM says, and waits until it has initialized every node. Start calls it unless
// Config.DeferCCM is set.
func (c *Cluster) StartCCM(ctx context.Context) error {
	if c.ccmStarted {
		return errors.New("localcluster: the cloud-controller-manager is already running")
	}
	c.ccmStarted = true
	name, start := "start cloud-controller-manager", c.startCCM
	switch c.cfg.CCM {
	case CCMInCluster:
		name, start = "install the cloud-controller-manager in the cluster (kubectl apply)", c.startInClusterCCM
	case CCMOperator:
		name, start = "install nephele-operator and a CloudControllerManager (kubectl apply)", c.startOperatorCCM
	}
	if err := c.cfg.Progress.Step(ctx, name, start); err != nil {
		return err
	}
	if err := c.cfg.Progress.Step(ctx, "wait for the CCM to initialize "+plural(len(c.Nodes), "node"), c.waitNodesInitialized); err != nil {
		return err
	}
	if c.cfg.NodeMode != NodesReal {
		return nil // kwok nodes run no pods
	}
	// After the CCM: pods schedule only on initialized nodes.
	step := "deploy cluster DNS (CoreDNS) and wait until it is ready"
	if c.migratingRoutes() {
		step = "deploy cluster DNS (CoreDNS)"
	}
	if err := c.cfg.Progress.Step(ctx, step, c.deployDNS); err != nil {
		return err
	}
	if !c.cfg.Volumes {
		return nil
	}
	if c.cfg.CCM == CCMOperator {
		return c.cfg.Progress.Step(ctx, "wait for the CSI driver nephele-operator runs (spec.volumes)", c.waitOperatorCSI)
	}
	return c.cfg.Progress.Step(ctx, "install the CSI driver and the default StorageClass (kubectl apply)", c.deployCSI)
}

// migratingRoutes reports whether the CCM runs with leader migration: then its route
// controller waits for a migration lease that another controller manager may hold, and
// pods have no routes until one of them makes them.
func (c *Cluster) migratingRoutes() bool {
	return slices.ContainsFunc(c.cfg.CCMArgs, func(a string) bool {
		if a == "--enable-leader-migration" {
			return true
		}
		v, ok := strings.CutPrefix(a, "--enable-leader-migration=")
		on, err := strconv.ParseBool(v)
		return ok && err == nil && on
	})
}

func (c *Cluster) startCCM(ctx context.Context) (string, error) {
	cloudArgs, err := c.ccmCloudArgs()
	if err != nil {
		return "", err
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	args := append(cloudArgs,
		"--kubeconfig="+c.Env.Kubeconfig,
		"--authentication-kubeconfig="+c.Env.Kubeconfig,
		"--authorization-kubeconfig="+c.Env.Kubeconfig,
		"--cluster-name="+c.cfg.ClusterName,
		// Routes: every node's pod CIDR to its instance, the only way pods of different
		// nodes reach each other.
		"--configure-cloud-routes=true",
		"--cluster-cidr="+c.cfg.ClusterCIDR.String(),
		// As in production: the fence on cloud calls and `nephele migrate` rely on it,
		// and a fresh control plane has no lease to wait for.
		"--leader-elect=true",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
	)
	args = append(args, c.cfg.CCMArgs...)
	p, err := c.Env.StartProcess("cloud-controller-manager", args...)
	if err != nil {
		return "", err
	}
	c.CCM = p
	c.CCMURL = "https://127.0.0.1:" + strconv.Itoa(port)
	err = WaitForCCM(ctx, p, c.CCMURL)
	return c.CCMURL, err
}

// ccmCloudArgs are the CCM's flags naming its cloud: the local provider and its cloud
// config, or in a hybrid cluster --clouds-config with both clouds, the first the
// default (its nodes declare nothing, and it adopts them).
func (c *Cluster) ccmCloudArgs() ([]string, error) {
	if c.Second == nil {
		cloudConfig, err := c.writeCloudConfig()
		if err != nil {
			return nil, err
		}
		return []string{"--cloud-provider=local", "--cloud-config=" + cloudConfig}, nil
	}
	f := clouds.File{APIVersion: clouds.APIVersion, Kind: clouds.Kind}
	for _, lc := range c.Clouds() {
		path, err := writeCloudConfig(lc)
		if err != nil {
			return nil, err
		}
		f.Clouds = append(f.Clouds, clouds.Cloud{Name: lc.Name, Provider: local.ProviderName, CloudConfig: path,
			LoadBalancerClass: lc.Class(), Default: lc == c.first})
	}
	data, err := f.Marshal()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(c.cfg.cloudDir(), "clouds.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return nil, fmt.Errorf("write the clouds config: %w", err)
	}
	return []string{"--clouds-config=" + path}, nil
}

// CCMStarted reports whether the cloud-controller-manager was started: by Start, or by
// StartCCM on a cluster started with Config.DeferCCM.
func (c *Cluster) CCMStarted() bool { return c.ccmStarted }

// waitNodesInitialized waits until the CCM has initialized every node.
func (c *Cluster) waitNodesInitialized(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout(ctx))
	defer cancel()
	var pending []string
	owned := 0
	initialized := func(ctx context.Context) error {
		pending, owned = pending[:0], 0
		for _, n := range c.Nodes {
			if !n.Owned() {
				continue // nobody initializes it
			}
			owned++
			node, err := c.Env.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if ok, why := Initialized(node); !ok {
				pending = append(pending, n.Name+": "+why)
			}
		}
		if len(pending) > 0 {
			return errors.New(strings.Join(pending, "; "))
		}
		return nil
	}
	var err error
	if c.CCM != nil {
		err = c.CCM.WaitFor(ctx, "the nodes to be initialized", initialized)
	} else if err = waitfor.Condition(ctx, startTimeout(ctx), initialized); err != nil {
		err = errors.Join(fmt.Errorf("the nodes to be initialized: %w", err), c.ccmPodDiagnostics(context.WithoutCancel(ctx), c.CCMManifests().Namespace))
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d/%d", owned, owned), nil
}

// Initialized reports whether the CCM has initialized n, and if not, what is missing:
// the uninitialized taint gone, a provider ID of the local cloud it declares (local://
// without a declaration), zone, region and instance type.
func Initialized(n *corev1.Node) (bool, string) {
	for _, t := range n.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return false, "still tainted " + cloudproviderapi.TaintExternalCloudProvider
		}
	}
	scheme := FirstCloud
	if p := n.Labels[cloud.LabelNodePlatform]; p != "" {
		scheme = p
	}
	if !strings.HasPrefix(n.Spec.ProviderID, scheme+"://") {
		return false, fmt.Sprintf("provider ID %q, want %s://...", n.Spec.ProviderID, scheme)
	}
	for _, l := range []string{corev1.LabelTopologyZone, corev1.LabelTopologyRegion, corev1.LabelInstanceTypeStable} {
		if n.Labels[l] == "" {
			return false, "no label " + l
		}
	}
	return true, ""
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

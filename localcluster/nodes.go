package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/internal/procstat"
	"github.com/nephele-dev/nephele/internal/waitfor"
	"github.com/nephele-dev/nephele/kubenode"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/hosts"
)

// createNodes writes each node's configuration and credentials and creates its host
// instance, which boots `nephele node boot` with it.
func (c *Cluster) createNodes(ctx context.Context) (string, error) {
	proxyCert, proxyKey, err := c.Env.IssueClientCertificate("kube-proxy", "system:kube-proxy")
	if err != nil {
		return "", err
	}
	dns, err := ClusterDNSAddress(c.cfg.ServiceCIDR)
	if err != nil {
		return "", err
	}
	type planned struct {
		name, platform, zone string
		cloud                *LocalCloud
	}
	var plan []planned
	for i := range c.cfg.Nodes {
		plan = append(plan, planned{name: NodeName(i), zone: c.cfg.nodeZone(i), cloud: c.first})
	}
	if h := c.cfg.Hybrid; h != nil {
		for i := range h.Nodes {
			plan = append(plan, planned{name: SecondCloudNodeName(i), platform: SecondCloud, cloud: c.Second})
		}
		if h.UnownedNode {
			plan = append(plan, planned{name: UnownedNodeName, platform: UnownedPlatform, cloud: c.first})
		}
	}
	var created []string
	for _, pn := range plan {
		name := pn.name
		// The Node authorizer and NodeRestriction know a kubelet by this identity.
		cert, key, err := c.Env.IssueClientCertificate("kubelet-"+name, "system:node:"+name, "system:nodes")
		if err != nil {
			return "", err
		}
		cfg := kubenode.Config{
			APIVersion: kubenode.APIVersion,
			Kind:       kubenode.Kind,
			// The node's name, address, directory and cgroup come from the host.
			BinDir: c.cfg.BinDir,
			APIServer: kubenode.APIServer{
				URL:    c.Env.APIServerURL,
				CAFile: c.Env.CAFile(),
			},
			Kubelet:     kubenode.Credentials{ClientCertFile: cert, ClientKeyFile: key},
			KubeProxy:   kubenode.Credentials{ClientCertFile: proxyCert, ClientKeyFile: proxyKey},
			ClusterCIDR: c.cfg.ClusterCIDR.String(),
			// The DNS add-on's Service (deployDNS), for pods and, through the node's
			// resolv.conf, for pods of DNS policy Default: no lookup leaves the machine.
			ClusterDNS:    []string{dns.String()},
			ClusterDomain: ClusterDomain,
			// Every image, the sandbox's too, is pulled from the cluster's registry.
			Registries:   c.nodeRegistries(),
			SandboxImage: images.Pause.Ref(images.DefaultVersion),
		}
		if pn.platform != "" {
			// Declared when the Node registers, as KEP-5778 asks (docs/hybrid.md):
			// the one platform label NodeRestriction lets a kubelet set on itself.
			cfg.NodeLabels = map[string]string{cloud.LabelNodePlatform: pn.platform}
		}
		data, err := yaml.Marshal(cfg)
		if err != nil {
			return "", fmt.Errorf("node %s: %w", name, err)
		}
		path := filepath.Join(c.cfg.nodesDir(), name+".yaml")
		if err := os.WriteFile(path, append([]byte("# NodeConfig of "+name+", written by nephele's localcluster.\n"), data...), 0o644); err != nil {
			return "", fmt.Errorf("node %s: %w", name, err)
		}
		inst, err := pn.cloud.Client.CreateInstance(ctx, api.InstanceSpec{
			Name:        name,
			Kind:        api.InstanceHost,
			Zone:        pn.zone,
			BootCommand: []string{filepath.Join(c.cfg.BinDir, "nephele"), "node", "boot", "--config", path},
		})
		if err != nil {
			return "", fmt.Errorf("create host instance %s: %w", name, err)
		}
		addr, err := InternalIP(inst)
		if err != nil {
			return "", err
		}
		c.Nodes = append(c.Nodes, Node{Name: name, InstanceID: inst.ID, Address: addr, Cloud: pn.cloud.Name, Platform: pn.platform})
		created = append(created, inst.ID+" "+addr.String())
	}
	return strings.Join(created, ", "), nil
}

// InternalIP returns an instance's InternalIP address.
func InternalIP(inst *api.Instance) (netip.Addr, error) {
	for _, a := range inst.Addresses {
		if a.Type == api.AddressInternalIP {
			addr, err := netip.ParseAddr(a.Address)
			if err != nil {
				return netip.Addr{}, fmt.Errorf("instance %s (%s): InternalIP %q: %w", inst.Name, inst.ID, a.Address, err)
			}
			return addr, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("instance %s (%s) has no InternalIP address", inst.Name, inst.ID)
}

// waitNodesReady waits until every node has registered its Node, been given a pod CIDR
// and turned Ready (its CNI configured for that range). On failure it says where each
// node is, with the end of its console.
func (c *Cluster) waitNodesReady(ctx context.Context) (string, error) {
	var ready []string
	err := waitfor.Condition(ctx, startTimeout(ctx), func(ctx context.Context) error {
		ready = ready[:0]
		var pending []string
		for _, n := range c.Nodes {
			node, err := c.Env.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				pending = append(pending, n.Name+": not registered")
			case err != nil:
				return err
			case !IsReady(node):
				pending = append(pending, fmt.Sprintf("%s: not Ready (pod CIDR %q)", n.Name, node.Spec.PodCIDR))
			default:
				ready = append(ready, n.Name+" "+node.Spec.PodCIDR)
			}
		}
		if len(pending) > 0 {
			return errors.New(strings.Join(pending, "; "))
		}
		return nil
	})
	if err != nil && c.cfg.NodeMode == NodesReal {
		err = errors.Join(err, c.nodeDiagnostics(context.WithoutCancel(ctx)))
	}
	if err != nil {
		return "", err
	}
	return strings.Join(ready, ", "), nil
}

// startTimeout is how long a wait of Start may take when ctx has no deadline.
func startTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d)
	}
	return defaultStartTimeout
}

// nodeDiagnostics describes each node's host and runtime, for a node that did not come up.
func (c *Cluster) nodeDiagnostics(ctx context.Context) error {
	var b strings.Builder
	for _, n := range c.Nodes {
		fmt.Fprintf(&b, "\nnode %s (%s):", n.Name, n.InstanceID)
		dir := hosts.HostDir(c.cloudOf(n).hostDir, n.InstanceID)
		if st, err := kubenode.ReadStatus(filepath.Join(dir, "node", "status.json")); err == nil {
			fmt.Fprintf(&b, " runtime phase %s", st.Phase)
			if st.Error != "" {
				fmt.Fprintf(&b, ", error: %s", st.Error)
			}
		}
		if out, err := c.cloudOf(n).Client.Console(ctx, n.InstanceID, 1500); err == nil {
			fmt.Fprintf(&b, "\n  console (%s):\n    %s", out.Path, strings.ReplaceAll(strings.TrimSpace(out.Output), "\n", "\n    "))
		}
		fmt.Fprintf(&b, "\n  logs: %s", filepath.Join(dir, "node", "logs"))
	}
	return errors.New(strings.TrimPrefix(b.String(), "\n"))
}

// IsReady reports whether node's Ready condition is True.
func IsReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NodeStatus reads the status the node runtime of real node name reports in its host: its
// phase, the process IDs of containerd, kubelet and kube-proxy, and when each boot step
// was done. The runtime reports PIDs as its host sees them (a PID namespace of its own);
// NodeStatus answers the machine's, 0 for a process that has ended.
func (c *Cluster) NodeStatus(name string) (*kubenode.Status, error) {
	for _, n := range c.Nodes {
		if n.Name != name {
			continue
		}
		dir := c.cloudOf(n).hostDir
		st, err := kubenode.ReadStatus(filepath.Join(hosts.HostDir(dir, n.InstanceID), "node", "status.json"))
		if err != nil {
			return nil, err
		}
		// None when the host is down: then every PID reads 0.
		machine, _ := procstat.ByInnerPID(hosts.MountNSPath(dir, n.InstanceID))
		for comp, pid := range st.PIDs {
			st.PIDs[comp] = machine[pid] // 0 when it ended
		}
		return st, nil
	}
	return nil, fmt.Errorf("localcluster: no node %s", name)
}

package localcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/internal/nodeagent"
	"github.com/nephele-dev/nephele/localcloud/api"
)

// registerKwokNodes creates an instance in the local cloud for every kwok node (the
// cloud picks its zone, type and loopback address, as a real one does) and registers its
// Node the way a kubelet with --cloud-provider=external and --node-ip does. kwok then
// keeps the Nodes Ready.
func (c *Cluster) registerKwokNodes(ctx context.Context) (string, error) {
	var created []string
	for i := range c.cfg.Nodes {
		name := NodeName(i)
		inst, err := c.Cloud.CreateInstance(ctx, api.InstanceSpec{Name: name})
		if err != nil {
			return "", fmt.Errorf("create instance %s: %w", name, err)
		}
		addr, err := InternalIP(inst)
		if err != nil {
			return "", err
		}
		_, err = c.Env.Client.CoreV1().Nodes().Create(ctx, KubeletNode(name, addr), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("register Node %s: %w", name, err)
		}
		c.Nodes = append(c.Nodes, Node{Name: name, InstanceID: inst.ID, Address: addr})
		created = append(created, inst.ID+" "+addr.String())
	}
	return strings.Join(created, ", "), nil
}

// KubeletNode is the Node a kubelet with --cloud-provider=external --node-ip=addr
// registers: tainted uninitialized until the CCM has initialized it, the node IP in the
// provided-node-ip annotation and, until the cloud's addresses replace them, as its
// InternalIP beside its host name. No provider ID: the CCM sets it.
func KubeletNode(name string, addr netip.Addr) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				corev1.LabelHostname:   name,
				corev1.LabelOSStable:   "linux",
				corev1.LabelArchStable: runtime.GOARCH,
			},
			Annotations: map[string]string{
				cloudproviderapi.AnnotationAlphaProvidedIPAddr: addr.String(),
			},
		},
		Spec: corev1.NodeSpec{
			Taints: []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: addr.String()},
				{Type: corev1.NodeHostName, Address: name},
			},
		},
	}
}

// nodeAgent is the running node agent of a kwok cluster: the goroutine that runs it is
// the cluster's, stopped by Stop.
type nodeAgent struct {
	agent *nodeagent.Agent
	stop  context.CancelFunc
	done  chan struct{} // closed when Run returned, with err set
	err   error
	log   *os.File
}

// startNodeAgent runs the node agent for every kwok node, logging to Dir/run/node-agent.log:
// it answers on every Service's node ports on each node's address, where kube-proxy and a
// workload would on a real node.
func (c *Cluster) startNodeAgent(ctx context.Context) (string, error) {
	f, err := os.OpenFile(filepath.Join(c.cfg.runDir(), "node-agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", fmt.Errorf("node agent log: %w", err)
	}
	nodes := make([]nodeagent.Node, len(c.Nodes))
	for i, n := range c.Nodes {
		nodes[i] = nodeagent.Node{Name: n.Name, Address: n.Address}
	}
	agent, err := nodeagent.New(nodeagent.Config{
		Client: c.Env.Client,
		Nodes:  nodes,
		Logger: logr.FromSlogHandler(slog.NewTextHandler(f, nil)),
	})
	if err != nil {
		return "", errors.Join(err, f.Close())
	}
	// The agent outlives Start's context: it runs until Stop.
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	a := &nodeAgent{agent: agent, stop: stop, done: make(chan struct{}), log: f}
	c.agent = a
	go func() {
		defer close(a.done)
		a.err = agent.Run(runCtx)
	}()
	select {
	case <-agent.Ready():
	case <-a.done:
		return "", fmt.Errorf("node agent stopped: %w", a.err)
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Address.String()
	}
	return "on " + strings.Join(addrs, ", "), nil
}

// stopNodeAgent stops the node agent, waits for its goroutine and closes its log.
func (c *Cluster) stopNodeAgent(context.Context) (string, error) {
	a := c.agent
	a.stop()
	<-a.done
	return "", errors.Join(a.err, a.log.Close())
}

package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers/nodeinit"
	"github.com/nephele-dev/nephele/internal/nodeagent"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcluster"
)

// registerNodes makes sure every node has a running instance in the local cloud (kept
// from a previous run when there is one) and registers its Node the way a kubelet with
// --cloud-provider=external and --node-ip does.
func (c *cluster) registerNodes(ctx context.Context) (string, error) {
	var created, kept int
	for i := range c.opts.nodes {
		name := localcluster.NodeName(i)
		inst, fresh, err := c.ensureInstance(ctx, name)
		if err != nil {
			return "", err
		}
		if fresh {
			created++
		} else {
			kept++
		}
		addr, err := localcluster.InternalIP(inst)
		if err != nil {
			return "", err
		}
		if _, err := c.env.Client.CoreV1().Nodes().Create(ctx, kubeletNode(name, addr), metav1.CreateOptions{}); err != nil {
			return "", fmt.Errorf("register Node %s: %w", name, err)
		}
		c.nodes = append(c.nodes, nodeagent.Node{Name: name, Address: addr})
	}
	var parts []string
	if created > 0 {
		parts = append(parts, plural(created, "instance")+" created")
	}
	if kept > 0 {
		parts = append(parts, plural(kept, "instance")+" kept")
	}
	return strings.Join(parts, ", "), nil
}

// ensureInstance returns the running instance named name, creating it (fresh) when the
// cloud has none, starting it when it is stopped and replacing it when it is terminated.
func (c *cluster) ensureInstance(ctx context.Context, name string) (inst *api.Instance, fresh bool, err error) {
	inst, err = c.cloud.GetInstanceByName(ctx, name)
	switch {
	case errors.Is(err, cloud.ErrNotFound):
	case err != nil:
		return nil, false, fmt.Errorf("look up instance %s: %w", name, err)
	case inst.State == api.InstanceRunning:
		return inst, false, nil
	case inst.State == api.InstanceStopped:
		started, err := c.cloud.StartInstance(ctx, inst.ID)
		if err != nil {
			return nil, false, fmt.Errorf("start instance %s (%s): %w", name, inst.ID, err)
		}
		return started, false, nil
	default: // terminated: it cannot run again
		if err := c.cloud.DeleteInstance(ctx, inst.ID); err != nil && !errors.Is(err, cloud.ErrNotFound) {
			return nil, false, fmt.Errorf("delete terminated instance %s (%s): %w", name, inst.ID, err)
		}
	}
	// The cloud picks the zone, the instance type and the address, as a real one does.
	inst, err = c.cloud.CreateInstance(ctx, api.InstanceSpec{Name: name})
	if err != nil {
		return nil, false, fmt.Errorf("create instance %s: %w", name, err)
	}
	return inst, true, nil
}

// kubeletNode is the Node a kubelet with --cloud-provider=external --node-ip=addr
// registers: tainted uninitialized until the CCM has initialized it, the node IP in the
// provided-node-ip annotation and, until the cloud's addresses replace them, as its
// InternalIP beside its host name. No provider ID: the CCM sets it.
func kubeletNode(name string, addr netip.Addr) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				corev1.LabelHostname:   name,
				corev1.LabelOSStable:   "linux",
				corev1.LabelArchStable: runtime.GOARCH,
			},
			Annotations: map[string]string{
				nodeinit.AnnotationProvidedNodeIP: addr.String(),
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

// waitNodesInitialized waits until the CCM has initialized every node.
func (c *cluster) waitNodesInitialized(ctx context.Context) (string, error) {
	err := c.ccmProc.WaitFor(ctx, "the nodes to be initialized", func(ctx context.Context) error {
		var pending []string
		for _, n := range c.nodes {
			node, err := c.env.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if ok, why := localcluster.Initialized(node); !ok {
				pending = append(pending, n.Name+": "+why)
			}
		}
		if len(pending) > 0 {
			return errors.New(strings.Join(pending, "; "))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d/%d", len(c.nodes), len(c.nodes)), nil
}

package route

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// updateCondition sets node's NetworkUnavailable condition to what the plan's outcome
// calls for, unless it already has that status and reason.
func (c *Controller) updateCondition(ctx context.Context, node *corev1.Node, p *nodePlan, createFailed bool) error {
	cond, ok := p.wantCondition(createFailed)
	if !ok || conditionHolds(node, cond) {
		return nil
	}
	now := metav1.NewTime(c.now())
	cond.LastHeartbeatTime = now
	cond.LastTransitionTime = now
	if cur := networkCondition(node); cur != nil && cur.Status == cond.Status {
		cond.LastTransitionTime = cur.LastTransitionTime
	}
	// Only on a change, so a node stuck in one state gets one event, not one per retry.
	c.recordCauses(node, p)
	if err := c.patch(ctx, node.Name, cond); err != nil {
		return fmt.Errorf("setting condition %s=%s on node %q: %w", cond.Type, cond.Status, node.Name, err)
	}
	c.log.V(2).Info("Set node condition", "node", node.Name, "type", cond.Type, "status", cond.Status, "reason", cond.Reason)
	return nil
}

// recordCauses records an Event for each reason the node's pod CIDRs cannot be routed.
func (c *Controller) recordCauses(node *corev1.Node, p *nodePlan) {
	for _, s := range p.invalid {
		c.recorder.Eventf(node, corev1.EventTypeWarning, EventInvalidPodCIDR, "Pod CIDR %q is not a valid CIDR; no route is created for it", s)
	}
	for _, cidr := range p.outside {
		c.recorder.Eventf(node, corev1.EventTypeWarning, EventPodCIDROutsideClusterCIDR,
			"Pod CIDR %s is outside the cluster CIDRs %v; no route is created for it (check --cluster-cidr)", cidr, c.clusterCIDRs)
	}
	for _, cf := range p.conflicts {
		c.recorder.Eventf(node, corev1.EventTypeWarning, EventPodCIDRConflict,
			"Pod CIDR %s is also claimed by node %q, whose route is kept; no route is created for this node", cf.cidr, cf.owner)
	}
}

// nodeStatusPatcher is the part of the Nodes client patchCondition needs.
type nodeStatusPatcher interface {
	PatchStatus(ctx context.Context, nodeName string, data []byte) (*corev1.Node, error)
}

// patchCondition sets one condition with a strategic merge patch of the status
// subresource. Conditions merge by type, so other writers' conditions are untouched and
// no read-modify-write race is possible.
func patchCondition(ctx context.Context, nodes nodeStatusPatcher, name string, cond corev1.NodeCondition) error {
	data, err := json.Marshal(map[string]any{
		"status": map[string]any{"conditions": []corev1.NodeCondition{cond}},
	})
	if err != nil {
		return err
	}
	_, err = nodes.PatchStatus(ctx, name, data)
	return err
}

// patch writes cond to the node called name, holding one of the write slots.
func (c *Controller) patch(ctx context.Context, name string, cond corev1.NodeCondition) error {
	select {
	case c.writes <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.writes }()
	return patchCondition(ctx, c.client.CoreV1().Nodes(), name, cond)
}

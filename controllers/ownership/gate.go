package ownership

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/promreg"
)

// EventNotOwned is the reason of the Event a controller records on a node it leaves
// alone because its CCM does not own it.
const EventNotOwned = "NotOwned"

// Gate decides, for one controller, which nodes it acts on.
type Gate struct {
	policy cloud.NodeOwnership
	// everyNode is policy.OwnsEveryNode(): then Owns answers without deciding or
	// locking, which keeps the default free on the hot paths (a load balancer
	// controller's every node update).
	everyNode  bool
	controller string
	// recorder records the NotOwned Events; nil records none.
	recorder record.EventRecorder
	skipped  *prometheus.CounterVec

	mu sync.Mutex
	// told holds the nodes the controller has recorded a NotOwned Event on, with the
	// reason, so a node is told once per reason, not on every look.
	told map[types.UID]string
}

// New returns the Gate of the controller called controller. recorder, when not nil,
// records its NotOwned Events: the controllers a user asks about a node that is not
// theirs (initialization, lifecycle) pass one, the others only count, so a cluster with
// thousands of another cloud's nodes does not get four Events for each at every start.
// reg (which may be nil) gets the skip counter.
func New(policy cloud.NodeOwnership, controller string, recorder record.EventRecorder, reg prometheus.Registerer) (*Gate, error) {
	if err := policy.Validate(); err != nil {
		return nil, err
	}
	skipped, err := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nephele_node_ownership_skipped_total",
		Help: "Nodes a controller left alone because its CCM does not own them (KEP-5778's cloudprovider_node_ownership_skipped_total), by controller and reason; each node is counted once per controller and reason.",
	}, []string{"controller", "reason"}))
	if err != nil {
		return nil, fmt.Errorf("node ownership: %w", err)
	}
	return &Gate{policy: policy, everyNode: policy.OwnsEveryNode(), controller: controller, recorder: recorder, skipped: skipped, told: map[types.UID]string{}}, nil
}

// Owns reports whether the controller may act on node. For a node it may not, it
// records a NotOwned Event and counts the skip the first time (per reason).
func (g *Gate) Owns(node *corev1.Node) bool {
	if g.everyNode {
		return true
	}
	v := g.policy.Decide(node)
	if v.Owned {
		g.forget(node.UID)
		return true
	}
	g.mu.Lock()
	first := g.told[node.UID] != v.Reason
	g.told[node.UID] = v.Reason
	g.mu.Unlock()
	if first {
		g.skipped.WithLabelValues(g.controller, v.Reason).Inc()
		// Another cloud of the same manager owns it (its own controller acts on it), or
		// the manager's default cloud tells about it.
		if g.recorder != nil && !g.policy.Quiet && !g.policy.OwnedBySibling(node) {
			g.recorder.Eventf(node, corev1.EventTypeNormal, EventNotOwned, "%s leaves this node alone: %s", g.controller, v.Detail())
		}
	}
	return false
}

// Forget drops what the Gate remembers of a deleted node: obj is what an informer's
// delete handler gets, a Node or a tombstone holding one.
func (g *Gate) Forget(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if node, ok := obj.(*corev1.Node); ok && node != nil {
		g.forget(node.UID)
	}
}

func (g *Gate) forget(uid types.UID) {
	g.mu.Lock()
	delete(g.told, uid)
	g.mu.Unlock()
}

// Changed reports whether an update changed what ownership is decided from: the
// provider ID or a platform label. Controllers that queue nodes only on some changes
// queue on these too, so a node declared (or claimed) later is acted on.
func Changed(old, node *corev1.Node) bool {
	return old.Spec.ProviderID != node.Spec.ProviderID ||
		old.Labels[cloud.LabelPlatform] != node.Labels[cloud.LabelPlatform] ||
		old.Labels[cloud.LabelNodePlatform] != node.Labels[cloud.LabelNodePlatform]
}

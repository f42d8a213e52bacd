package route

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"
)

// orphanKey is the work-queue key for routes inside the cluster CIDRs that name no
// target node. No Node can have an empty name, so the key cannot clash with one.
const orphanKey = ""

// Reasons and messages of the NetworkUnavailable condition, as upstream writes them so
// that tools reading the condition keep working.
const (
	reasonRouteCreated   = "RouteCreated"
	reasonNoRouteCreated = "NoRouteCreated"
	messageRouteCreated  = "RouteController created a route"
	messageNoRoute       = "RouteController failed to create a route"
)

// create is one route to create.
type create struct {
	hint  string
	route cloud.Route
}

// conflict is a desired pod CIDR whose route belongs to another node that still claims it.
type conflict struct {
	cidr  netip.Prefix
	owner string
}

// nodePlan is what one node (or the orphan key) needs done to its routes, computed from
// the Node and the route index alone.
type nodePlan struct {
	// deletes go first: a replaced route may share its name hint with its successor.
	deletes []cloud.Route
	creates []create
	// exists is false when the Node is gone (or the key is the orphan key).
	exists bool
	// want are the pod CIDRs that should be routed, in the node's order.
	want []netip.Prefix
	// outside and invalid are pod CIDRs that cannot be routed.
	outside   []netip.Prefix
	invalid   []string
	conflicts []conflict
	// hadRoutes is set when the node has no pod CIDR but had routes, which are deleted.
	hadRoutes bool
}

// empty reports whether the plan has no cloud operation.
func (p *nodePlan) empty() bool { return len(p.deletes) == 0 && len(p.creates) == 0 }

// wantCondition returns the NetworkUnavailable condition the node should have once the
// plan has run, given whether some route could not be created; ok is false when the
// controller leaves the condition alone (no pod CIDR and no route: nothing to say yet).
func (p *nodePlan) wantCondition(createFailed bool) (cond corev1.NodeCondition, ok bool) {
	if !p.exists {
		return corev1.NodeCondition{}, false
	}
	noRoute := func(msg string) (corev1.NodeCondition, bool) {
		return corev1.NodeCondition{
			Type:    corev1.NodeNetworkUnavailable,
			Status:  corev1.ConditionTrue,
			Reason:  reasonNoRouteCreated,
			Message: msg,
		}, true
	}
	switch {
	case createFailed:
		return noRoute(messageNoRoute)
	case len(p.invalid) > 0:
		return noRoute(fmt.Sprintf("%s: pod CIDR %q is not a valid CIDR", messageNoRoute, p.invalid[0]))
	case len(p.outside) > 0:
		return noRoute(fmt.Sprintf("%s: pod CIDR %s is outside the cluster CIDRs", messageNoRoute, p.outside[0]))
	case len(p.conflicts) > 0:
		c := p.conflicts[0]
		return noRoute(fmt.Sprintf("%s: pod CIDR %s is also claimed by node %q", messageNoRoute, c.cidr, c.owner))
	case len(p.want) > 0:
		return corev1.NodeCondition{
			Type:    corev1.NodeNetworkUnavailable,
			Status:  corev1.ConditionFalse,
			Reason:  reasonRouteCreated,
			Message: messageRouteCreated,
		}, true
	case p.hadRoutes:
		return noRoute(messageNoRoute + ": the node has no pod CIDR")
	}
	return corev1.NodeCondition{}, false
}

// conditionHolds reports whether node already has cond's status and reason, in which
// case upstream (and this controller) leave it alone.
func conditionHolds(node *corev1.Node, cond corev1.NodeCondition) bool {
	cur := networkCondition(node)
	return cur != nil && cur.Status == cond.Status && cur.Reason == cond.Reason
}

// networkCondition returns node's NetworkUnavailable condition, or nil.
func networkCondition(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeNetworkUnavailable {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// planner computes node plans against a route index.
type planner struct {
	clusterName  string
	clusterCIDRs []netip.Prefix
	// lookup returns the Node with the given name, or nil when there is none.
	lookup func(name string) *corev1.Node
}

// plan computes what node needs. node is nil when the Node named name is gone; name is
// orphanKey for the routes that name no node.
func (pl *planner) plan(name string, node *corev1.Node, idx *routeIndex) nodePlan {
	existing := idx.byNode[name]
	if node == nil {
		// The node is gone: every route of it inside the cluster CIDRs goes too.
		return nodePlan{deletes: cloneRoutes(existing)}
	}
	p := nodePlan{exists: true}
	for _, s := range podCIDRs(node) {
		prefix, err := netip.ParsePrefix(s)
		if err != nil {
			p.invalid = append(p.invalid, s)
			continue
		}
		prefix = prefix.Masked()
		switch {
		case !pl.inCluster(prefix):
			p.outside = append(p.outside, prefix)
		case !containsPrefix(p.want, prefix):
			p.want = append(p.want, prefix)
		}
	}
	if len(p.want) == 0 && len(p.outside) == 0 && len(p.invalid) == 0 {
		p.hadRoutes = len(existing) > 0
	}

	// have is set for wanted CIDRs that already have a healthy route. Node have at most
	// two pod CIDRs (one per family), so a bit set indexed like want is enough.
	var have uint64
	for _, r := range existing {
		i := indexPrefix(p.want, r.DestinationCIDR.Masked())
		switch {
		case i < 0:
			p.deletes = append(p.deletes, r) // the node no longer owns this CIDR
		case r.Blackhole:
			p.deletes = append(p.deletes, r) // recreated below unless a healthy twin exists
		case r.EnableNodeAddresses && !cloud.SameNodeAddresses(r.TargetNodeAddresses, node.Status.Addresses):
			// The node's addresses changed since the route was made, and the provider
			// routes by them: replace it (upstream's "update", a delete and a create,
			// the only change the contract has; deletes go first).
			p.deletes = append(p.deletes, r)
		case i < 64:
			have |= 1 << i
		}
	}
	for i, cidr := range p.want {
		if i < 64 && have&(1<<i) != 0 {
			continue
		}
		blocked := false
		for _, r := range idx.byCIDR[cidr] {
			if r.TargetNode == name {
				continue
			}
			if owner := pl.lookup(r.TargetNode); owner != nil && claims(owner, cidr) {
				p.conflicts = append(p.conflicts, conflict{cidr: cidr, owner: r.TargetNode})
				blocked = true
				continue
			}
			// The route's target is gone or moved on: it is stale, and it would make the
			// cloud refuse this node's route.
			p.deletes = append(p.deletes, r)
		}
		if blocked {
			continue
		}
		p.creates = append(p.creates, create{
			hint: nameHint(pl.clusterName, node, p.want, i),
			route: cloud.Route{
				TargetNode: name, DestinationCIDR: cidr,
				TargetNodeAddresses: slices.Clone(node.Status.Addresses),
			},
		})
	}
	return p
}

// inCluster reports whether prefix lies wholly inside one of the cluster CIDRs. Upstream
// also claims routes that merely contain a cluster CIDR's first or last address; a route
// wider than the cluster network is never one of ours.
func (pl *planner) inCluster(prefix netip.Prefix) bool {
	return insideAny(pl.clusterCIDRs, prefix)
}

func insideAny(cidrs []netip.Prefix, prefix netip.Prefix) bool {
	for _, c := range cidrs {
		if c.Bits() <= prefix.Bits() && c.Contains(prefix.Addr()) {
			return true
		}
	}
	return false
}

// podCIDRs returns the node's pod CIDRs: spec.podCIDRs, or the older single
// spec.podCIDR when the list is empty.
func podCIDRs(node *corev1.Node) []string {
	if len(node.Spec.PodCIDRs) > 0 {
		return node.Spec.PodCIDRs
	}
	if node.Spec.PodCIDR != "" {
		return []string{node.Spec.PodCIDR}
	}
	return nil
}

// claims reports whether node's pod CIDRs include cidr.
func claims(node *corev1.Node, cidr netip.Prefix) bool {
	for _, s := range podCIDRs(node) {
		if p, err := netip.ParsePrefix(s); err == nil && p.Masked() == cidr {
			return true
		}
	}
	return false
}

// nameHint returns the stable name hint for the route of want[i]:
// "<cluster>-<node UID>-<family>". A node has one pod CIDR per family, so the hint
// stays the same while the node lives however its CIDR list is ordered; a second CIDR
// of one family (which the API refuses) gets its index appended to stay unique.
func nameHint(clusterName string, node *corev1.Node, want []netip.Prefix, i int) string {
	family := "ipv4"
	if want[i].Addr().Is6() {
		family = "ipv6"
	}
	var b strings.Builder
	if clusterName != "" {
		b.WriteString(clusterName)
		b.WriteByte('-')
	}
	b.WriteString(string(node.UID))
	b.WriteByte('-')
	b.WriteString(family)
	for j := range i {
		if want[j].Addr().Is6() == want[i].Addr().Is6() {
			fmt.Fprintf(&b, "-%d", i)
			break
		}
	}
	return b.String()
}

func indexPrefix(ps []netip.Prefix, p netip.Prefix) int {
	for i, q := range ps {
		if q == p {
			return i
		}
	}
	return -1
}

func containsPrefix(ps []netip.Prefix, p netip.Prefix) bool { return indexPrefix(ps, p) >= 0 }

func cloneRoutes(rs []cloud.Route) []cloud.Route {
	if len(rs) == 0 {
		return nil
	}
	return append([]cloud.Route(nil), rs...)
}

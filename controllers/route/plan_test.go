package route

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nephele-dev/nephele/cloud"
)

// nodeWith returns a Node with the given name and pod CIDRs; its UID is "uid-<name>".
func nodeWith(name string, cidrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	n.Spec.PodCIDRs = cidrs
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
	}
	return n
}

// rt returns a route named name sending cidr to node.
func rt(name, node, cidr string) cloud.Route {
	return cloud.Route{Name: name, TargetNode: node, DestinationCIDR: netip.MustParsePrefix(cidr)}
}

func blackhole(r cloud.Route) cloud.Route { r.Blackhole = true; return r }

// via returns r carrying the node addresses ips (InternalIPs), recorded by the provider
// when recorded is set.
func via(r cloud.Route, recorded bool, ips ...string) cloud.Route {
	r.TargetNodeAddresses = internalIPs(ips...)
	r.EnableNodeAddresses = recorded
	return r
}

// withIPs returns n with the InternalIPs ips.
func withIPs(n *corev1.Node, ips ...string) *corev1.Node {
	n.Status.Addresses = internalIPs(ips...)
	return n
}

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

func testPlanner(nodes ...*corev1.Node) *planner {
	byName := map[string]*corev1.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	return &planner{
		clusterName:  "kubernetes",
		clusterCIDRs: prefixes("10.244.0.0/16", "fd00:10:244::/56"),
		lookup:       func(name string) *corev1.Node { return byName[name] },
	}
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name   string
		key    string
		node   *corev1.Node // nil: the node is gone
		others []*corev1.Node
		routes []cloud.Route

		wantDeletes   []cloud.Route
		wantCreates   []create
		wantOutside   []netip.Prefix
		wantInvalid   []string
		wantConflicts []conflict
		// wantReason is the NetworkUnavailable reason after success; empty means none.
		wantReason string
	}{
		{
			name:        "new node gets a route",
			key:         "a",
			node:        nodeWith("a", "10.244.1.0/24"),
			wantCreates: []create{{hint: "kubernetes-uid-a-ipv4", route: rt("", "a", "10.244.1.0/24")}},
			wantReason:  reasonRouteCreated,
		},
		{
			name: "dual-stack node gets one route per family",
			key:  "a",
			node: nodeWith("a", "10.244.1.0/24", "fd00:10:244:1::/64"),
			wantCreates: []create{
				{hint: "kubernetes-uid-a-ipv4", route: rt("", "a", "10.244.1.0/24")},
				{hint: "kubernetes-uid-a-ipv6", route: rt("", "a", "fd00:10:244:1::/64")},
			},
			wantReason: reasonRouteCreated,
		},
		{
			name:        "dual-stack node missing only its IPv6 route",
			key:         "a",
			node:        nodeWith("a", "10.244.1.0/24", "fd00:10:244:1::/64"),
			routes:      []cloud.Route{rt("r1", "a", "10.244.1.0/24")},
			wantCreates: []create{{hint: "kubernetes-uid-a-ipv6", route: rt("", "a", "fd00:10:244:1::/64")}},
			wantReason:  reasonRouteCreated,
		},
		{
			name: "only the old single podCIDR field set",
			key:  "a",
			node: func() *corev1.Node {
				n := nodeWith("a")
				n.Spec.PodCIDR = "10.244.7.0/24"
				return n
			}(),
			wantCreates: []create{{hint: "kubernetes-uid-a-ipv4", route: rt("", "a", "10.244.7.0/24")}},
			wantReason:  reasonRouteCreated,
		},
		{
			name:       "routes in place: nothing to do",
			key:        "a",
			node:       nodeWith("a", "10.244.1.0/24", "fd00:10:244:1::/64"),
			routes:     []cloud.Route{rt("r1", "a", "10.244.1.0/24"), rt("r2", "a", "fd00:10:244:1::/64")},
			wantReason: reasonRouteCreated,
		},
		{
			name:        "a new route carries the node's addresses",
			key:         "a",
			node:        withIPs(nodeWith("a", "10.244.1.0/24"), "10.0.0.1"),
			wantCreates: []create{{hint: "kubernetes-uid-a-ipv4", route: via(rt("", "a", "10.244.1.0/24"), false, "10.0.0.1")}},
			wantReason:  reasonRouteCreated,
		},
		{
			name:        "the node's address changed: the route is replaced",
			key:         "a",
			node:        withIPs(nodeWith("a", "10.244.1.0/24"), "10.0.0.2"),
			routes:      []cloud.Route{via(rt("r1", "a", "10.244.1.0/24"), true, "10.0.0.1")},
			wantDeletes: []cloud.Route{via(rt("r1", "a", "10.244.1.0/24"), true, "10.0.0.1")},
			wantCreates: []create{{hint: "kubernetes-uid-a-ipv4", route: via(rt("", "a", "10.244.1.0/24"), false, "10.0.0.2")}},
			wantReason:  reasonRouteCreated,
		},
		{
			name:       "the same addresses in another order: nothing to do",
			key:        "a",
			node:       withIPs(nodeWith("a", "10.244.1.0/24"), "10.0.0.1", "10.0.0.9"),
			routes:     []cloud.Route{via(rt("r1", "a", "10.244.1.0/24"), true, "10.0.0.9", "10.0.0.1")},
			wantReason: reasonRouteCreated,
		},
		{
			name:       "a provider that does not record addresses: never compared",
			key:        "a",
			node:       withIPs(nodeWith("a", "10.244.1.0/24"), "10.0.0.2"),
			routes:     []cloud.Route{via(rt("r1", "a", "10.244.1.0/24"), false)},
			wantReason: reasonRouteCreated,
		},
		{
			name:       "unmasked pod CIDR matches the masked route",
			key:        "a",
			node:       nodeWith("a", "10.244.1.9/24"),
			routes:     []cloud.Route{rt("r1", "a", "10.244.1.0/24")},
			wantReason: reasonRouteCreated,
		},
		{
			name:        "blackhole route of an existing node is recreated",
			key:         "a",
			node:        nodeWith("a", "10.244.1.0/24"),
			routes:      []cloud.Route{blackhole(rt("r1", "a", "10.244.1.0/24"))},
			wantDeletes: []cloud.Route{blackhole(rt("r1", "a", "10.244.1.0/24"))},
			wantCreates: []create{{hint: "kubernetes-uid-a-ipv4", route: rt("", "a", "10.244.1.0/24")}},
			wantReason:  reasonRouteCreated,
		},
		{
			name:        "blackhole beside a healthy twin is only deleted",
			key:         "a",
			node:        nodeWith("a", "10.244.1.0/24"),
			routes:      []cloud.Route{blackhole(rt("r0", "a", "10.244.1.0/24")), rt("r1", "a", "10.244.1.0/24")},
			wantDeletes: []cloud.Route{blackhole(rt("r0", "a", "10.244.1.0/24"))},
			wantReason:  reasonRouteCreated,
		},
		{
			name:        "pod CIDR changed: old route deleted, new one created",
			key:         "a",
			node:        nodeWith("a", "10.244.2.0/24"),
			routes:      []cloud.Route{rt("r1", "a", "10.244.1.0/24")},
			wantDeletes: []cloud.Route{rt("r1", "a", "10.244.1.0/24")},
			wantCreates: []create{{hint: "kubernetes-uid-a-ipv4", route: rt("", "a", "10.244.2.0/24")}},
			wantReason:  reasonRouteCreated,
		},
		{
			name:        "gone node: its routes inside the cluster CIDRs are deleted",
			key:         "gone",
			routes:      []cloud.Route{rt("r1", "gone", "10.244.1.0/24"), rt("r2", "gone", "fd00:10:244:1::/64"), rt("r3", "a", "10.244.3.0/24")},
			wantDeletes: []cloud.Route{rt("r1", "gone", "10.244.1.0/24"), rt("r2", "gone", "fd00:10:244:1::/64")},
		},
		{
			name:   "gone node: routes outside the cluster CIDRs are untouched",
			key:    "gone",
			routes: []cloud.Route{rt("vpn", "gone", "192.168.0.0/24"), rt("wide", "gone", "10.0.0.0/8"), rt("v6", "gone", "fd00:99::/64")},
		},
		{
			name:        "gone node: blackhole routes deleted",
			key:         "gone",
			routes:      []cloud.Route{blackhole(rt("r1", "gone", "10.244.1.0/24"))},
			wantDeletes: []cloud.Route{blackhole(rt("r1", "gone", "10.244.1.0/24"))},
		},
		{
			name:        "routes without a target are orphans",
			key:         orphanKey,
			routes:      []cloud.Route{rt("r1", "", "10.244.1.0/24"), rt("r2", "", "192.168.1.0/24")},
			wantDeletes: []cloud.Route{rt("r1", "", "10.244.1.0/24")},
		},
		{
			name:        "pod CIDR outside the cluster CIDRs gets no route",
			key:         "a",
			node:        nodeWith("a", "192.168.5.0/24"),
			wantOutside: prefixes("192.168.5.0/24"),
			wantReason:  reasonNoRouteCreated,
		},
		{
			name:        "outside route of an existing node is kept",
			key:         "a",
			node:        nodeWith("a", "10.244.1.0/24"),
			routes:      []cloud.Route{rt("r1", "a", "10.244.1.0/24"), rt("extra", "a", "192.168.0.0/24")},
			wantReason:  reasonRouteCreated,
			wantDeletes: nil,
		},
		{
			name:        "invalid pod CIDR",
			key:         "a",
			node:        nodeWith("a", "10.244.1.0/33"),
			wantInvalid: []string{"10.244.1.0/33"},
			wantReason:  reasonNoRouteCreated,
		},
		{
			name:          "CIDR claimed by another existing node: kept, conflict reported",
			key:           "a",
			node:          nodeWith("a", "10.244.1.0/24"),
			others:        []*corev1.Node{nodeWith("b", "10.244.1.0/24")},
			routes:        []cloud.Route{rt("rb", "b", "10.244.1.0/24")},
			wantConflicts: []conflict{{cidr: netip.MustParsePrefix("10.244.1.0/24"), owner: "b"}},
			wantReason:    reasonNoRouteCreated,
		},
		{
			name:        "CIDR moved from a gone node: stale route deleted first",
			key:         "a",
			node:        nodeWith("a", "10.244.1.0/24"),
			routes:      []cloud.Route{rt("rg", "gone", "10.244.1.0/24")},
			wantDeletes: []cloud.Route{rt("rg", "gone", "10.244.1.0/24")},
			wantCreates: []create{{hint: "kubernetes-uid-a-ipv4", route: rt("", "a", "10.244.1.0/24")}},
			wantReason:  reasonRouteCreated,
		},
		{
			name:        "CIDR moved from a node that now has another one",
			key:         "a",
			node:        nodeWith("a", "10.244.1.0/24"),
			others:      []*corev1.Node{nodeWith("b", "10.244.9.0/24")},
			routes:      []cloud.Route{rt("rb", "b", "10.244.1.0/24")},
			wantDeletes: []cloud.Route{rt("rb", "b", "10.244.1.0/24")},
			wantCreates: []create{{hint: "kubernetes-uid-a-ipv4", route: rt("", "a", "10.244.1.0/24")}},
			wantReason:  reasonRouteCreated,
		},
		{
			name:        "pod CIDR removed from a node: routes deleted, condition set",
			key:         "a",
			node:        nodeWith("a"),
			routes:      []cloud.Route{rt("r1", "a", "10.244.1.0/24")},
			wantDeletes: []cloud.Route{rt("r1", "a", "10.244.1.0/24")},
			wantReason:  reasonNoRouteCreated,
		},
		{
			name: "node without pod CIDR nor routes: left alone",
			key:  "a",
			node: nodeWith("a"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			known := tt.others
			if tt.node != nil {
				known = append(known, tt.node)
			}
			pl := testPlanner(known...)
			idx := newRouteIndex(pl.clusterCIDRs, tt.routes)
			p := pl.plan(tt.key, tt.node, idx)

			if !equalOrEmpty(p.deletes, tt.wantDeletes) {
				t.Errorf("deletes = %v, want %v", p.deletes, tt.wantDeletes)
			}
			if !equalOrEmpty(p.creates, tt.wantCreates) {
				t.Errorf("creates = %v, want %v", p.creates, tt.wantCreates)
			}
			if !slices.Equal(p.outside, tt.wantOutside) {
				t.Errorf("outside = %v, want %v", p.outside, tt.wantOutside)
			}
			if !slices.Equal(p.invalid, tt.wantInvalid) {
				t.Errorf("invalid = %v, want %v", p.invalid, tt.wantInvalid)
			}
			if !slices.Equal(p.conflicts, tt.wantConflicts) {
				t.Errorf("conflicts = %v, want %v", p.conflicts, tt.wantConflicts)
			}
			cond, ok := p.wantCondition(false)
			switch {
			case tt.wantReason == "" && ok:
				t.Errorf("wantCondition = %+v, want none", cond)
			case tt.wantReason != "" && (!ok || cond.Reason != tt.wantReason):
				t.Errorf("wantCondition = %+v (ok %v), want reason %s", cond, ok, tt.wantReason)
			}
			if ok {
				wantStatus := corev1.ConditionTrue
				if cond.Reason == reasonRouteCreated {
					wantStatus = corev1.ConditionFalse
				}
				if cond.Type != corev1.NodeNetworkUnavailable || cond.Status != wantStatus {
					t.Errorf("condition = %+v, want %s=%s", cond, corev1.NodeNetworkUnavailable, wantStatus)
				}
			}
		})
	}
}

func TestWantConditionAfterCreateFailure(t *testing.T) {
	pl := testPlanner()
	node := nodeWith("a", "10.244.1.0/24")
	p := pl.plan("a", node, newRouteIndex(pl.clusterCIDRs, nil))
	cond, ok := p.wantCondition(true)
	if !ok || cond.Status != corev1.ConditionTrue || cond.Reason != reasonNoRouteCreated || cond.Message != messageNoRoute {
		t.Fatalf("wantCondition(createFailed) = %+v, %v; want True/%s %q", cond, ok, reasonNoRouteCreated, messageNoRoute)
	}
}

func TestConditionHolds(t *testing.T) {
	created := corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: reasonRouteCreated}
	tests := []struct {
		name  string
		conds []corev1.NodeCondition
		want  bool
	}{
		{name: "no conditions", want: false},
		{name: "same status and reason", conds: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}, created}, want: true},
		{name: "different message only", conds: []corev1.NodeCondition{func() corev1.NodeCondition { c := created; c.Message = "x"; return c }()}, want: true},
		{name: "other reason", conds: []corev1.NodeCondition{{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "CalicoIsUp"}}, want: false},
		{name: "other status", conds: []corev1.NodeCondition{{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue, Reason: reasonRouteCreated}}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := nodeWith("a")
			n.Status.Conditions = tt.conds
			if got := conditionHolds(n, created); got != tt.want {
				t.Errorf("conditionHolds = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNameHint(t *testing.T) {
	tests := []struct {
		name    string
		cluster string
		want    []netip.Prefix
		i       int
		hint    string
	}{
		{name: "ipv4", cluster: "prod", want: prefixes("10.0.1.0/24"), i: 0, hint: "prod-uid-a-ipv4"},
		{name: "ipv6 second", cluster: "prod", want: prefixes("10.0.1.0/24", "fd00::/64"), i: 1, hint: "prod-uid-a-ipv6"},
		{name: "ipv6 first", cluster: "prod", want: prefixes("fd00::/64", "10.0.1.0/24"), i: 0, hint: "prod-uid-a-ipv6"},
		{name: "order does not change the hint", cluster: "prod", want: prefixes("fd00::/64", "10.0.1.0/24"), i: 1, hint: "prod-uid-a-ipv4"},
		{name: "no cluster name", cluster: "", want: prefixes("10.0.1.0/24"), i: 0, hint: "uid-a-ipv4"},
		{name: "second CIDR of one family stays unique", cluster: "c", want: prefixes("10.0.1.0/24", "10.0.2.0/24"), i: 1, hint: "c-uid-a-ipv4-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nameHint(tt.cluster, nodeWith("a"), tt.want, tt.i); got != tt.hint {
				t.Errorf("nameHint = %q, want %q", got, tt.hint)
			}
		})
	}
	// A node recreated with the same name is another instance: its hint differs.
	n1, n2 := nodeWith("a", "10.0.1.0/24"), nodeWith("a", "10.0.1.0/24")
	n2.UID = "other"
	w := prefixes("10.0.1.0/24")
	if nameHint("c", n1, w, 0) == nameHint("c", n2, w, 0) {
		t.Error("name hints of two nodes with one name but different UIDs are equal")
	}
}

func TestInsideAny(t *testing.T) {
	cidrs := prefixes("10.244.0.0/16", "fd00:10:244::/56")
	tests := []struct {
		cidr string
		want bool
	}{
		{"10.244.1.0/24", true},
		{"10.244.0.0/16", true},
		{"10.245.0.0/24", false},
		{"10.0.0.0/8", false}, // wider than the cluster network: not ours
		{"10.244.0.0/15", false},
		{"fd00:10:244:3::/64", true},
		{"fd00:10:245::/64", false},
		{"::ffff:10.244.1.0/120", false}, // a mapped IPv4 prefix is another family
	}
	for _, tt := range tests {
		if got := insideAny(cidrs, netip.MustParsePrefix(tt.cidr)); got != tt.want {
			t.Errorf("insideAny(%s) = %v, want %v", tt.cidr, got, tt.want)
		}
	}
}

package conformance

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nephele-dev/nephele/cloud"
)

func checkProviderName(c *checker) {
	if c.s.name == "" {
		c.errorf("ProviderName() is empty")
		return
	}
	if _, err := cloud.NewProviderID(c.s.name, "x"); err != nil {
		c.errorf("ProviderName() %q cannot be the scheme of provider IDs: %v", c.s.name, err)
	}
}

func checkCapabilities(c *checker) {
	p := c.s.provider
	reported := map[Capability]func() (bool, bool){
		Instances:      func() (bool, bool) { v, ok := p.Instances(); return ok, v != nil },
		InstanceLister: func() (bool, bool) { v, ok := p.InstanceLister(); return ok, v != nil },
		LoadBalancers:  func() (bool, bool) { v, ok := p.LoadBalancers(); return ok, v != nil },
		Routes:         func() (bool, bool) { v, ok := p.Routes(); return ok, v != nil },
	}
	for _, capability := range AllCapabilities() {
		ok, nonNil := reported[capability]()
		claimed := c.s.cfg.claims[capability]
		switch {
		case ok && !nonNil:
			c.errorf("%s: reported present with a nil implementation", capability)
		case ok && !claimed:
			c.errorf("%s: reported present but not claimed by the setup (claim it so that it is tested)", capability)
		case !ok && claimed:
			c.errorf("%s: claimed by the setup but reported absent", capability)
		}
	}
}

// checkInstance records every way inst falls short of complete metadata for the
// instance behind nodeName.
func checkInstance(c *checker, what string, inst *cloud.Instance, nodeName string) {
	pid, err := cloud.ParseProviderID(inst.ProviderID)
	switch {
	case err != nil:
		c.errorf("%s: %v", what, err)
	case pid.Provider != c.s.name:
		c.errorf("%s: provider ID %q has scheme %q, want the provider's name %q", what, inst.ProviderID, pid.Provider, c.s.name)
	}
	if inst.NodeName != nodeName {
		c.errorf("%s: NodeName is %q, want %q", what, inst.NodeName, nodeName)
	}
	for _, f := range []struct{ name, v string }{{"InstanceType", inst.InstanceType}, {"Zone", inst.Zone}, {"Region", inst.Region}} {
		if f.v == "" {
			c.errorf("%s: %s is empty", what, f.name)
		}
	}
	if len(inst.Addresses) == 0 {
		c.errorf("%s: no addresses", what)
	}
	seen := map[corev1.NodeAddress]bool{}
	for _, a := range inst.Addresses {
		switch a.Type {
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			if ip, err := netip.ParseAddr(a.Address); err != nil || ip.Zone() != "" {
				c.errorf("%s: %s address %q is not an IP address", what, a.Type, a.Address)
			}
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			if a.Address == "" {
				c.errorf("%s: empty %s address", what, a.Type)
			}
		default:
			c.errorf("%s: address %q has unknown type %q", what, a.Address, a.Type)
		}
		if seen[a] {
			c.errorf("%s: address %s %s is listed twice", what, a.Type, a.Address)
		}
		seen[a] = true
	}
	if inst.State != cloud.InstanceRunning {
		c.errorf("%s: state is %q, want %q for a new instance", what, inst.State, cloud.InstanceRunning)
	}
}

func checkMetadataComplete(c *checker) {
	f := c.fixture("a")
	if f == nil {
		return
	}
	checkInstance(c, fmt.Sprintf("instance of node %s (by node name)", f.nodeName), f.meta, f.nodeName)
	byID, err := c.metadata(nodeByProviderID(f.nodeName, f.meta.ProviderID))
	if err != nil {
		c.errorf("InstanceMetadata by provider ID %s: %s", f.meta.ProviderID, describe(err))
		return
	}
	checkInstance(c, fmt.Sprintf("instance %s (by provider ID)", f.meta.ProviderID), byID, f.nodeName)
}

func checkLabelsValid(c *checker) {
	f := c.fixture("a")
	if f == nil {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(f.meta.Labels)) {
		v := f.meta.Labels[k]
		for _, msg := range validation.IsQualifiedName(k) {
			c.errorf("label key %q: %s", k, msg)
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			c.errorf("label %q value %q: %s", k, v, msg)
		}
		if prefix, _, ok := strings.Cut(k, "/"); ok {
			for _, reserved := range []string{"kubernetes.io", "k8s.io"} {
				if prefix == reserved || strings.HasSuffix(prefix, "."+reserved) {
					c.errorf("label key %q is in the %s domain, which the node controller refuses to set for a provider", k, reserved)
				}
			}
		}
	}
}

func checkMetadataStable(c *checker) {
	f := c.fixture("a")
	if f == nil {
		return
	}
	nodes := []struct {
		what string
		node *corev1.Node
	}{
		{"by node name", nodeByName(f.nodeName)},
		{"by provider ID", nodeByProviderID(f.nodeName, f.meta.ProviderID)},
	}
	for round := 1; round <= 2; round++ {
		for _, n := range nodes {
			got, err := c.metadata(n.node)
			if err != nil {
				c.errorf("lookup %d %s: %s", round, n.what, describe(err))
				continue
			}
			if diff := diffInstances(f.meta, got, false); diff != "" {
				c.errorf("lookup %d %s differs from the first lookup: %s", round, n.what, diff)
			}
		}
	}
}

func checkLookupAgree(c *checker) {
	f := c.fixture("a")
	if f == nil {
		return
	}
	byID, err := c.metadata(nodeByProviderID(f.nodeName, f.meta.ProviderID))
	if err != nil {
		c.errorf("InstanceMetadata by provider ID %s: %s", f.meta.ProviderID, describe(err))
	} else if diff := diffInstances(f.meta, byID, false); diff != "" {
		c.errorf("by node name and by provider ID differ: %s", diff)
	}
	// A node whose name no instance has, but with a provider ID: the provider ID
	// decides, as the contract says it is looked up first.
	renamed := c.s.nameFor("renamed")
	got, err := c.metadata(nodeByProviderID(renamed, f.meta.ProviderID))
	if err != nil {
		c.errorf("InstanceMetadata of a node named %s with provider ID %s: %s (the provider ID must be used when set)", renamed, f.meta.ProviderID, describe(err))
	} else if diff := diffInstances(f.meta, got, true); diff != "" {
		c.errorf("a node named %s with provider ID %s got another instance (the provider ID must be used when set): %s", renamed, f.meta.ProviderID, diff)
	}
}

func checkUnknownNotFound(c *checker) {
	name := c.s.nameFor("never")
	inst, err := c.metadata(nodeByName(name))
	if !cloud.IsNotFound(err) {
		if err == nil {
			c.errorf("InstanceMetadata of node %s, which no instance backs, returned instance %s; want NotFound", name, inst.ProviderID)
			return
		}
		c.errorf("InstanceMetadata of node %s, which no instance backs: %s; want NotFound", name, describe(err))
	}
}

// stoppedStates are the states of an instance that was shut down.
func stopped(s cloud.InstanceState) bool {
	return s == cloud.InstanceStopped || s == cloud.InstanceTerminated
}

func checkStoppedNotGone(c *checker) {
	f := c.fixture("c")
	if f == nil {
		return
	}
	err := do(c, func(ctx context.Context) error { return c.s.cfg.Instances.StopInstance(ctx, f.nodeName) })
	if cloud.IsNotImplemented(err) {
		c.skipf("the instance factory cannot stop instances: %v", err)
		return
	}
	if err != nil {
		c.errorf("the instance factory could not stop instance %s: %v", f.nodeName, err)
		return
	}
	for _, n := range []struct {
		what string
		node *corev1.Node
	}{
		{"by provider ID", nodeByProviderID(f.nodeName, f.meta.ProviderID)},
		{"by node name", nodeByName(f.nodeName)},
	} {
		c.poll(fmt.Sprintf("stopped instance %s %s is found stopped or terminated", f.nodeName, n.what), func() (bool, string) {
			inst, err := c.metadata(n.node)
			switch {
			case cloud.IsNotFound(err):
				c.errorf("stopped instance %s %s: NotFound (%v); a stopped instance is not gone", f.nodeName, n.what, err)
				return true, ""
			case err != nil:
				return false, describe(err)
			case !stopped(inst.State):
				return false, fmt.Sprintf("state %q", inst.State)
			}
			return true, ""
		})
	}
	if c.s.lister == nil || c.failed() {
		return
	}
	list, err := c.list()
	if err != nil {
		c.errorf("ListInstances: %s", describe(err))
		return
	}
	if !slices.ContainsFunc(list, func(i cloud.Instance) bool { return i.ProviderID == f.meta.ProviderID }) {
		c.errorf("the listing lacks stopped instance %s: a stopped instance is not gone", f.meta.ProviderID)
	}
}

func checkListerComplete(c *checker) {
	var want []*fixture
	for _, key := range []string{"a", "b"} {
		f := c.fixture(key)
		if f == nil {
			return
		}
		want = append(want, f)
	}
	if f := c.s.fixtures["c"]; f != nil && f.err == nil && f.meta != nil {
		want = append(want, f) // the stopped one, when there is one
	}
	list, err := c.list()
	if err != nil {
		c.errorf("ListInstances: %s", describe(err))
		return
	}
	byID := map[string]cloud.Instance{}
	for _, inst := range list {
		if _, dup := byID[inst.ProviderID]; dup {
			c.errorf("provider ID %q is listed more than once", inst.ProviderID)
		}
		byID[inst.ProviderID] = inst
		pid, err := cloud.ParseProviderID(inst.ProviderID)
		switch {
		case err != nil:
			c.errorf("listed instance %q (node %q): %v", inst.ProviderID, inst.NodeName, err)
		case pid.Provider != c.s.name:
			c.errorf("listed instance %q has scheme %q, want %q", inst.ProviderID, pid.Provider, c.s.name)
		}
	}
	for _, f := range want {
		listed, ok := byID[f.meta.ProviderID]
		if !ok {
			c.errorf("the listing (%d instances) lacks instance %s of node %s", len(list), f.meta.ProviderID, f.nodeName)
			continue
		}
		one, err := c.metadata(nodeByProviderID(f.nodeName, f.meta.ProviderID))
		if err != nil {
			c.errorf("InstanceMetadata by provider ID %s: %s", f.meta.ProviderID, describe(err))
			continue
		}
		if diff := diffInstances(one, &listed, false); diff != "" {
			c.errorf("instance %s: the listing and a per-instance lookup differ: %s", f.meta.ProviderID, diff)
		}
	}
}

// deleteFixture deletes the test instance for key once. It returns false, having
// recorded a skip or a problem, when the instance could not be deleted.
func deleteFixture(c *checker, key string) (*fixture, bool) {
	f := c.fixture(key)
	if f == nil {
		return nil, false
	}
	if f.deleted {
		return f, true
	}
	err := do(c, func(ctx context.Context) error { return c.s.cfg.Instances.DeleteInstance(ctx, f.nodeName) })
	if cloud.IsNotImplemented(err) {
		c.skipf("the instance factory cannot delete one instance alone: %v", err)
		return nil, false
	}
	if err != nil {
		c.errorf("the instance factory could not delete instance %s: %v", f.nodeName, err)
		return nil, false
	}
	f.deleted = true
	return f, true
}

func checkDeletedNotFound(c *checker) {
	f, ok := deleteFixture(c, "a")
	if !ok {
		return
	}
	for _, n := range []struct {
		what string
		node *corev1.Node
	}{
		{"by provider ID", nodeByProviderID(f.nodeName, f.meta.ProviderID)},
		{"by node name", nodeByName(f.nodeName)},
	} {
		c.poll(fmt.Sprintf("deleted instance %s %s is NotFound", f.nodeName, n.what), func() (bool, string) {
			inst, err := c.metadata(n.node)
			switch {
			case cloud.IsNotFound(err):
				return true, ""
			case err != nil:
				return false, describe(err)
			}
			return false, fmt.Sprintf("found %s in state %q", inst.ProviderID, inst.State)
		})
	}
	other := c.s.fixtures["b"]
	if other == nil || other.err != nil || other.meta == nil || other.deleted {
		return
	}
	if _, err := c.metadata(nodeByProviderID(other.nodeName, other.meta.ProviderID)); err != nil {
		c.errorf("after deleting %s, instance %s of node %s: %s; deleting one instance must leave the others", f.nodeName, other.meta.ProviderID, other.nodeName, describe(err))
	}
}

func checkListerDeletedAbsent(c *checker) {
	f, ok := deleteFixture(c, "a")
	if !ok {
		return
	}
	c.poll(fmt.Sprintf("deleted instance %s is no longer listed", f.meta.ProviderID), func() (bool, string) {
		list, err := c.list()
		if err != nil {
			return false, "ListInstances: " + describe(err)
		}
		if slices.ContainsFunc(list, func(i cloud.Instance) bool { return i.ProviderID == f.meta.ProviderID }) {
			return false, "still listed"
		}
		return true, ""
	})
}

// diffInstances describes how got differs from want, or returns "" when they are the
// same. Nil and empty slices and maps are the same.
func diffInstances(want, got *cloud.Instance, ignoreNodeName bool) string {
	var d []string
	field := func(name, w, g string) {
		if w != g {
			d = append(d, fmt.Sprintf("%s %q, then %q", name, w, g))
		}
	}
	field("ProviderID", want.ProviderID, got.ProviderID)
	if !ignoreNodeName {
		field("NodeName", want.NodeName, got.NodeName)
	}
	field("InstanceType", want.InstanceType, got.InstanceType)
	field("Zone", want.Zone, got.Zone)
	field("Region", want.Region, got.Region)
	field("State", string(want.State), string(got.State))
	if !slices.Equal(want.Addresses, got.Addresses) {
		d = append(d, fmt.Sprintf("Addresses %v, then %v", want.Addresses, got.Addresses))
	}
	if !maps.Equal(want.Labels, got.Labels) {
		d = append(d, fmt.Sprintf("Labels %v, then %v", want.Labels, got.Labels))
	}
	return strings.Join(d, "; ")
}

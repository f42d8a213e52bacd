package fakecloud

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"
)

// AddInstance adds inst to the cloud, replacing any instance with the same provider
// ID. An empty ProviderID becomes "<name>://<NodeName>" and an empty State becomes
// running. It fails when inst has neither a provider ID nor a node name.
func (c *Cloud) AddInstance(inst cloud.Instance) error {
	if inst.ProviderID == "" {
		if inst.NodeName == "" {
			return fmt.Errorf("adding an instance to the fake cloud: it has neither a provider ID nor a node name")
		}
		inst.ProviderID = cloud.ProviderID{Provider: c.name, ID: inst.NodeName}.String()
	}
	if inst.State == "" {
		inst.State = cloud.InstanceRunning
	}
	stored := copyInstance(inst)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.instances[inst.ProviderID] = &stored
	return nil
}

// UpdateInstance calls f on the instance with providerID and keeps the result. f must
// not change the provider ID. It returns an error wrapping cloud.ErrNotFound when there
// is no such instance.
func (c *Cloud) UpdateInstance(providerID string, f func(*cloud.Instance)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.instances[providerID]
	if !ok {
		return cloud.NotFoundf("updating fake instance %q", providerID)
	}
	next := copyInstance(*cur)
	f(&next)
	if next.ProviderID != providerID {
		return fmt.Errorf("updating fake instance %q: the update changed the provider ID to %q", providerID, next.ProviderID)
	}
	c.instances[providerID] = &next
	return nil
}

// SetInstanceState sets the state of the instance with providerID. It returns an error
// wrapping cloud.ErrNotFound when there is no such instance.
func (c *Cloud) SetInstanceState(providerID string, state cloud.InstanceState) error {
	return c.UpdateInstance(providerID, func(i *cloud.Instance) { i.State = state })
}

// RemoveInstance deletes the instance with providerID, so that the cloud reports it
// NotFound from then on. It returns whether there was one.
func (c *Cloud) RemoveInstance(providerID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.instances[providerID]
	delete(c.instances, providerID)
	return ok
}

// Instance returns a copy of the instance with providerID, without a logged call or
// any fault.
func (c *Cloud) Instance(providerID string) (cloud.Instance, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inst, ok := c.instances[providerID]
	if !ok {
		return cloud.Instance{}, false
	}
	return copyInstance(*inst), true
}

// AllInstances returns copies of every instance sorted by node name, without a logged
// call or any fault.
func (c *Cloud) AllInstances() []cloud.Instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sortedInstances()
}

// InstanceMetadata implements cloud.Instances. It finds the instance by
// node.Spec.ProviderID when set, otherwise by node name; when several instances carry
// the node name, the one with the lowest provider ID wins.
func (c *Cloud) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloud.Instance, error) {
	var subject string
	if node != nil {
		subject = node.Spec.ProviderID
		if subject == "" {
			subject = node.Name
		}
	}
	var out *cloud.Instance
	err := c.do(ctx, cloud.OpInstanceMetadata, subject, func() error {
		if node == nil {
			return cloud.Invalidf("instance metadata: node is nil")
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		inst := c.findInstance(node)
		if inst == nil {
			if node.Spec.ProviderID != "" {
				return cloud.NotFoundf("instance %q of node %q", node.Spec.ProviderID, node.Name)
			}
			return cloud.NotFoundf("instance of node %q", node.Name)
		}
		cp := copyInstance(*inst)
		out = &cp
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// findInstance returns the stored instance behind node, or nil. Callers hold c.mu.
func (c *Cloud) findInstance(node *corev1.Node) *cloud.Instance {
	if node.Spec.ProviderID != "" {
		return c.instances[node.Spec.ProviderID]
	}
	var found *cloud.Instance
	for _, inst := range c.instances {
		if inst.NodeName == node.Name && (found == nil || inst.ProviderID < found.ProviderID) {
			found = inst
		}
	}
	return found
}

// ListInstances implements cloud.InstanceLister. It returns every instance, sorted by
// node name, then provider ID.
func (c *Cloud) ListInstances(ctx context.Context) ([]cloud.Instance, error) {
	var out []cloud.Instance
	err := c.do(ctx, cloud.OpListInstances, "", func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		out = c.sortedInstances()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// sortedInstances returns copies of all instances. Callers hold c.mu.
func (c *Cloud) sortedInstances() []cloud.Instance {
	out := make([]cloud.Instance, 0, len(c.instances))
	for _, inst := range c.instances {
		out = append(out, copyInstance(*inst))
	}
	slices.SortFunc(out, func(a, b cloud.Instance) int {
		if n := strings.Compare(a.NodeName, b.NodeName); n != 0 {
			return n
		}
		return strings.Compare(a.ProviderID, b.ProviderID)
	})
	return out
}

// copyInstance returns a deep copy, so that callers never share the cloud's slices
// and maps.
func copyInstance(in cloud.Instance) cloud.Instance {
	in.Addresses = slices.Clone(in.Addresses)
	in.Labels = maps.Clone(in.Labels)
	return in
}

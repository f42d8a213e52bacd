package local

import (
	"context"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/localcloud/api"
)

// instances implements cloud.Instances and cloud.InstanceLister.
type instances struct{ p *Provider }

// InstanceMetadata implements cloud.Instances: by the node's provider ID when set,
// otherwise by node name (GET /v1/instances/by-name/{name}). A provider ID of another
// provider is an invalid request, never "not found": the node belongs to another cloud
// and must not look deleted. A terminated instance is NotFound.
func (in instances) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloud.Instance, error) {
	if node == nil {
		return nil, cloud.Invalidf("instance metadata: node is nil")
	}
	var (
		inst *api.Instance
		err  error
	)
	if node.Spec.ProviderID != "" {
		id, perr := instanceID(in.p.cfg.ProviderIDScheme, node.Spec.ProviderID)
		if perr != nil {
			return nil, cloud.Invalidf("node %s: %v", node.Name, perr)
		}
		inst, err = in.p.client.GetInstance(ctx, id)
		if err != nil {
			return nil, wrapf(err, "getting instance %s of node %s", id, node.Name)
		}
	} else {
		if node.Name == "" {
			return nil, cloud.Invalidf("instance metadata: node has neither a provider ID nor a name")
		}
		inst, err = in.p.client.GetInstanceByName(ctx, node.Name)
		if err != nil {
			return nil, wrapf(err, "getting the instance named %s", node.Name)
		}
	}
	if inst.State == api.InstanceTerminated {
		// A terminated instance can never run again: like the big clouds' providers,
		// report it gone, so the lifecycle controller deletes its Node (after its grace
		// period). The local cloud keeps listing it until it is deleted.
		return nil, cloud.NotFoundf("instance %s of node %s is terminated", inst.ID, node.Name)
	}
	out, err := toInstance(in.p.cfg.ProviderIDScheme, inst)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node.Name, err)
	}
	return out, nil
}

// ListInstances implements cloud.InstanceLister. It follows every page; any failed page
// fails the whole listing, so a short list never makes instances look gone. Terminated
// instances are left out: they are gone.
func (in instances) ListInstances(ctx context.Context) ([]cloud.Instance, error) {
	items, err := in.p.client.ListAllInstances(ctx, in.p.pageSize)
	if err != nil {
		return nil, listingError(err, "listing instances")
	}
	out := make([]cloud.Instance, 0, len(items))
	for i := range items {
		if items[i].State == api.InstanceTerminated {
			continue // gone, as InstanceMetadata answers
		}
		inst, err := toInstance(in.p.cfg.ProviderIDScheme, &items[i])
		if err != nil {
			return nil, fmt.Errorf("listing instances: %w", err)
		}
		out = append(out, *inst)
	}
	return out, nil
}

// listingError wraps the error of a listing. A listing is never a positive "gone": a
// NotFound answer to one of its pages (an expired page token, say) says nothing about
// any instance or route, so it becomes a temporary error that does not match
// cloud.ErrNotFound.
func listingError(err error, what string) error {
	if cloud.IsNotFound(err) {
		return fmt.Errorf("%s: the cloud answered NotFound to a listing, retrying: %s", what, err.Error())
	}
	return wrapf(err, "%s", what)
}

// instanceID returns the local cloud instance ID in a provider ID "<scheme>://<id>"
// (scheme is the configuration's ProviderIDScheme, "local" by default). Leading slashes
// are tolerated ("local:///i-…"), as some tools write IDs that way.
func instanceID(scheme, providerID string) (string, error) {
	pid, err := cloud.ParseProviderID(providerID)
	if err != nil {
		return "", err
	}
	if pid.Provider != scheme {
		return "", fmt.Errorf("provider ID %q belongs to provider %q, not %q", providerID, pid.Provider, scheme)
	}
	return strings.TrimLeft(pid.ID, "/"), nil
}

// toInstance converts a local cloud instance to the contract's Instance, its provider
// ID under scheme.
func toInstance(scheme string, inst *api.Instance) (*cloud.Instance, error) {
	pid, err := cloud.NewProviderID(scheme, inst.ID)
	if err != nil {
		return nil, fmt.Errorf("instance %q (%s) from the local cloud: %w", inst.ID, inst.Name, err)
	}
	out := &cloud.Instance{
		ProviderID:   pid.String(),
		NodeName:     inst.Name,
		InstanceType: inst.InstanceType,
		Zone:         inst.Zone,
		Region:       inst.Region,
		State:        toState(inst.State),
	}
	out.Addresses = nodeAddresses(inst.Addresses)
	if len(inst.Labels) > 0 {
		out.Labels = maps.Clone(inst.Labels)
	}
	return out, nil
}

// nodeAddresses maps the local cloud's addresses to a Node's, leaving out incomplete
// ones; nil when there are none.
func nodeAddresses(in []api.Address) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	for _, a := range in {
		if a.Type == "" || a.Address == "" {
			continue
		}
		out = append(out, corev1.NodeAddress{Type: corev1.NodeAddressType(a.Type), Address: a.Address})
	}
	return out
}

// toState maps the local cloud's states, which are the contract's values, and anything
// unexpected to InstanceUnknown.
func toState(s api.InstanceState) cloud.InstanceState {
	switch s {
	case api.InstanceRunning:
		return cloud.InstanceRunning
	case api.InstanceStopped:
		return cloud.InstanceStopped
	case api.InstanceTerminated:
		return cloud.InstanceTerminated
	default:
		return cloud.InstanceUnknown
	}
}

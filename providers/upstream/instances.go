package upstream

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/nephele-dev/nephele/cloud"
)

// subject names a node in errors: its provider ID when set, and its name.
func subject(node *corev1.Node) string {
	if node.Spec.ProviderID != "" {
		return fmt.Sprintf("node %s (provider ID %s)", node.Name, node.Spec.ProviderID)
	}
	return "node " + node.Name
}

// instanceCall runs one upstream instance call and maps its error. ImplementedElsewhere
// switches the Instances capability off.
func instanceCall[T any](ctx context.Context, p *Provider, op string, node *corev1.Node, fn func(context.Context) (T, error)) (T, error) {
	v, err := call(ctx, op, fn)
	if implementedElsewhere(err) {
		p.switchOff(ctx, &p.instancesOff, "instances")
	}
	return v, mapError(areaInstances, op, subject(node), err)
}

// optional turns an upstream NotImplemented answer into the zero value: the field it
// would have filled stays empty.
func optional[T any](v T, err error) (T, error) {
	if notImplemented(err) {
		var zero T
		return zero, nil
	}
	return v, err
}

// stateOf maps upstream's shutdown answer. NotImplemented leaves the state unknown, so
// that nothing is tainted or untainted on a guess.
func stateOf(shutdown bool, err error) (cloud.InstanceState, error) {
	switch {
	case notImplemented(err):
		return cloud.InstanceUnknown, nil
	case err != nil:
		return "", err
	case shutdown:
		return cloud.InstanceStopped, nil
	}
	return cloud.InstanceRunning, nil
}

func checkNode(node *corev1.Node) error {
	switch {
	case node == nil:
		return cloud.Invalidf("instance metadata: node is nil")
	case node.Name == "" && node.Spec.ProviderID == "":
		return cloud.Invalidf("instance metadata: the node has neither a name nor a provider ID")
	}
	return nil
}

// instancesV2 serves cloud.Instances from upstream's InstancesV2: InstanceExists (the
// answer upstream's lifecycle controller deletes Nodes on), InstanceMetadata and
// InstanceShutdown.
type instancesV2 struct {
	p  *Provider
	up cloudprovider.InstancesV2
}

// InstanceMetadata implements cloud.Instances.
func (in instancesV2) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloud.Instance, error) {
	if err := checkNode(node); err != nil {
		return nil, err
	}
	exists, err := instanceCall(ctx, in.p, "InstanceExists", node, func(ctx context.Context) (bool, error) { return in.up.InstanceExists(ctx, node) })
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, cloud.NotFoundf("%s: the upstream provider says its instance does not exist", subject(node))
	}
	md, err := instanceCall(ctx, in.p, "InstanceMetadata", node, func(ctx context.Context) (*cloudprovider.InstanceMetadata, error) {
		return in.up.InstanceMetadata(ctx, node)
	})
	if err != nil {
		return nil, err
	}
	if md == nil {
		return nil, fmt.Errorf("upstream cloud provider: InstanceMetadata %s returned neither metadata nor an error", subject(node))
	}
	state, err := stateOf(instanceCall(ctx, in.p, "InstanceShutdown", node, func(ctx context.Context) (bool, error) { return in.up.InstanceShutdown(ctx, node) }))
	if err != nil {
		return nil, err
	}
	providerID := md.ProviderID
	if providerID == "" {
		// Upstream lets providers leave a provider ID the node already has unset.
		providerID = node.Spec.ProviderID
	}
	if providerID == "" {
		return nil, fmt.Errorf("upstream cloud provider: InstanceMetadata %s returned no provider ID", subject(node))
	}
	return &cloud.Instance{
		ProviderID:   providerID,
		NodeName:     node.Name,
		InstanceType: md.InstanceType,
		Zone:         md.Zone,
		Region:       md.Region,
		Addresses:    slices.Clone(md.NodeAddresses),
		Labels:       maps.Clone(md.AdditionalLabels),
		State:        state,
	}, nil
}

// instancesV1 serves cloud.Instances from upstream's Instances and, when the provider
// has it, Zones: by provider ID when the node has one, otherwise by node name, as
// upstream's node controllers do.
type instancesV1 struct {
	p     *Provider
	up    cloudprovider.Instances
	zones cloudprovider.Zones
}

// InstanceMetadata implements cloud.Instances.
func (in instancesV1) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloud.Instance, error) {
	if err := checkNode(node); err != nil {
		return nil, err
	}
	var (
		providerID = node.Spec.ProviderID
		addrs      []corev1.NodeAddress
		typ        string
		zone       cloudprovider.Zone
		err        error
	)
	if providerID != "" {
		exists, err := instanceCall(ctx, in.p, "InstanceExistsByProviderID", node, func(ctx context.Context) (bool, error) {
			return in.up.InstanceExistsByProviderID(ctx, providerID)
		})
		if err != nil {
			return nil, err
		}
		if !exists {
			return nil, cloud.NotFoundf("%s: the upstream provider says its instance does not exist", subject(node))
		}
		if addrs, err = instanceCall(ctx, in.p, "NodeAddressesByProviderID", node, func(ctx context.Context) ([]corev1.NodeAddress, error) {
			return in.up.NodeAddressesByProviderID(ctx, providerID)
		}); err != nil {
			return nil, err
		}
		if typ, err = optional(instanceCall(ctx, in.p, "InstanceTypeByProviderID", node, func(ctx context.Context) (string, error) {
			return in.up.InstanceTypeByProviderID(ctx, providerID)
		})); err != nil {
			return nil, err
		}
		if in.zones != nil {
			if zone, err = optional(instanceCall(ctx, in.p, "GetZoneByProviderID", node, func(ctx context.Context) (cloudprovider.Zone, error) {
				return in.zones.GetZoneByProviderID(ctx, providerID)
			})); err != nil {
				return nil, err
			}
		}
	} else {
		name := types.NodeName(node.Name)
		id, err := instanceCall(ctx, in.p, "InstanceID", node, func(ctx context.Context) (string, error) { return in.up.InstanceID(ctx, name) })
		if err != nil {
			return nil, err
		}
		if id == "" {
			return nil, fmt.Errorf("upstream cloud provider: InstanceID %s returned an empty ID and no error", subject(node))
		}
		// As cloudprovider.GetInstanceProviderID builds it.
		providerID = in.p.name + "://" + id
		if addrs, err = instanceCall(ctx, in.p, "NodeAddresses", node, func(ctx context.Context) ([]corev1.NodeAddress, error) {
			return in.up.NodeAddresses(ctx, name)
		}); err != nil {
			return nil, err
		}
		if typ, err = optional(instanceCall(ctx, in.p, "InstanceType", node, func(ctx context.Context) (string, error) {
			return in.up.InstanceType(ctx, name)
		})); err != nil {
			return nil, err
		}
		if in.zones != nil {
			if zone, err = optional(instanceCall(ctx, in.p, "GetZoneByNodeName", node, func(ctx context.Context) (cloudprovider.Zone, error) {
				return in.zones.GetZoneByNodeName(ctx, name)
			})); err != nil {
				return nil, err
			}
		}
	}
	state, err := stateOf(instanceCall(ctx, in.p, "InstanceShutdownByProviderID", node, func(ctx context.Context) (bool, error) {
		return in.up.InstanceShutdownByProviderID(ctx, providerID)
	}))
	if err != nil {
		return nil, err
	}
	return &cloud.Instance{
		ProviderID:   providerID,
		NodeName:     node.Name,
		InstanceType: typ,
		Zone:         zone.FailureDomain,
		Region:       zone.Region,
		Addresses:    slices.Clone(addrs),
		State:        state,
	}, nil
}

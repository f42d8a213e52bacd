package provider

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"

	"example.com/cloud-provider-example/examplecloud"
)

// instances implements cloud.Instances and cloud.InstanceLister.
type instances struct{ c *examplecloud.Cloud }

// InstanceMetadata implements cloud.Instances: by provider ID when the node has one,
// otherwise by host name.
func (in instances) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloud.Instance, error) {
	if node == nil {
		return nil, cloud.Invalidf("instance metadata: node is nil")
	}
	var (
		inst *examplecloud.Instance
		err  error
	)
	if node.Spec.ProviderID != "" {
		id, perr := instanceID(node.Spec.ProviderID)
		if perr != nil {
			// Another provider's node or a malformed ID: Invalid, never "not found",
			// which would delete the node.
			return nil, fmt.Errorf("node %s: %w", node.Name, perr)
		}
		inst, err = in.c.GetInstance(ctx, id)
		err = mapError(err, true, "instance %s of node %s", id, node.Name)
	} else {
		inst, err = in.c.FindInstance(ctx, node.Name)
		err = mapError(err, true, "instance named %s", node.Name)
	}
	if err != nil {
		return nil, err
	}
	return toInstance(inst, in.c.Region()), nil
}

// ListInstances implements cloud.InstanceLister. The API answers the whole list or an
// error, never a part.
func (in instances) ListInstances(ctx context.Context) ([]cloud.Instance, error) {
	list, err := in.c.ListInstances(ctx)
	if err != nil {
		// A 404 from a listing is not about any instance: never NotFound.
		return nil, mapError(err, false, "listing instances")
	}
	out := make([]cloud.Instance, len(list))
	for i := range list {
		out[i] = *toInstance(&list[i], in.c.Region())
	}
	return out, nil
}

// instanceID returns the instance ID in a provider ID of this provider. Every error is
// a cloud.Invalidf: an ID that cannot be read is never looked up, so it can never
// come back as NotFound.
func instanceID(providerID string) (string, error) {
	pid, err := cloud.ParseProviderID(providerID)
	if err != nil {
		return "", cloud.Invalidf("spec.providerID: %v: want %s://<instance ID>, e.g. %s://vm-000001", err, Name, Name)
	}
	if pid.Provider != Name {
		return "", cloud.Invalidf("spec.providerID %q belongs to provider %q, not %q", providerID, pid.Provider, Name)
	}
	// The provider writes IDs as "example://vm-000001". Another form of the same ID
	// ("example:///vm-000001") is not this provider's, and stripping its slashes could
	// leave nothing to look up.
	switch {
	case pid.ID == "":
		return "", cloud.Invalidf("spec.providerID %q has an empty instance ID: want %s://<instance ID>, e.g. %s://vm-000001", providerID, Name, Name)
	case strings.HasPrefix(pid.ID, "/"):
		return "", cloud.Invalidf("spec.providerID %q: the instance ID %q must not begin with \"/\": want %s://<instance ID>, e.g. %s://vm-000001", providerID, pid.ID, Name, Name)
	}
	return pid.ID, nil
}

// toInstance converts the cloud's instance to the contract's.
func toInstance(inst *examplecloud.Instance, region string) *cloud.Instance {
	out := &cloud.Instance{
		ProviderID:   cloud.ProviderID{Provider: Name, ID: inst.ID}.String(),
		NodeName:     inst.Name,
		InstanceType: inst.Type,
		Zone:         inst.Zone,
		Region:       region,
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: inst.PrivateIP},
			{Type: corev1.NodeHostName, Address: inst.Name},
		},
		State: cloud.InstanceUnknown,
	}
	if inst.PublicIP != "" {
		out.Addresses = append(out.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: inst.PublicIP})
	}
	switch inst.State {
	case examplecloud.StateRunning:
		out.State = cloud.InstanceRunning
	case examplecloud.StateStopped:
		out.State = cloud.InstanceStopped
	}
	// Tags become node labels under the provider's own domain, never kubernetes.io.
	for k, v := range inst.Tags {
		if out.Labels == nil {
			out.Labels = map[string]string{}
		}
		out.Labels["example.com/"+k] = v
	}
	return out
}

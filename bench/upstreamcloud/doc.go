// Package upstreamcloud is a k8s.io/cloud-provider implementation (cloudprovider.Interface)
// for nephele's local cloud, written the way a cloud provider team writes one for the
// upstream cloud-controller-manager. The benchmarks run upstream's controllers on it, so
// that they and nephele's controllers drive the same cloud through the same client.
//
// It is deliberately plain and one-to-one: each method makes exactly one API call, as
// nephele's own provider (providers/local) does for the same operation, so differences
// in cloud calls between the two come from the controllers, not from the providers.
//
//   - InstancesV2: InstanceMetadata, InstanceExists and InstanceShutdown each get one
//     instance, by provider ID when the Node has one and by name otherwise.
//   - LoadBalancer: one call per method (lb.get, lb.ensure, lb.update, lb.delete). The
//     backends are the nodes' InternalIP (else ExternalIP) addresses, as in
//     providers/local; nodes without one are left out.
//   - Routes: list, create and delete in the cluster's route table.
//
// Provider IDs are "local://<instance id>", the same as nephele's provider, and the cloud
// config file is the one providers/local reads.
package upstreamcloud

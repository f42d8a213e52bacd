// Package nodeinit is the cloud-node-controller: it initializes the Nodes a kubelet
// registers with --cloud-provider=external (they carry the taint
// node.cloudprovider.kubernetes.io/uninitialized) from what the cloud knows of their
// instance, and keeps their addresses current afterwards.
//
// Initialization sets spec.providerID when it is empty, the status addresses (honouring
// the kubelet's alpha.kubernetes.io/provided-node-ip annotation), the topology and
// instance-type labels (stable and beta) and the provider's extra labels, and removes the
// taint. The order of writes is fixed so that the taint is removed only once the rest is
// in place: first one status patch for the addresses, then one patch carrying the
// provider ID, the labels and the taint removal, made conditional on the Node's
// resourceVersion so it never clobbers a taint someone else changed meanwhile.
//
// When the provider has batch listing, the controller reads instances from the shared
// inventory: a burst of joining nodes shares one listing, and the periodic address
// refresh costs one listing however many nodes there are. Otherwise it asks the cloud
// per node, with a bounded number of workers.
package nodeinit

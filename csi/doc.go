// Package csi is nephele's CSI driver: one Container Storage Interface plugin that
// serves any provider implementing cloud.Volumes, the storage half of the out-of-tree
// move beside the cloud-controller-manager.
//
// The Controller service (create, delete, attach as ControllerPublishVolume, detach,
// expand, list) calls the provider; it runs once per cluster beside the real CSI
// sidecars (external-provisioner, external-attacher, external-resizer), which watch
// Kubernetes and call it over a Unix socket. The Node service (stage: find the attached
// device, format it once, mount it; publish: bind mount; expand the file system; stats)
// runs on every node and needs no cloud credential: the device path comes from the
// controller through the publish context, the node's zone from its Node's
// topology.kubernetes.io/zone label. A provider author gets a CSI driver that passes
// csi-sanity by implementing cloud.Volumes.
//
// The CSI volume ID is the provider's volume ID; the CSI node ID is the Node's name,
// which the provider resolves to its instance (as it does for the CCM).
package csi

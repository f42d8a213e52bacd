// Package bootstrap renders the cloud-controller-manager (CCM) as a static pod, for the
// bootstrap node of a cluster that has no scheduler, no CNI and no operator yet: the
// kubelet runs it from its staticPodPath, it initializes the first Nodes, and when the
// operator's Deployment is up the static pod is removed and a Deployment replica takes
// the Lease over. The static pod and the Deployment hold the same Lease
// (--leader-elect-resource-namespace and the default name), so the two are never
// active at once.
//
// The pod is the Deployment's pod template, rendered by operator/profiles (and so by
// deploy/render) for the same spec, with what a static pod cannot have replaced: no
// ServiceAccount (a kubeconfig file instead), no ConfigMap or Secret volumes (host
// files instead), no affinity. OpenShift's operator had such a render step from May to
// July 2021 and dropped it once its CCM could run before the CNI; nephele keeps it for
// clusters whose control plane comes up by static pods (kubeadm-like installs), where
// the first Nodes would otherwise wait, uninitialized, for an operator that cannot be
// scheduled onto them.
package bootstrap

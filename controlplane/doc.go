// Package controlplane starts a real Kubernetes control plane (etcd, kube-apiserver and,
// on request, kube-controller-manager, kube-scheduler and kwok) for programs outside this
// module, such as the benchmarks in bench/, which cannot import internal/testenv.
//
// It adds nothing of its own: every name is internal/testenv's, so tests and benchmarks
// start the same control plane with the same flags. See that package for the details.
package controlplane

// Package e2e holds the end-to-end test of nephele's deployment artifacts on a real
// cluster (package localcluster: real kubelets, containerd and runc on this machine):
// `nephele manifests | kubectl apply -f -`, the CCM's pods pulling their image from the
// cluster's registry, electing a leader and initializing the nodes, a LoadBalancer
// Service with traffic reaching pods, /metrics through the metrics Service with and
// without RBAC, a rolling image update with the leader gap measured, `kubectl delete
// -f`, the least-privilege comparison of the kube-apiserver's audit log with the
// rendered RBAC, and the component flags docs/deploy.md prescribes for an external CCM.
// It has no code of its own.
package e2e

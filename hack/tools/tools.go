//go:build tools

// Package tools pins the control-plane binaries nephele's tests run against.
// It is never compiled into nephele; `make tools` builds these commands into bin/:
// the control plane, and the node components (kubelet, kube-proxy) and kubectl that
// real nodes run.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)

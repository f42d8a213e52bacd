//go:build tools

// Package tools pins what a real node runs beside the kubelet: containerd v2 (kubelet 1.37
// drops containerd 1.x) with its runc shim and ctr, and the CNI plugins nephele's node network
// uses. It is its own module because containerd and Kubernetes pin different versions of
// shared dependencies. `make tools` builds these commands into bin/; runc comes from Debian
// (it needs cgo and libseccomp).
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/meta/portmap"
)

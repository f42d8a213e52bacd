//go:build tools

// Package tools pins kwok, which simulates kubelets for nephele's tests. kwok pins
// other k8s.io versions than Kubernetes v1.36, so it has a module of its own.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"

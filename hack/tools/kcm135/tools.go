//go:build tools

// Package tools pins kube-controller-manager v1.35, used by the leader-migration interop
// tests. kube-controller-manager v1.36.x cannot run migrated controllers: it exits with
// "informer name \"kube-controller-manager\" is already registered" as soon as it takes
// the migration lease. v1.35 is also the realistic peer: a cluster migrates by upgrading
// to a CCM while an older kube-controller-manager still holds the migration lease.
package tools

import _ "k8s.io/kubernetes/cmd/kube-controller-manager"

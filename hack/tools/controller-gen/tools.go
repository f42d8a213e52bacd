//go:build tools

// Package tools pins controller-gen, which generates the operator's CRD and deepcopy
// code (make generate). A module of its own, so controller-tools' dependencies stay out
// of nephele's; it is never compiled into nephele.
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)

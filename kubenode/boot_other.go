//go:build !linux

package kubenode

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
)

// Boot runs a node; nodes need Linux namespaces, cgroups and mounts.
func Boot(context.Context, *Node, logr.Logger) error {
	return errors.New("a real node runs on Linux only")
}

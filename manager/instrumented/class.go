package instrumented

import (
	"context"

	"github.com/nephele-dev/nephele/cloud"
)

// ClassOf returns the class ctx carries (cloud.WithClass) for a call of op, or op's
// default class.
func ClassOf(ctx context.Context, op cloud.Operation) cloud.Class {
	if c, ok := cloud.ClassFrom(ctx); ok {
		return c
	}
	return DefaultClass(op)
}

// DefaultClass is the class of a call of op whose context carries none. Creating what
// a new object needs (an instance lookup or listing for a joining node, a route, a
// load balancer, and deleting one; a batch of route changes, which the route controller
// tags refine when it holds only deletions) is critical; reading or updating what already
// exists is refine. The controllers tag the exceptions: a periodic route listing is
// refine, an ensure of a load balancer that already has an address is refine.
func DefaultClass(op cloud.Operation) cloud.Class {
	switch op {
	case cloud.OpInstanceMetadata, cloud.OpListInstances,
		cloud.OpEnsureLoadBalancer, cloud.OpEnsureLoadBalancerDeleted,
		cloud.OpCreateRoute, cloud.OpApplyRoutes, cloud.OpListRoutes:
		return cloud.ClassCritical
	default:
		return cloud.ClassRefine
	}
}

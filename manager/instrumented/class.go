package instrumented

import (
	"context"

	"github.com/nephele-dev/nephele/cloud"
)

// Class is the priority class of a cloud call. When calls wait for the budget, a
// waiting ClassCritical call goes first, but ClassRefine calls still get at least one
// token in every RefineEvery (see Budget), so that no class starves.
type Class string

const (
	// ClassCritical is work that keeps a node unschedulable or a Service without an
	// address until it is done: node initialization (instance lookups and listings),
	// the route of a new node, creating or deleting a load balancer.
	ClassCritical Class = "critical"
	// ClassRefine is work that only refines what already serves: backend updates of
	// load balancers that have an address, periodic drift checks, address refreshes,
	// lifecycle checks of running nodes, deleting stale routes.
	ClassRefine Class = "refine"
)

type classKey struct{}

// WithClass returns ctx carrying class: every cloud call made through the instrumented
// path with the returned context waits for the budget in that class, whatever its
// operation's default (see DefaultClass).
func WithClass(ctx context.Context, class Class) context.Context {
	return context.WithValue(ctx, classKey{}, class)
}

// ClassOf returns the class ctx carries for a call of op, or op's default class.
func ClassOf(ctx context.Context, op cloud.Operation) Class {
	if c, ok := ctx.Value(classKey{}).(Class); ok && (c == ClassCritical || c == ClassRefine) {
		return c
	}
	return DefaultClass(op)
}

// DefaultClass is the class of a call of op whose context carries none. Creating what
// a new object needs (an instance lookup or listing for a joining node, a route, a
// load balancer, and deleting one) is critical; reading or updating what already
// exists is refine. The controllers tag the exceptions: a periodic route listing is
// refine, an ensure of a load balancer that already has an address is refine.
func DefaultClass(op cloud.Operation) Class {
	switch op {
	case cloud.OpInstanceMetadata, cloud.OpListInstances,
		cloud.OpEnsureLoadBalancer, cloud.OpEnsureLoadBalancerDeleted,
		cloud.OpCreateRoute, cloud.OpListRoutes:
		return ClassCritical
	default:
		return ClassRefine
	}
}

package cloud

import "context"

// Class is the priority class of a cloud call. A provider never sees it: the manager's
// cloud call path reads it from the call's context to order calls that wait for the
// shared cloud budget, and the controllers' work queues order keys by the same two
// classes. While calls (or keys) of both classes wait, ClassCritical goes first, but
// ClassRefine still gets at least one turn in every RefineEvery, so that neither starves.
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

// RefineEvery is the share of turns ClassRefine work is sure of: while work of both
// classes waits, one turn in RefineEvery goes to the oldest refine work. It holds for
// the cloud budget's tokens and for a prioritized work queue's keys alike, so that the
// share refine work keeps is one number however it waits.
const RefineEvery = 5

type classKey struct{}

// WithClass returns ctx carrying class: every cloud call made through the manager's
// call path with the returned context waits for the budget in that class, whatever
// its operation's default. A controller tags the calls whose class differs from their
// operation's default (a periodic listing is refine, say).
func WithClass(ctx context.Context, class Class) context.Context {
	return context.WithValue(ctx, classKey{}, class)
}

// ClassFrom returns the class ctx carries, and whether it carries a valid one.
func ClassFrom(ctx context.Context) (Class, bool) {
	c, ok := ctx.Value(classKey{}).(Class)
	return c, ok && (c == ClassCritical || c == ClassRefine)
}

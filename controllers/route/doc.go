// Package route is the node-route-controller: it keeps one cloud route per node pod
// CIDR, so pod traffic reaches the node that owns the CIDR, and reports the outcome in
// each Node's NetworkUnavailable condition.
//
// Upstream's route controller lists every route and walks every node on each period,
// and (with the watch-based feature gate) on every node event too. This controller
// works per node instead: node events reconcile just that node against a cached copy
// of the last route listing, which it updates from its own creates and deletes. The
// cloud is listed once per drift period (--route-reconciliation-period), after errors
// (at most once per ErrorRelistInterval), and before deleting a route it created but
// has not seen listed yet, so ListRoutes calls do not grow with the number of nodes.
//
// A provider whose Routes also implement cloud.RouteBatcher gets the changes of the
// node syncs that wait at the same moment in one ApplyRoutes call (batch.go), one call
// in flight at a time; the others get one CreateRoute or DeleteRoute per route.
//
// Routes outside the cluster CIDRs are never touched: they belong to someone else.
package route

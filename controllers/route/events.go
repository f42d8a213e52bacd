package route

// Event reasons this controller records on Nodes.
const (
	// EventFailedToCreateRoute is recorded when the cloud refused a route for a node.
	EventFailedToCreateRoute = "FailedToCreateRoute"
	// EventFailedToDeleteRoute is recorded when a stale route of an existing node could
	// not be deleted.
	EventFailedToDeleteRoute = "FailedToDeleteRoute"
	// EventInvalidPodCIDR is recorded when a node's pod CIDR cannot be parsed.
	EventInvalidPodCIDR = "InvalidPodCIDR"
	// EventPodCIDROutsideClusterCIDR is recorded when a node's pod CIDR is outside every
	// --cluster-cidr; the controller routes only inside them.
	EventPodCIDROutsideClusterCIDR = "PodCIDROutsideClusterCIDR"
	// EventPodCIDRConflict is recorded when another existing node claims the same pod
	// CIDR and owns its route.
	EventPodCIDRConflict = "PodCIDRConflict"
)

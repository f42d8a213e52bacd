package loadbalancer

// Event reasons, as upstream's service controller records them.
const (
	EventEnsuringLoadBalancer     = "EnsuringLoadBalancer"
	EventEnsuredLoadBalancer      = "EnsuredLoadBalancer"
	EventSyncLoadBalancerFailed   = "SyncLoadBalancerFailed"
	EventDeletingLoadBalancer     = "DeletingLoadBalancer"
	EventDeletedLoadBalancer      = "DeletedLoadBalancer"
	EventUpdatedLoadBalancer      = "UpdatedLoadBalancer"
	EventUpdateLoadBalancerFailed = "UpdateLoadBalancerFailed"
	EventDeleteLoadBalancerFailed = "DeleteLoadBalancerFailed"
	EventUnAvailableLoadBalancer  = "UnAvailableLoadBalancer"
)

package cloud

// Operation names one method of the capability interfaces. The values are the
// operation labels of the manager's cloud metrics (nephele_cloud_requests_total) and
// name the operations a fake cloud injects faults into: one list for both.
type Operation string

// The operations, one per method of Instances, InstanceLister, LoadBalancers, Routes and
// RouteBatcher.
const (
	OpInstanceMetadata           Operation = "instance_metadata"
	OpListInstances              Operation = "list_instances"
	OpGetLoadBalancer            Operation = "get_load_balancer"
	OpEnsureLoadBalancer         Operation = "ensure_load_balancer"
	OpUpdateLoadBalancerBackends Operation = "update_load_balancer_backends"
	OpEnsureLoadBalancerDeleted  Operation = "ensure_load_balancer_deleted"
	OpListRoutes                 Operation = "list_routes"
	OpCreateRoute                Operation = "create_route"
	OpDeleteRoute                Operation = "delete_route"
	// OpApplyRoutes is RouteBatcher.ApplyRoutes, the optional batch of route changes.
	OpApplyRoutes Operation = "apply_routes"
)

// Operations returns every operation, in the order of the contract.
func Operations() []Operation {
	return []Operation{
		OpInstanceMetadata, OpListInstances,
		OpGetLoadBalancer, OpEnsureLoadBalancer, OpUpdateLoadBalancerBackends, OpEnsureLoadBalancerDeleted,
		OpListRoutes, OpCreateRoute, OpDeleteRoute, OpApplyRoutes,
	}
}

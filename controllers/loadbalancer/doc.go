// Package loadbalancer is the service-lb-controller: it gives every Service of type
// LoadBalancer that this manager serves a load balancer in the cloud, keeps the load
// balancer's backends in step with the eligible nodes, and deletes it when the Service
// goes away or stops asking for one.
//
// The controller follows upstream's service controller where users can see it (the
// finalizer service.kubernetes.io/load-balancer-cleanup, the event reasons, the load
// balancer name, the node exclusion label and taints) and departs from it where upstream
// is known to scale badly:
//
//   - Node changes are batched. Node events only update an in-memory set of eligible
//     backends; once per batch window the controller compares that set with what each
//     load balancer last received and queues only the load balancers whose backends
//     changed. A node heartbeat changes nothing and costs nothing.
//   - Backend changes call UpdateLoadBalancerBackends, never a full EnsureLoadBalancer.
//   - Each Service is one work queue key, handled by one of several workers, and no lock
//     is held across a cloud call, so one load balancer whose calls hang does not hold up
//     the others.
//   - Per-Service state lives only while the Service exists.
package loadbalancer

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
//
// # Load balancer classes
//
// A controller serves the Services of one class (--load-balancer-class, none by
// default) and touches another Service only where it really holds state for it, so that
// managers of different classes, nephele's or others', run side by side. The cleanup
// finalizer cannot tell: every implementation shares it (KEP-1959). Upstream's default
// controller skips Services with a class, yet removes the finalizer (and clears the
// status) of any Service being deleted or no longer a LoadBalancer, another
// implementation's included. Here:
//
//   - A LoadBalancer belongs to its class: the apiserver refuses to change
//     spec.loadBalancerClass while the type stays LoadBalancer. A Service of another
//     class is never this controller's, finalizer and status included.
//   - The only way to change a class is through another type, where the apiserver clears
//     the class. What was a LoadBalancer of this controller's class is known from the
//     load balancers it ensured in this process and from ClassAnnotation, which it adds
//     in the patch that adds the finalizer and removes in the one that removes it, so the
//     record survives restarts and leader changes. Such a Service is cleaned up as before.
//   - If the Service is a LoadBalancer of another class by the time the controller looks
//     (it missed the type in between), the controller deletes the load balancer it made
//     and removes its annotation, and leaves the finalizer and status to the new class.
//   - A finalizer without a record predates the annotation (upstream's controller or an
//     older nephele added it): the default class cleans such a Service up, as upstream
//     does; a class controller leaves it alone.
package loadbalancer

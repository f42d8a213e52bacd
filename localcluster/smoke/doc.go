// Package smoke is the scripted check of a cluster localcluster started: `nephele up
// --smoke` runs it, and so can any integration test that has a cluster.
//
// The checks depend on what the nodes are (localcluster.Config.NodeMode):
//
//   - Real nodes: before nephele's cloud-controller-manager runs, a probe pod runs on
//     every node and pods of different nodes do not reach each other (no route exists
//     yet). Then the CCM starts and every node is initialized; the route controller's
//     routes carry pod-to-pod traffic, a route deleted behind its back breaks it and its
//     drift check restores it; a Deployment of the demo server behind a LoadBalancer
//     Service with externalTrafficPolicy Local is reached through the cloud's VIP on
//     every node, health-checked through kube-proxy; `kubectl logs` and `exec` work;
//     scaled to one replica only its node is healthy; terminating that node's instance
//     makes the lifecycle controller delete the Node and the pod comes back elsewhere;
//     deleting the Service deletes the cloud's load balancer.
//   - Kwok nodes: every node is initialized and routed; a LoadBalancer Service gets its
//     VIP, the cloud's load balancer finds every node healthy through the node agent's
//     health check port, HTTP and UDP through the VIP are answered by the node agent;
//     deleting the Service deletes the load balancer and closes the VIP's listener.
//
// Both end with the checks `nephele migrate check` makes (every Node initialized by
// nephele, the Service owned by it, nephele holding its lease). A cluster must be
// started with the settings of Configure: the CCM deferred (the first checks of real
// nodes need the cluster without it), and short periods for the node-loss and route
// drift checks.
//
// Every check is bounded by Options.Timeout and prints one PASS or FAIL line with what
// it saw; the first failure stops the run, since later checks build on earlier ones.
package smoke

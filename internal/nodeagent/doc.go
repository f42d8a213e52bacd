// Package nodeagent stands in for kube-proxy and the workload on the simulated nodes of
// `nephele up`. Its nodes are kwok nodes: they run no containers and no kube-proxy, so
// nothing would answer on a Service's node ports and a cloud load balancer forwarding to
// them would lead nowhere. The agent watches Services and, on every node's address,
// answers on their node ports:
//
//   - TCP node ports: a small HTTP server answering every request with
//     "hello from <node> (nephele node agent) ...", so curl through a load balancer VIP
//     shows which node served it;
//   - UDP node ports: an echo server, answering every datagram with itself;
//   - the health check node port of a Service with externalTrafficPolicy Local:
//     GET /healthz answers 200, as kube-proxy does for a node with a local endpoint (the
//     stand-in workload is on every node).
//
// Services of type NodePort and LoadBalancer both get their node ports served, as
// kube-proxy serves both. Listeners open and close as Services come and go.
package nodeagent

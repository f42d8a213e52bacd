// Package dataplane is the local cloud's load balancer data plane, in two kinds behind
// one interface (Plane):
//
//   - Proxy, the user-space plane: for each load balancer it listens on VIP:port for
//     every port and forwards TCP connections and UDP datagrams to a backend's
//     address:nodePort, round-robin over the backends that pass their health checks
//     (or, with client affinity, by a hash of the client's address). The backends see
//     the proxy, not the client: Kubernetes calls this ipMode Proxy. Clients outside
//     the source ranges are refused. It needs no privilege, with VIPs on the loopback
//     range: kwok clusters, the benchmarks and most tests use it.
//   - Kernel, for a cloud whose instances are hosts (package hosts) with a VIP pool: the
//     machine's kernel sends each new connection unchanged (the VIP its destination, the
//     client its source) to one healthy backend host, chosen at random or, with client
//     affinity, the host the client last went to; kube-proxy there does the rest, as
//     for any ingress IP of ipMode VIP. Nodes need no node port. Package hosts programs
//     the rules; this package decides which hosts take new connections.
//
// Applying a load balancer is all or nothing: the Proxy opens every new listener before
// any goes live, the Kernel programs the machine before the caller's commit, and if a
// listener cannot be opened (a port conflict reports *ConflictError), the machine
// refuses, or the commit fails, the old configuration keeps serving.
//
// Health checks are TCP connects to each backend's node port, or, when the load
// balancer has a health check node port, an HTTP GET of /healthz on it: kube-proxy
// answers there, on the Service's health check node port for externalTrafficPolicy
// Local and on its own port 10256 for Cluster (which the local provider sends), and
// fails for a node that is being removed, so its connections drain. UDP ports without
// a health check node port, and ports without a node port, cannot be probed and count
// every backend as healthy. When every backend of a port is unhealthy, traffic goes to
// all of them (fail open), as cloud load balancers do.
package dataplane

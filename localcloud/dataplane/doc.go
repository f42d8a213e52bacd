// Package dataplane is the local cloud's load balancer data plane: for each load
// balancer it listens on VIP:port for every port and forwards TCP connections and UDP
// datagrams to a backend's address:nodePort, round-robin over the backends that pass
// their health checks. Clients outside the source ranges are refused.
//
// Applying a load balancer is all or nothing: every new listener is opened before any
// goes live, and if one cannot be opened (a port conflict reports *ConflictError) or
// the caller's commit fails, none of the new ones stay and the old configuration keeps
// serving.
//
// Health checks are TCP connects to each backend's node port, or, when the load
// balancer has a health check node port, an HTTP GET of /healthz on it: kube-proxy
// answers there, on the Service's health check node port for externalTrafficPolicy
// Local and on its own port 10256 for Cluster (which the local provider sends), and
// fails for a node that is being removed, so its connections drain. UDP ports without
// a health check node port cannot be probed and count every backend as healthy. When
// every backend of a port is unhealthy, traffic goes to all of them (fail open), as
// cloud load balancers do.
package dataplane

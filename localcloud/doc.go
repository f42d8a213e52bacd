// Package localcloud is the root of nephele's local cloud: a real cloud service on one
// machine, with an HTTP/JSON API, durable state, load balancers whose VIPs really carry
// TCP and UDP to the nodes, pod-network routes, per-operation fault knobs and call
// accounting. It is the default cloud of `nephele up`, of the tests and of the benchmarks.
//
// The service is split by job:
//
//   - [github.com/nephele-dev/nephele/localcloud/api]: wire types shared by server and
//     client, operation names, and validation.
//   - [github.com/nephele-dev/nephele/localcloud/store]: durable state in one bbolt file.
//   - [github.com/nephele-dev/nephele/localcloud/dataplane]: the load balancers' data
//     planes, with health checks, source ranges and affinity: TCP/UDP proxies on
//     loopback VIPs (ipMode Proxy), or, for host instances, the kernel routing each
//     connection to a node unchanged (ipMode VIP).
//   - [github.com/nephele-dev/nephele/localcloud/faults]: latency, errors, throttling,
//     outages and eventual consistency, per operation.
//   - [github.com/nephele-dev/nephele/localcloud/hosts]: host instances, real hosts on the
//     cloud's machine (namespaces on a bridge, cgroups, a supervised boot command), the
//     guards that keep their traffic on the machine, the route table's data plane and
//     the kernel rules of the load balancers' route to the hosts.
//   - [github.com/nephele-dev/nephele/localcloud/server]: the HTTP service tying them
//     together, with authentication and metrics.
//   - [github.com/nephele-dev/nephele/localcloud/client]: the typed Go client, mapping
//     answers to the provider contract's errors.
//
// The binary is cmd/localcloud; docs/localcloud.md is the API reference.
package localcloud

// Package local is the cloud.Provider for nephele's local cloud (package localcloud):
// instances, load balancers whose VIPs really forward traffic, and routes, over the
// local cloud's HTTP API. It is the provider `nephele up`, the tests and the benchmarks
// run by default.
//
// It has every capability: Instances (by provider ID "local://<instance id>" or by
// node name), InstanceLister (one paged listing feeds the manager's inventory),
// LoadBalancers and Routes. Errors keep the provider contract's promises: only a 404
// whose reason is NotFound is cloud.ErrNotFound; throttling is a *cloud.ThrottledError
// with the cloud's Retry-After; 501 is cloud.ErrNotImplemented; 400 is cloud.ErrInvalid
// naming the offending field; everything else (5xx, 409, timeouts, network errors) is
// temporary.
//
// A binary adds the provider to its registry with Register and selects it with
// --cloud-provider=local; its --cloud-config is a YAML file described by Config.
package local

// Package upstream hosts any implementation of k8s.io/cloud-provider's
// cloudprovider.Interface as a nephele cloud.Provider, so that an existing provider
// moves to nephele's manager with a few lines of main and no change to its code:
//
//	import _ "example.com/cloud-provider-foo/pkg/foo" // registers "foo" upstream-style
//
//	func main() {
//		r := cloud.NewRegistry()
//		if err := r.Register("foo", upstream.Registered("foo")); err != nil { ... }
//		os.Exit(manager.Execute(manager.NewCommand("foo-cloud-controller-manager", r, controllers.Default())))
//	}
//
// # Capabilities
//
// Instances come from InstancesV2 when the provider has it, otherwise from Instances
// (with Zones for the zone and region when it has that). One nephele lookup costs the
// upstream calls the upstream controllers would make for the same answer: existence,
// metadata (or addresses, type and zone) and shutdown state. Upstream has no batch
// listing, so InstanceLister is always absent and the manager looks instances up one
// by one. LoadBalancers and Routes are present when the provider's are.
//
// # Errors
//
// Upstream errors are mapped to the contract's, and keep the upstream error
// reachable with errors.Is and errors.As:
//
//   - cloudprovider.InstanceNotFound from an instance call, InstanceExists answering
//     false, and GetLoadBalancer answering exists=false are cloud.ErrNotFound. An
//     InstanceNotFound from a load balancer or route call is not: it names a backend,
//     not the object of the call.
//   - a (wrapped) *api.RetryError is a *cloud.ThrottledError with its RetryAfter.
//   - cloudprovider.NotImplemented is cloud.ErrNotImplemented; an unimplemented
//     InstanceShutdown leaves the instance's state unknown, an unimplemented
//     InstanceType or zone leaves the field empty.
//   - cloudprovider.ImplementedElsewhere is cloud.ErrNotImplemented too, and an
//     instance or route call answering it switches that capability off: from then on
//     the provider reports it absent. A load balancer call answering it does not,
//     because upstream providers answer it per Service.
//   - anything else is a temporary error; a call whose context ends is the context's
//     error. None of them is ever NotFound.
//
// # Contexts
//
// Many upstream providers ignore their context. The adapter does not: a call returns
// when its context ends, with the context's error. The upstream call it made goes on in
// the background until it returns, and its result is discarded; every contract call is
// idempotent, so the controller's retry converges. A panic in an upstream call is
// returned as an error.
//
// # Idempotency
//
// Upstream CreateRoute and DeleteRoute need not be idempotent; the contract's must
// be. The adapter lists the routes first: CreateRoute of a route that exists with the
// same target and DeleteRoute of a route that does not exist succeed without calling
// the provider, and DeleteRoute hands the provider the route exactly as it listed it.
//
// # Initialize
//
// Initialize calls the provider's Initialize with a cloudprovider.ControllerClientBuilder
// backed by the manager's cloud.ClientBuilder and the manager's lifetime as the stop
// channel, then hands a provider that is a cloudprovider.InformerUser a shared informer
// factory, started and shut down with the manager. ConfigOrDie and ClientOrDie cannot
// return an error: when the manager's builder fails they log the error and panic with a
// message naming the client, never returning nil. Initialize builds one client first,
// so that a broken builder fails Initialize instead, and turns a panic inside the
// provider's Initialize into an error; a panic in a goroutine the provider starts ends
// the process, as upstream's klog.Fatal would.
package upstream

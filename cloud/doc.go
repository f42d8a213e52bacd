// Package cloud is the provider contract of nephele: the small set of capability
// interfaces a cloud implements to get a cloud-controller-manager, the typed errors that
// keep the controllers safe when the cloud misbehaves, provider ID helpers, and a
// registry of named provider factories.
//
// A provider implements [Provider] and returns, for each capability it has, a
// non-nil implementation and true. The manager discovers capabilities once at start and
// runs only the controllers whose capabilities are present.
//
// # Errors
//
// Errors are the heart of the contract. A provider returns an error wrapping
// [ErrNotFound] only when the cloud positively says a thing does not exist: controllers
// delete Nodes on that answer alone. Timeouts, 5xx answers and empty pages must never be
// reported as NotFound. [ThrottledError] carries the cloud's Retry-After, which the
// manager honours before it calls again. [ErrNotImplemented] disables a capability
// cleanly. [ErrInvalid] tells a controller that the request can never succeed as it is
// (a bad annotation, an unsupported protocol), so it warns the user instead of counting a
// cloud failure. Everything else is treated as temporary and retried with backoff.
//
// # Kits
//
// Beside the contract, this tree holds what a provider author tests with: cloudtest, the
// conformance suite a provider runs against itself, and fakecloud, an in-memory cloud
// for controller tests. How the manager calls a provider (one instrumented call path,
// the shared instance inventory) is the manager's, in manager/instrumented and
// manager/inventory.
package cloud

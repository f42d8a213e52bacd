// Package manager is the generic cloud-controller-manager runtime every nephele CCM is
// built from: upstream-compatible flags and their validation, --controllers selection,
// leader election and leader migration, the secure serving endpoints (health, metrics,
// pprof), the instrumented cloud call path with every call fenced on the leader lease
// that guards it (fence.go), and the lifecycle of the controllers.
//
// A provider binary builds a cloud.Registry, a list of ControllerSpecs (normally the
// four cloud controllers) and calls NewCommand.
package manager

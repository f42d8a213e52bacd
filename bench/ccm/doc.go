// Package ccm runs one cloud-controller-manager in the current process, for the
// benchmarks to start as a process of its own and measure from outside:
//
//   - Nephele: nephele's manager with the four nephele controllers and providers/local,
//     exactly what cmd/cloud-controller-manager runs.
//   - Upstream: k8s.io/cloud-provider's app (the upstream cloud-controller-manager
//     command, with its default controllers) with the upstreamcloud provider.
//
// Both take the upstream flag names (--cloud-provider=local, --cloud-config, --kubeconfig,
// --concurrent-service-syncs, ...), so the benchmark passes each the same values where
// both have the knob.
//
// Beside the manager, the process samples its Go runtime's memory every quarter second
// and serves the current and peak values as JSON on a loopback port (see Stats), so the
// harness can read the heap without either manager's metrics endpoint and its auth.
package ccm

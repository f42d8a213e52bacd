// Package ccm is the entry point of the benchmarks' controller process: it runs one
// cloud-controller-manager, chosen with --impl among those the binary carries, for the
// harness to start as a process of its own and measure from outside. The managers are
// in the subpackages, so that each can be built into a binary of its own whose memory is
// that manager's alone:
//
//   - nephele: nephele's manager with the four nephele controllers and providers/local,
//     exactly what cmd/cloud-controller-manager runs (binary bench/cmd/ccm-nephele);
//   - upstream: k8s.io/cloud-provider's app (the upstream cloud-controller-manager
//     command, with its default controllers) with the upstreamcloud provider (binary
//     bench/cmd/ccm-upstream).
//
// Both take the upstream flag names (--cloud-provider=local, --cloud-config, --kubeconfig,
// --concurrent-service-syncs, ...), so the benchmark passes each the same values where
// both have the knob.
//
// Beside the manager, the process samples its Go runtime's memory every quarter second
// and serves the current and peak values as JSON on a loopback port (see Stats), so the
// harness can read the heap without either manager's metrics endpoint and its auth.
// The same port serves the process's pprof profiles (/debug/pprof/), to find where a
// run's memory and CPU go.
package ccm

// Package upstream runs the upstream cloud-controller-manager of k8s.io/cloud-provider
// (its app package with the default controllers) over the upstreamcloud provider, for the
// benchmarks' controller process. It imports nothing of nephele's controllers or
// manager, so a binary built from it measures upstream's memory alone.
package upstream

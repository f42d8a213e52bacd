// Package nephele runs nephele's cloud-controller-manager (the manager, the four nephele
// controllers and providers/local, as cmd/cloud-controller-manager does) for the
// benchmarks' controller process. It imports nothing of upstream's, so a binary built
// from it measures nephele's memory alone.
package nephele

// Package features holds the feature gates of a nephele cloud-controller-manager
// (--feature-gates): every gate upstream's cloud-controller-manager v1.36 accepts, with
// upstream's names, stages and defaults, and nephele's own (none yet). An upstream manifest's
// --feature-gates therefore keeps working; what each gate does in nephele is in
// docs/manager.md ("Feature gates"), and Meaning says it in one line.
//
// New returns a gate of its own to every caller, so that two managers in one process
// (tests) never share one: nephele keeps no process-wide gate. Upstream's gates are
// copied from where upstream defines them (k8s.io/apiserver, k8s.io/controller-manager,
// component-base's logging), never typed again here.
package features

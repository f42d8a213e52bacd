// Package handover moves a running cluster's cloud controllers from upstream's
// cloud-controller-manager (k8s.io/cloud-provider's app over the local cloud, as package
// ccm/upstream runs it) to nephele's, following the runbook `nephele migrate plan` prints,
// and measures the move: which load balancers and Nodes it touched, and how long
// nothing, or both, ran the controllers. It lives in the bench module because upstream's
// app and its dependencies stay out of nephele's module; its test kit is nephele's
// handover/scenario. docs/migration.md has the results.
package handover

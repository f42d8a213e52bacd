// Package hybrid holds the test of a cluster whose nodes belong to several clouds, and
// to none: nephele's cloud-controller-manager for one local cloud runs beside upstream's
// (k8s.io/cloud-provider's controllers) for a second local cloud under another
// provider-ID scheme, and neither nephele's controllers touch a node nephele does not
// own (KEP-5778, docs/hybrid.md). What upstream's controllers do to the other nodes is
// recorded as evidence, not as a failure.
package hybrid

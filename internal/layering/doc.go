// Package layering holds only a test: the one that keeps nephele's layers as
// docs/architecture.md draws them. It reads the import graph with go list and fails on
// an import from a lower layer to a higher one, on production code importing the testing
// package or a test kit (internal/testkit), and on either binary a user runs (nephele,
// cloud-controller-manager) linking the testing package.
package layering

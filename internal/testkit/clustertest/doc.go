// Package clustertest gives tests what a real cluster (package localcluster) needs: a
// bin directory with the programs of make tools and nephele's own commands and images
// freshly built from this source tree (BinDir), a bridge and address ranges of the
// test's own, so that a test meets neither a developer's `nephele up` nor another
// package's cluster running at the same time (NewRanges), and Start, which starts a
// cluster on them in a short directory, stops it when the test ends and checks the
// machine is as it was.
package clustertest

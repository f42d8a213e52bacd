// Package testlog gives tests a logr.Logger that writes to the test's log while the test
// runs and drops what is logged after it ended.
//
// Components a test starts (a controller-runtime manager, a server) can log from
// goroutines that outlive the test by a moment: controller-runtime's manager, for one,
// logs the errors its runnables return after Start has returned. testr hands those to
// t.Log, which the race detector reports against the testing package marking the test
// done, and which panics outright when the test is already done. This package's logger
// stops forwarding when the test's cleanups run, under a lock, so neither can happen.
package testlog

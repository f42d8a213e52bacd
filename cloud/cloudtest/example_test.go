package cloudtest_test

import (
	"context"
	"testing"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/cloudtest"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
)

// A provider proves itself against the suite from its own tests: Run makes one subtest
// per clause, so `go test -run TestConformance/loadbalancers/` runs the load balancer
// clauses alone. This is the whole of a conformance test for a provider whose cloud has
// no instance factory or fault knobs; the clauses needing them are skipped, saying so.
func ExampleRun() {
	// In the provider's package:
	testConformance := func(t *testing.T) {
		cloudtest.Run(t, cloudtest.Setup{
			NewProvider: func(context.Context) (cloud.Provider, error) {
				return fakecloud.New(fakecloud.Options{}) // the provider under test, built from its config
			},
			Capabilities: cloudtest.AllCapabilities(),
		})
	}
	_ = testConformance
}

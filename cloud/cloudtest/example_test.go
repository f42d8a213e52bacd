package cloudtest_test

import (
	"context"
	"fmt"
	"strings"
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

// Tools run the suite without the testing package: RunSuite returns the report, which
// prints as text or JUnit XML.
func ExampleRunSuite() {
	rep, err := cloudtest.RunSuite(context.Background(), cloudtest.Setup{
		NewProvider: func(context.Context) (cloud.Provider, error) {
			return fakecloud.New(fakecloud.Options{})
		},
		Capabilities: cloudtest.AllCapabilities(),
		NamePrefix:   "ct-example",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	passed, failed, skipped := rep.Counts()
	fmt.Printf("%s: %d passed, %d failed, %d skipped\n", rep.Provider, passed, failed, skipped)
	for _, clause := range []string{"lb/ensure-idempotent", "instances/deleted-not-found", "errors/failing-not-not-found"} {
		r, _ := rep.Result(clause)
		fmt.Println(strings.TrimSpace(fmt.Sprintf("%s %s %s", r.Status, r.Clause, r.Message)))
	}
	// Output:
	// fake: 16 passed, 0 failed, 11 skipped
	// PASS lb/ensure-idempotent
	// SKIP instances/deleted-not-found the setup has no InstanceFactory to create test instances
	// SKIP errors/failing-not-not-found the setup cannot make the cloud fail (Setup.Failing is nil)
}

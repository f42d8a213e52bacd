package conformance_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/conformance"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
)

// Tools run the suite without the testing package: RunSuite returns the report, which
// prints as text or JUnit XML.
func ExampleRunSuite() {
	rep, err := conformance.RunSuite(context.Background(), conformance.Setup{
		NewProvider: func(context.Context) (cloud.Provider, error) {
			return fakecloud.New(fakecloud.Options{MaxRouteChanges: 10})
		},
		Capabilities: conformance.AllCapabilities(),
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
	// fake: 17 passed, 0 failed, 11 skipped
	// PASS lb/ensure-idempotent
	// SKIP instances/deleted-not-found the setup has no InstanceFactory to create test instances
	// SKIP errors/failing-not-not-found the setup cannot make the cloud fail (Setup.Failing is nil)
}

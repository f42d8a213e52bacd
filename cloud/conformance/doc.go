// Package conformance is nephele's conformance suite: it checks that a cloud.Provider
// keeps the provider contract of package cloud, whatever the cloud behind it.
//
// It has no testing front end of its own, so that tools link it without the testing
// package (`nephele conformance` runs it through RunSuite). A provider runs it from its
// own tests through package conformance, which runs each clause as a subtest:
//
//	func TestConformance(t *testing.T) {
//		cloudtest.Run(t, cloudtest.Setup{
//			NewProvider:  func(ctx context.Context) (cloud.Provider, error) { return mycloud.New(cfg) },
//			Capabilities: []cloudtest.Capability{cloudtest.Instances, cloudtest.LoadBalancers},
//			Instances:    myInstanceFactory{},
//		})
//	}
//
// and tools run it through RunSuite, which returns a Report that prints as text
// (WriteText) or JUnit XML (WriteJUnit). Every front end runs the same checks in the same
// order (RunClauses).
//
// Every check names the clause of the contract it tests, such as
// "instances/deleted-not-found"; Clauses lists them all, and docs/conformance.md says
// what each protects. A check that cannot run is skipped with the reason: a capability
// the provider does not claim, something the setup lacks (an instance factory, a fault),
// or a clause the setup names in Skip.
//
// The suite tests the contract, never a particular cloud: it makes its own test
// instances through the setup's InstanceFactory, names everything it creates with a
// random prefix so that runs against a shared cloud do not collide, and removes what it
// created when it ends. A provider call that ignores its context is abandoned after
// Setup.CancelBound and reported, so the suite never hangs on a provider.
package conformance

// Package cloudtest runs nephele's conformance suite (package conformance) from a
// provider's Go tests: Run makes each clause of the provider contract a subtest, failed
// with the problems found or skipped with the reason.
//
//	func TestConformance(t *testing.T) {
//		cloudtest.Run(t, cloudtest.Setup{
//			NewProvider:  func(ctx context.Context) (cloud.Provider, error) { return mycloud.New(cfg) },
//			Capabilities: []cloudtest.Capability{cloudtest.Instances, cloudtest.LoadBalancers},
//			Instances:    myInstanceFactory{},
//		})
//	}
//
// It re-exports the suite's names, so the test needs this one import. It is a package of
// its own because it imports testing: tools such as `nephele conformance` run the same
// suite through conformance.RunSuite without linking the testing package.
package cloudtest

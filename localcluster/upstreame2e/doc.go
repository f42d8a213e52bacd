// Package upstreame2e runs upstream Kubernetes' end-to-end suite (e2e.test v1.36.3,
// built with nephele's provider by make e2e-bins from hack/tools/e2e) against a real
// localcluster, the way cloud-provider-kind's CI runs it against kind: the ginkgo v2 CLI
// on parallel nodes, --provider=skeleton, the suite's images from the cluster's own
// registry (KUBE_TEST_REPO_LIST), JUnit out. `nephele up --e2e` and make test's subset
// run it.
//
// Prepare builds the test images (images/e2eimages) and pushes them into the cluster's
// registry, and writes the repo list and the cloud config the suite's nephele provider
// reads. Run runs one Suite with the ginkgo CLI and reads its JUnit report into one
// Result per test that was selected: passed, failed (with the failure's first line and
// where) or skipped (with the reason the test gave); tests the focus and skip
// expressions left out are not listed.
//
// The suites (Suites) are those of docs/conformance.md: every [Feature:LoadBalancer]
// test and the [sig-network] [Conformance] tests on parallel ginkgo nodes, and the
// [Feature:CloudProvider] node test alone, last, since it deletes a node. Their skip
// expression starts from cloud-provider-kind's Prow job and keeps fewer skips: nephele
// runs "LoadBalancer Service without NodePort" and "type and ports of a TCP service",
// which kind skips.
//
// Failing load balancer tests wait up to 15 minutes each; Suite.Timeout bounds a whole
// run (ginkgo's --timeout), after which ginkgo reports what ran and what did not.
package upstreame2e

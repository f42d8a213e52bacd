package upstreame2e

import (
	"slices"
	"strings"
	"time"

	"github.com/nephele-dev/nephele/images/e2eimages"
)

// Suite is one run of the ginkgo CLI over e2e.test.
type Suite struct {
	// Name names the run and its report directory.
	Name string
	// Focus and Skip are ginkgo's --focus and --skip regular expressions.
	Focus, Skip string
	// Provider is e2e.test's --provider.
	Provider string
	// Parallel is the number of ginkgo nodes (processes); 1 runs the specs one by one.
	Parallel int
	// Timeout bounds the whole run (ginkgo --timeout): past it ginkgo stops and reports
	// what ran.
	Timeout time.Duration
	// Storage gives e2e.test the cluster's CSI driver as its external storage driver
	// (--storage.testdriver, StorageTestDriver): the cluster must run it
	// (localcluster.Config.Volumes).
	Storage bool
}

// kindSkip is cloud-provider-kind's Prow job's skip expression for IPv4
// (test-infra config/jobs/kubernetes-sigs/cloud-provider-kind), less the two load
// balancer tests kind cannot pass and nephele runs ("LoadBalancer Service without
// NodePort", "type and ports of a TCP service"). \[Serial\] comes from its PARALLEL=true.
var kindSkip = []string{`Alpha`, `Beta`, `NetworkPolicy`, `Disruptive`, `Flaky`, `IPv6`, `SCTPConnectivity`, `\[Serial\]`}

// Focus expressions of the suites.
var (
	// LoadBalancerFocus selects every test of test/e2e/network/loadbalancer.go.
	LoadBalancerFocus = `\[Feature:LoadBalancer\]`
	// NetworkConformanceFocus selects the [sig-network] tests marked [Conformance].
	NetworkConformanceFocus = `\[sig-network\].*\[Conformance\]`
	// CloudProviderFocus selects test/e2e/cloud/nodes.go.
	CloudProviderFocus = `\[Feature:CloudProvider\]`
	// StorageFocus selects the external storage suite (test/e2e/storage/external) for
	// nephele's CSI driver: provisioning, volume modes, expansion, topology, multi-volume.
	StorageFocus = `External.Storage \[Driver: csi\.nephele\.dev\]`
)

// storageSkip leaves out of the storage suite what a 2-core machine and one zone cannot
// run alongside everything else (kind's skips), and what the driver does not offer is
// skipped by the suite itself from the driver's capabilities.
var storageSkip = append(slices.Clone(kindSkip), `Slow`)

// Suites are the runs of `nephele up --e2e` (docs/conformance.md), given the parallel
// ginkgo nodes and a timeout for each run:
//
//   - "network": every [Feature:LoadBalancer] test and the [sig-network] [Conformance]
//     tests, --provider=skeleton, kind's skip list without its two load balancer skips;
//   - "storage", on a cluster with volumes only: upstream's external storage suite
//     against nephele's CSI driver (StorageTestDriver), without [Slow] and kind's skips;
//   - "cloud-provider": the [Feature:CloudProvider] node test alone, last (it deletes a
//     node), with nephele's provider standing in for upstream's null gce provider (the
//     test runs only for aws and gce: hack/tools/e2e/doc.go).
func Suites(parallel int, timeout time.Duration, volumes bool) []Suite {
	suites := []Suite{
		{
			Name:     "network",
			Focus:    LoadBalancerFocus + "|" + NetworkConformanceFocus,
			Skip:     strings.Join(kindSkip, "|"),
			Provider: "skeleton",
			Parallel: parallel,
			Timeout:  timeout,
		},
	}
	if volumes {
		suites = append(suites, Suite{
			Name:     "storage",
			Focus:    StorageFocus,
			Skip:     strings.Join(storageSkip, "|"),
			Provider: "skeleton",
			Parallel: parallel,
			Timeout:  timeout,
			Storage:  true,
		})
	}
	return append(suites,
		Suite{
			Name:     "cloud-provider",
			Focus:    CloudProviderFocus,
			Provider: "gce",
			Parallel: 1,
			Timeout:  timeout,
		})
}

// SubsetImages are the test images SubsetFocus's tests run (agnhost: the load balancer
// and webhook tests; busybox: the environment test); Prepare builds only these for it.
var SubsetImages = []e2eimages.Image{e2eimages.Agnhost, e2eimages.BusyBox}

// SubsetFocus are the tests make test runs on every CI run: the load balancer tests (the
// cleanup finalizer, the TCP type-and-ports test, source ranges and the four
// externalTrafficPolicy: Local tests), and two that prove the cluster around them: a
// mutating admission webhook, which kube-apiserver on the machine reaches at its pod
// (--enable-aggregator-routing), and a busybox pod's environment from a ConfigMap with
// names that are not shell identifiers (upstream busybox's ash keeps them).
var SubsetFocus = strings.Join([]string{
	`should handle load balancer cleanup finalizer for service`,
	`should be able to change the type and ports of a TCP service`,
	`should only allow access from service loadbalancer source ranges`,
	`LoadBalancers ExternalTrafficPolicy: Local`,
	`AdmissionWebhook \[Privileged:ClusterAdmin\] should mutate configmap \[Conformance\]`,
	`ConfigMap should be consumable via the environment`,
}, "|")

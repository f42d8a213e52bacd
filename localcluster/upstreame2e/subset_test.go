package upstreame2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/testkit/clustertest"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/localcluster/upstreame2e"
)

// subsetTimeout bounds the subset's ginkgo run. Passing, its tests take about a minute
// and a half on four ginkgo nodes; a failing load balancer test waits up to 15 minutes,
// so a data plane that breaks them is reported within make test's budget.
const subsetTimeout = 15 * time.Minute

// TestLoadBalancerSubset runs upstream's load balancer tests that every CI run must pass
// (upstreame2e.SubsetFocus: the cleanup finalizer, the TCP type-and-ports test, source
// ranges and the externalTrafficPolicy: Local tests, with a webhook test and a busybox
// environment test that prove the cluster around them) against a real 3-node cluster, on
// parallel ginkgo nodes, and fails naming each test that failed, with upstream's failure
// message and place, or that skipped itself: on this cluster every one of them must run.
func TestLoadBalancerSubset(t *testing.T) {
	hoststest.RequireRoot(t)
	bin := clustertest.BinDir(t)
	shared, err := controlplane.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range upstreame2e.Binaries {
		src := filepath.Join(shared, b)
		if _, err := os.Stat(src); err != nil {
			t.Fatalf("%v: run make e2e-bins (make test builds them)", err)
		}
		if err := os.Symlink(src, filepath.Join(bin, b)); err != nil {
			t.Fatal(err)
		}
	}
	c, dir := clustertest.Start(t, "nphe2e", bin, 3, nil)
	env, err := upstreame2e.Prepare(t.Context(), c, bin, filepath.Join(dir, "e2e"), upstreame2e.SubsetImages...)
	if err != nil {
		t.Fatal(err)
	}
	reportDir := filepath.Join(dir, "e2e-report")
	suite := upstreame2e.Suite{
		Name: "subset", Focus: upstreame2e.SubsetFocus, Skip: `\[Serial\]|Disruptive`,
		Provider: "skeleton", Parallel: 4, Timeout: subsetTimeout,
	}
	var out strings.Builder
	rep, err := env.Run(t.Context(), suite, reportDir, &out)
	if err != nil {
		t.Fatalf("%v\nginkgo's output:\n%s", err, out.String())
	}
	var summary strings.Builder
	if err := upstreame2e.WriteSummary(&summary, rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("upstream's load balancer subset (JUnit and log in %s):\n%s", filepath.Join(reportDir, suite.Name), summary.String())
	for _, r := range rep.Results {
		switch r.State {
		case upstreame2e.Failed:
			t.Errorf("FAILED %s: %s", r.Name, r.Message)
		case upstreame2e.Skipped:
			t.Errorf("SKIPPED %s: %s (every test of the subset must run on a 3-node cluster)", r.Name, r.Message)
		}
	}
	// The focus selects nine tests (v1.36.3); fewer means a test was renamed or a
	// ginkgo run ended early.
	if n := len(rep.Results); n < subsetTests {
		t.Errorf("%d tests reported, want %d: %s", n, subsetTests, fmt.Sprint(names(rep)))
	}
}

// subsetTests is how many tests upstreame2e.SubsetFocus selects in v1.36.3.
const subsetTests = 9

func names(r *upstreame2e.Report) []string {
	var n []string
	for _, res := range r.Results {
		n = append(n, res.Name)
	}
	return n
}

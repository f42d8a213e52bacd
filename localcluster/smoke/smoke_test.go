package smoke

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/testkit/clustertest"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
	"github.com/nephele-dev/nephele/localcluster"
)

func TestRunStopsAtTheFirstFailure(t *testing.T) {
	var out strings.Builder
	s := &smoke{out: &out, timeout: time.Minute}
	res := Result{NotRun: 3}
	var ran []string
	step := func(name string, err error) check {
		return check{name, func(context.Context) (string, error) {
			ran = append(ran, name)
			return "saw " + name, err
		}}
	}
	err := s.run(t.Context(), &res, []check{step("first", nil), step("second", errors.New("broken")), step("third", nil)})
	if err == nil || !strings.Contains(err.Error(), `smoke check "second" failed: broken`) {
		t.Errorf("run() = %v, want the second check's failure", err)
	}
	if want := (Result{Passed: 1, Failed: 1, NotRun: 1}); res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
	if strings.Join(ran, ",") != "first,second" {
		t.Errorf("ran %v, want the checks up to the first failure", ran)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "  PASS first: saw first (") ||
		!strings.HasPrefix(lines[1], "  FAIL second (") || !strings.HasSuffix(lines[1], "): broken") {
		t.Errorf("printed:\n%s\nwant a PASS line and a FAIL line with the reason", out.String())
	}
}

func TestConfigure(t *testing.T) {
	cfg := localcluster.Config{CCMArgs: []string{"--v=2"}}
	Configure(&cfg)
	if !cfg.DeferCCM {
		t.Error("the CCM is not deferred: the checks before it could not run")
	}
	if got := strings.Join(cfg.CCMArgs, " "); !strings.Contains(got, "--route-reconciliation-period=10s") || !strings.HasSuffix(got, "--v=2") {
		t.Errorf("CCM args %q: want the smoke settings, then the cluster's own (which win)", got)
	}
	if len(cfg.ControllerManagerArgs) != len(controllerManagerArgs) {
		t.Errorf("kube-controller-manager args %q, want the smoke settings", cfg.ControllerManagerArgs)
	}
}

// TestKwokCluster runs every check on a cluster of two kwok nodes, started the way
// `nephele up --kwok --smoke` starts it. (Real nodes' checks run in cmd/nephele's
// TestUpRealNodes, through the command.)
func TestKwokCluster(t *testing.T) {
	bin := clustertest.Commands(t, "localcloud", "cloud-controller-manager")
	cfg := localcluster.Config{
		NodeMode: localcluster.NodesKwok,
		Dir:      clustertest.Dir(t, "smoke"),
		BinDir:   bin,
		Nodes:    2,
		// Ranges of the test's own, apart from other tests' local clouds.
		InstanceCIDR: testnet.LoopbackPrefix(byte(210 + rand.IntN(40))),
		VIPPool:      testnet.LoopbackPrefix(byte(150 + rand.IntN(40))),
	}
	Configure(&cfg)
	c, err := localcluster.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(context.WithoutCancel(t.Context())); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	var out strings.Builder
	res, err := Run(t.Context(), c, Options{Out: &out})
	t.Logf("smoke run:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if want := (Result{Passed: 10}); res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
	for _, want := range []string{"PASS node node-2 initialized by the CCM: local://", "hello from node-", "smoke: PASSED (10 checks)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output does not say %q", want)
		}
	}
}

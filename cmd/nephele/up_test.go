package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nephele-dev/nephele/internal/testkit/clustertest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
)

// TestMain lets the test binary run nephele's main instead of the tests, so a test can
// run `nephele up` as a real process and signal it.
func TestMain(m *testing.M) {
	proctest.Main(func() int { main(); return 0 })
	os.Exit(m.Run())
}

// Bounds of the end-to-end test. One `nephele up` is up in well under a minute on a busy
// two-core machine; these are generous so that load never fails the test.
const (
	runTimeout  = 3 * time.Minute
	stopTimeout = time.Minute
)

// startUp runs `nephele up` with args; the process is killed when the test ends.
func startUp(t *testing.T, args ...string) *proctest.Process {
	t.Helper()
	return proctest.Start(t, "nephele up", append([]string{"up"}, args...)...)
}

// assertNothingRuns fails if a process still mentions dir on its command line: every
// component up starts gets its state directory in a flag.
func assertNothingRuns(t *testing.T, dir string) {
	t.Helper()
	// The kernel delivers a dead parent's signal to children asynchronously.
	err := poll.Until(t.Context(), stopTimeout, func(context.Context) error {
		if pids := proctest.Mentioning(t, dir); len(pids) > 0 {
			return fmt.Errorf("processes %v still run with %s", pids, dir)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// loopbackRanges returns a VIP pool and an instance range of their own, so this test
// does not fight over addresses with other tests running local clouds at the same time.
func loopbackRanges() (vipPool, instanceCIDR string) {
	return testnet.LoopbackPrefix(byte(150 + rand.IntN(40))).String(), testnet.LoopbackPrefix(byte(210 + rand.IntN(40))).String()
}

// TestUp runs `nephele up --kwok` three times in one state directory as a person would: a
// run that is killed, a smoke run after it that must pass, and a run stopped with Ctrl-C.
func TestUp(t *testing.T) {
	bin := clustertest.Commands(t, "localcloud", "cloud-controller-manager")
	dir := filepath.Join(t.TempDir(), "up")
	vipPool, instanceCIDR := loopbackRanges()
	args := []string{"--kwok", "--dir", dir, "--bin-dir", bin, "--build=false", "--nodes", "2",
		"--vip-pool", vipPool, "--instance-cidr", instanceCIDR, "--timeout", runTimeout.String()}

	t.Run("a killed run leaves nothing running", func(t *testing.T) {
		p := startUp(t, args...)
		p.WaitOutput(t, "nephele is up", runTimeout)
		p.Kill()
		assertNothingRuns(t, dir)
	})

	t.Run("smoke passes after a killed run", func(t *testing.T) {
		p := startUp(t, append(args, "--smoke")...)
		if code := p.Wait(t, 2*runTimeout); code != 0 {
			t.Fatalf("nephele up --smoke exited %d, want 0", code)
		}
		out := p.Output()
		for _, want := range []string{
			"clean up after the previous run",
			"PASS node node-1 initialized",
			"PASS node node-2 initialized",
			"PASS the cloud's load balancer health-checks the node agent: every node healthy",
			"PASS HTTP GET through the VIP is answered by a node agent",
			"hello from node-",
			"PASS a UDP datagram through the VIP is echoed",
			"PASS nephele migrate check passes",
			"PASS deleting the Service deletes the cloud load balancer",
			"PASS the VIP's listener is closed",
			"smoke: PASSED (10 checks)",
			"stop etcd, kube-apiserver and kwok",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("output does not contain %q", want)
			}
		}
		if strings.Contains(out, "FAIL") {
			t.Errorf("output reports a failure")
		}
		assertNothingRuns(t, dir)
	})

	t.Run("Ctrl-C stops everything", func(t *testing.T) {
		p := startUp(t, args...)
		p.WaitOutput(t, "Press Ctrl-C to stop.", runTimeout)
		kubeconfig := filepath.Join(dir, "kubeconfig")
		if !strings.Contains(p.Output(), "export KUBECONFIG="+kubeconfig) {
			t.Errorf("output does not tell how to use %s", kubeconfig)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list nodes with %s: %v", kubeconfig, err)
		}
		if len(nodes.Items) != 2 {
			t.Errorf("the cluster has %d nodes, want 2", len(nodes.Items))
		}

		second := startUp(t, args...)
		if code := second.Wait(t, runTimeout); code == 0 {
			t.Error("a second nephele up in the same directory succeeded")
		}
		if !strings.Contains(second.Output(), "another nephele up") {
			t.Errorf("the second nephele up does not say the directory is in use:\n%s", second.Output())
		}

		if err := p.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		if code := p.Wait(t, stopTimeout); code != 0 {
			t.Errorf("nephele up exited %d after SIGINT, want 0", code)
		}
		out := p.Output()
		order := []string{"stop cloud-controller-manager", "stop kube-controller-manager and kube-scheduler", "stop the node agent",
			"stop etcd, kube-apiserver and kwok", "stop the local cloud"}
		last := -1
		for _, step := range order {
			i := strings.Index(out, step)
			if i < 0 || i < last {
				t.Errorf("output does not show %q after the steps before it (order %q)", step, order)
			}
			last = i
		}
		assertNothingRuns(t, dir)
		if _, err := os.Stat(kubeconfig); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("kubeconfig of a stopped cluster left behind (stat: %v)", err)
		}
	})
}

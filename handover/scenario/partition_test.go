package scenario

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nephele-dev/nephele/controllers/loadbalancer"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
	"github.com/nephele-dev/nephele/internal/testkit/witness"
	"github.com/nephele-dev/nephele/manager"
)

// fenceOpen is how long after sending a renewal the leader's fence stays open.
var fenceOpen = leaseDuration - time.Duration(float64(leaseDuration)*manager.FenceMarginFactor)

// TestPartitionedLeader isolates the leader for longer than its lease while it has load
// balancer work under way, in two ways: its apiserver connection is cut (the cloud stays
// reachable), or it is frozen with SIGSTOP (a long pause of the runtime, a suspended VM)
// and resumed. Meanwhile the other replica takes over and Services are deleted. No call
// of the isolated replica may reach the cloud once its lease may have expired by its own
// clock; it stops, and restarted (as its Deployment would) it stays a follower; no load
// balancer the new leader deleted comes back, and nothing is leaked or stuck.
func TestPartitionedLeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		// isolate and rejoin act on the leader a, whose apiserver connection goes
		// through proxy.
		isolate, rejoin func(t *testing.T, a *proctest.Process, proxy *witness.CutProxy)
	}{{
		name:    "apiserver cut",
		isolate: func(_ *testing.T, _ *proctest.Process, proxy *witness.CutProxy) { proxy.Cut() },
		rejoin:  func(_ *testing.T, _ *proctest.Process, proxy *witness.CutProxy) { proxy.Heal() },
	}, {
		name: "frozen",
		isolate: func(t *testing.T, a *proctest.Process, _ *witness.CutProxy) {
			if err := a.Signal(syscall.SIGSTOP); err != nil {
				t.Fatalf("SIGSTOP: %v", err)
			}
		},
		rejoin: func(t *testing.T, a *proctest.Process, _ *witness.CutProxy) {
			if err := a.Signal(syscall.SIGCONT); err != nil {
				t.Fatalf("SIGCONT: %v", err)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) { partition(t, tc.isolate, tc.rejoin) })
	}
}

func partition(t *testing.T, isolate, rejoin func(*testing.T, *proctest.Process, *witness.CutProxy)) {
	start := time.Now()
	s := newScenario(t, 2)
	ctx := t.Context()
	u, err := url.Parse(s.env.APIServerURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := witness.NewCutProxy(t, u.Host)
	aArgs := s.ccmArgs("a", "--kubeconfig="+proxy.KubeconfigThrough(t, s.env.Kubeconfig))
	a := proctest.Start(t, "cloud-controller-manager a", aArgs...)
	aID := identity(t, a)
	poll.WithinContext(t, 2*time.Minute, "a to lead", func(ctx context.Context) error {
		if h, _, err := leaseRecord(ctx, s.env.Client, s.lease); err != nil || h != aID {
			return fmt.Errorf("lease holder %q (%v)", h, err)
		}
		return nil
	})
	b := proctest.Start(t, "cloud-controller-manager b", s.ccmArgs("b")...)
	bID := identity(t, b)

	services := s.env.Client.CoreV1().Services(s.ns)
	var all []*corev1.Service
	create := func(name string) {
		svc, err := services.Create(ctx, s.service(name), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating Service %s: %v", name, err)
		}
		all = append(all, svc)
	}
	for i := range 6 {
		create(fmt.Sprintf("early-%d", i))
	}
	poll.WithinContext(t, convergeWithin, "a to serve the first Services", s.converged)

	// The lease's renewals, to know when a's lease may have expired.
	var mu sync.Mutex
	var lastRenew time.Time
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		for watchCtx.Err() == nil {
			l, err := s.env.Client.CoordinationV1().Leases("kube-system").Get(watchCtx, s.lease, metav1.GetOptions{})
			if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == aID && l.Spec.RenewTime != nil {
				mu.Lock()
				lastRenew = l.Spec.RenewTime.Time
				mu.Unlock()
			}
			select {
			case <-watchCtx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	// a has work under way when it is cut off: each of its load balancer calls takes a
	// second at the cloud, and six new Services wait.
	s.w.SetIntercept(func(c witness.Call) witness.Action {
		if c.Replica == "a" && c.Op != witness.OpOther {
			time.Sleep(time.Second) // the cloud's latency for a
		}
		return witness.Action{}
	})
	for i := range 6 {
		create(fmt.Sprintf("late-%d", i))
	}
	poll.Within(t, convergeWithin, "a to be at work on the new Services", func() error {
		for _, c := range s.w.Log() {
			if c.Replica == "a" && c.Op == witness.OpEnsure && c.Arrived.After(start) && strings.HasPrefix(serviceOf(all, c.LB), "late-") {
				return nil
			}
		}
		return fmt.Errorf("no ensure of a late Service by a yet")
	})
	isolated := time.Now()
	isolate(t, a, proxy)
	mu.Lock()
	renewed := lastRenew
	mu.Unlock()

	// While a is away, half the Services go: b, once leading, deletes their load
	// balancers and lets them go.
	for i, svc := range all {
		if i%2 == 0 {
			if err := services.Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("deleting Service %s: %v", svc.Name, err)
			}
		}
	}
	var bLeads time.Time
	poll.WithinContext(t, 2*time.Minute, "b to take over and call the cloud", func(ctx context.Context) error {
		h, acquired, err := leaseRecord(ctx, s.env.Client, s.lease)
		if err != nil || h != bID {
			return fmt.Errorf("lease holder %q (%v)", h, err)
		}
		bLeads = acquired
		for _, c := range s.w.Log() {
			if c.Replica == "b" && c.Arrived.After(acquired) && c.Op == witness.OpDelete {
				return nil
			}
		}
		return fmt.Errorf("b leads since %s but deleted no load balancer yet", acquired.Format(time.TimeOnly))
	})
	if away := time.Since(isolated); away < leaseDuration {
		t.Fatalf("b took over %s after a was isolated, within the %s lease", away, leaseDuration)
	}
	resumed := time.Now()
	rejoin(t, a, proxy)
	poll.Within(t, proctest.Timeout, "a to stop after losing its lease", func() error {
		select {
		case <-a.Done():
			return nil
		default:
			return fmt.Errorf("a (pid %d) still runs", a.Pid())
		}
	})
	exited := time.Now()
	if !strings.Contains(a.Output(), "leader lease lost") {
		t.Errorf("a did not log its lost lease; output:\n%s", a.Output())
	}
	s.w.SetIntercept(nil)

	// a comes back, as its Deployment would restart it, and follows.
	a2 := proctest.Start(t, "cloud-controller-manager a (restarted)", append(aArgs[:len(aArgs):len(aArgs)], "--cloud-config="+s.w.CloudConfig(t, "a2"))...)
	a2ID := identity(t, a2)
	restarted := time.Now()
	create("after")
	var remaining []*corev1.Service
	for i, svc := range all {
		if i%2 == 1 {
			remaining = append(remaining, svc)
		}
	}
	poll.WithinContext(t, convergeWithin, "b to serve every Service left and the new one", s.converged)
	// a campaigns and finds the lease held: a follower.
	// a campaigns, finds the lease held, and stays a follower for a few retry periods.
	poll.Within(t, proctest.Timeout, "a, restarted, to follow b for three retry periods", func() error {
		if !strings.Contains(a2.Output(), "Lease held by another instance") {
			return fmt.Errorf("a (restarted) has not found the lease held yet")
		}
		if d := time.Since(restarted); d < 3*retryPeriod {
			return fmt.Errorf("a (restarted) has followed for %s", d)
		}
		return nil
	})
	if h, _, err := leaseRecord(ctx, s.env.Client, s.lease); err != nil || h != bID {
		t.Errorf("lease holder %q after a's return (%v), want b", h, err)
	}

	// The judgement, from the witness.
	mayHaveExpired := renewed.Add(fenceOpen)
	var late, lateAfterB, whileAway, bCalls, a2Calls int
	var lastA time.Time
	recreated := map[string]bool{}
	deletedBy := map[string]time.Time{}
	for _, c := range s.w.Log() {
		switch c.Replica {
		case "a":
			if c.Arrived.After(isolated) {
				whileAway++
			}
			if c.Arrived.After(mayHaveExpired) {
				late++
			}
			if c.Arrived.After(bLeads) {
				lateAfterB++
			}
			if c.Arrived.After(lastA) {
				lastA = c.Arrived
			}
		case "b":
			bCalls++
			if c.Op == witness.OpDelete {
				deletedBy[c.LB] = c.Arrived
			}
		case "a2":
			a2Calls++
		}
	}
	for _, c := range s.w.Log() {
		if at, ok := deletedBy[c.LB]; ok && c.Op == witness.OpEnsure && c.Arrived.After(at) {
			recreated[c.LB] = true
		}
	}
	if late != 0 || lateAfterB != 0 {
		t.Errorf("a made %d cloud calls after its lease may have expired (%s after its last renewal), %d after b took over; want 0",
			late, fenceOpen, lateAfterB)
	}
	if a2Calls != 0 {
		t.Errorf("a, restarted as a follower (%s), made %d cloud calls", a2ID, a2Calls)
	}
	if len(recreated) != 0 {
		t.Errorf("load balancers recreated after b deleted them: %v", recreated)
	}
	lbs, stuck, err := s.leaked(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lbs != 0 || stuck != 0 {
		t.Errorf("%d load balancers without a Service, %d Services stuck", lbs, stuck)
	}
	lastOK := "none"
	if !lastA.IsZero() {
		lastOK = lastA.Sub(renewed).Round(10 * time.Millisecond).String()
	}
	t.Logf("a isolated %s after its last renewal, for %s; b took over %s after the isolation; a made %d cloud calls while away, the last %s after its last renewal (fence closes at %s), %d after b took over, %d refused by its fence; a stopped %s after it was let back; restarted, it made %d calls in %s as a follower while b made %d in all; %d load balancers leaked, %d Services stuck, %d recreated; %d Services remain; took %s",
		isolated.Sub(renewed).Round(10*time.Millisecond), resumed.Sub(isolated).Round(100*time.Millisecond),
		bLeads.Sub(isolated).Round(10*time.Millisecond), whileAway, lastOK, fenceOpen, lateAfterB, strings.Count(a.Output(), "Cloud calls are fenced, not retrying"),
		exited.Sub(resumed).Round(10*time.Millisecond), a2Calls, time.Since(restarted).Round(100*time.Millisecond), bCalls,
		lbs, stuck, len(recreated), len(remaining)+1, time.Since(start).Round(time.Second))
}

// serviceOf names the Service of svcs whose load balancer is lb, or "".
func serviceOf(svcs []*corev1.Service, lb string) string {
	for _, svc := range svcs {
		if loadbalancer.LoadBalancerName(svc) == lb {
			return svc.Name
		}
	}
	return ""
}

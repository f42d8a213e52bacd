package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nephele-dev/nephele/controllers/loadbalancer"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
	"github.com/nephele-dev/nephele/internal/testkit/witness"
)

// Where a crash falls, relative to the cloud call it is aimed at.
const (
	// killBefore: the call reaches the cloud's door and goes no further.
	killBefore = "before the call"
	// killInCloud: the cloud applied the call; the manager dies before the answer.
	killInCloud = "after the cloud applied it, before the answer"
	// killAfter: the manager got the answer and dies a random moment later, amid the
	// finalizer and status writes that follow.
	killAfter = "after the answer"
)

// convergeWithin bounds how long the restarted manager takes to set everything right.
const convergeWithin = 90 * time.Second

// crashRun is the record of one kill.
type crashRun struct {
	op, phase string
	delay     time.Duration
	// converged is the time from the restart to the cloud and apiserver agreeing.
	converged time.Duration
}

// TestCrashAtEveryStep kills the manager with SIGKILL at seeded random points of load
// balancer creation, backend update and deletion, restarts it, and requires that
// everything converges: every Service has its load balancer with the right backends and
// its status, no load balancer is left without a Service, no Service is stuck on the
// finalizer.
func TestCrashAtEveryStep(t *testing.T) {
	start := time.Now()
	s := newScenario(t, 3)
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(*seed, 1))
	t.Logf("seed %d, %d runs", *seed, *runs)

	// One replica without leader election: a restart need not wait out the dead one's
	// lease, and what is tested here is the load balancer protocol, not the lease.
	var ccm *proctest.Process
	startCCM := func() {
		ccm = proctest.Start(t, "cloud-controller-manager", s.ccmArgs("ccm", "--leader-elect=false")...)
	}
	services := s.env.Client.CoreV1().Services(s.ns)
	var live []*corev1.Service
	create := func(name string) *corev1.Service {
		t.Helper()
		svc, err := services.Create(ctx, s.service(name), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating Service %s: %v", name, err)
		}
		live = append(live, svc)
		return svc
	}
	startCCM()
	for i := range 2 {
		create(fmt.Sprintf("initial-%d", i))
	}
	poll.WithinContext(t, convergeWithin, "the first load balancers", s.converged)

	excluded := false
	var results []crashRun
	for i := range *runs {
		ops := []string{witness.OpEnsure, witness.OpUpdate, witness.OpDelete}
		op := ops[i%len(ops)]
		phase := []string{killBefore, killInCloud, killAfter}[rng.IntN(3)]
		delay := time.Duration(rng.IntN(500)) * time.Millisecond
		if op == witness.OpDelete && len(live) == 0 {
			op = witness.OpEnsure
		}
		var target string
		var victim *corev1.Service
		if op == witness.OpDelete {
			j := rng.IntN(len(live))
			victim = live[j]
			live = append(live[:j], live[j+1:]...)
			target = loadbalancer.LoadBalancerName(victim)
		}

		// The first matching call of the manager is where it dies.
		var once sync.Once
		fired := make(chan struct{})
		victimCCM := ccm
		kill := func() { victimCCM.Kill() }
		s.w.SetIntercept(func(c witness.Call) witness.Action {
			if c.Op != op || (target != "" && c.LB != target) {
				return witness.Action{}
			}
			var a witness.Action
			hit := false
			once.Do(func() {
				hit = true
				switch phase {
				case killBefore:
					kill()
					a = witness.Action{Drop: true}
				case killInCloud:
					a = witness.Action{BeforeRelay: kill}
				case killAfter:
					a = witness.Action{AfterRelay: func() {
						time.AfterFunc(delay, kill)
					}}
				}
			})
			if hit {
				defer close(fired)
			}
			return a
		})

		switch op {
		case witness.OpEnsure:
			create(fmt.Sprintf("run-%d", i))
		case witness.OpUpdate:
			excluded = !excluded
			s.setExcluded(ctx, s.nodes[len(s.nodes)-1], excluded)
		case witness.OpDelete:
			uid := victim.UID
			if err := services.Delete(ctx, victim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
				t.Fatalf("deleting Service %s: %v", victim.Name, err)
			}
		}
		poll.Within(t, convergeWithin, fmt.Sprintf("run %d: the manager's %s call", i, op), func() error {
			select {
			case <-fired:
				return nil
			default:
				return fmt.Errorf("no %s call yet", op)
			}
		})
		poll.Within(t, proctest.Timeout, fmt.Sprintf("run %d: the manager to die", i), func() error {
			select {
			case <-victimCCM.Done():
				return nil
			default:
				return fmt.Errorf("pid %d still running", victimCCM.Pid())
			}
		})
		s.w.SetIntercept(nil)
		restarted := time.Now()
		startCCM()
		poll.WithinContext(t, convergeWithin, fmt.Sprintf("run %d (%s, killed %s): convergence after the restart", i, op, phase), func(ctx context.Context) error {
			// The restarted manager has ensured every load balancer once (it keeps no
			// state across restarts), so that the next run's change is news to it.
			if err := s.ensuredSince(restarted, live); err != nil {
				return err
			}
			return s.converged(ctx)
		})
		r := crashRun{op: op, phase: phase, converged: time.Since(restarted)}
		if phase == killAfter {
			r.delay = delay
		}
		results = append(results, r)
	}

	// The end: every Service goes, and with it every load balancer.
	for _, svc := range live {
		if err := services.Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting Service %s: %v", svc.Name, err)
		}
	}
	poll.Within(t, convergeWithin, "every Service and load balancer gone", func() error {
		list, err := services.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if n := len(list.Items); n != 0 {
			return fmt.Errorf("%d Services left", n)
		}
		return s.converged(ctx)
	})
	lbs, stuck, err := s.leaked(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lbs != 0 || stuck != 0 {
		t.Errorf("%d load balancers leaked, %d Services stuck", lbs, stuck)
	}

	var b strings.Builder
	var worst time.Duration
	for i, r := range results {
		extra := ""
		if r.phase == killAfter {
			extra = fmt.Sprintf(" +%s", r.delay)
		}
		fmt.Fprintf(&b, "run %2d: %-6s killed %s%s; converged %s after the restart\n", i, r.op, r.phase, extra, r.converged.Round(10*time.Millisecond))
		worst = max(worst, r.converged)
	}
	t.Logf("%d kills, seed %d, %d load balancers leaked, %d Services stuck, slowest convergence %s, test took %s:\n%s",
		len(results), *seed, lbs, stuck, worst.Round(10*time.Millisecond), time.Since(start).Round(time.Second), b.String())
}

// ensuredSince returns nil once an ensure of every Service's load balancer succeeded
// after since.
func (s *scenario) ensuredSince(since time.Time, svcs []*corev1.Service) error {
	done := map[string]bool{}
	for _, c := range s.w.Log() {
		if c.Op == witness.OpEnsure && c.Arrived.After(since) && c.Status/100 == 2 {
			done[c.LB] = true
		}
	}
	for _, svc := range svcs {
		if !done[loadbalancer.LoadBalancerName(svc)] {
			return fmt.Errorf("no ensure of Service %s's load balancer since the restart", svc.Name)
		}
	}
	return nil
}

// setExcluded labels node to be left out of load balancers, or removes the label.
func (s *scenario) setExcluded(ctx context.Context, node string, excluded bool) {
	s.t.Helper()
	value := "null"
	if excluded {
		value = `"true"`
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, corev1.LabelNodeExcludeBalancers, value)
	if _, err := s.env.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		s.t.Fatalf("labelling Node %s: %v", node, err)
	}
}

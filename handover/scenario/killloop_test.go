package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
)

// workloadServices is how many Services the kill loop creates and deletes.
const workloadServices = 50

// replica is one manager process of the kill loop.
type replica struct {
	name     string // its name at the witness
	identity string // its lease identity
	proc     *proctest.Process
	killed   time.Time
}

// term is one holder's time with the lease, from the Lease's acquireTime.
type term struct {
	holder   string
	acquired time.Time
}

// TestLeaderKillLoop runs three replicas and kills the leader with SIGKILL -scenario.kills
// times at random intervals, starting a new replica after each kill, while 50 Services
// are created and deleted. From the witness's call log and the Lease: no replica called
// the cloud outside its own term, terms did not overlap, each takeover came within the
// bound, and at the end no load balancer is without a Service and no Service is stuck.
func TestLeaderKillLoop(t *testing.T) {
	s := newScenario(t, 3)
	var replicas []*replica
	byIdentity := map[string]*replica{}
	startReplica := func() {
		name := fmt.Sprintf("r%d", len(replicas))
		p := proctest.Start(t, "cloud-controller-manager "+name, s.ccmArgs(name)...)
		r := &replica{name: name, proc: p, identity: identity(t, p)}
		replicas = append(replicas, r)
		byIdentity[r.identity] = r
	}
	for range 3 {
		startReplica()
	}
	killLoop{
		s:         s,
		replicaOf: func(id string) *replica { return byIdentity[id] },
		kill: func(r *replica) {
			r.proc.Kill()
			r.killed = time.Now()
			startReplica()
		},
		all: func() []*replica { return replicas },
	}.run(t)
}

// killLoop is the leader kill loop over replicas of some kind.
type killLoop struct {
	s *scenario
	// replicaOf returns the replica of a lease identity, nil for none.
	replicaOf func(identity string) *replica
	// kill kills r with SIGKILL, sets r.killed, and brings up what replaces it.
	kill func(r *replica)
	// all returns every replica so far.
	all func() []*replica
	// ready, when set, returns nil once every replica is up again (a restarted one may
	// wait out kubelet's back-off): the leader is killed only with its followers up.
	ready func(ctx context.Context) error
}

// run kills the leader -scenario.kills times while 50 Services come and go, and judges
// the calls at the cloud against the Lease's history.
func (kl killLoop) run(t *testing.T) {
	start := time.Now()
	s := kl.s
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(*seed, 2))
	t.Logf("seed %d, %d kills", *seed, *kills)
	byIdentity := kl.replicaOf

	// The Lease's history, sampled every 100ms: enough, since each term lasts seconds.
	var mu sync.Mutex
	var terms []term
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			holder, acquired, err := leaseRecord(watchCtx, s.env.Client, s.lease)
			if err == nil && holder != "" {
				mu.Lock()
				if n := len(terms); n == 0 || terms[n-1].holder != holder || !terms[n-1].acquired.Equal(acquired) {
					terms = append(terms, term{holder: holder, acquired: acquired})
				}
				mu.Unlock()
			}
			select {
			case <-watchCtx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	currentTerm := func() (term, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(terms) == 0 {
			return term{}, false
		}
		return terms[len(terms)-1], true
	}

	// The workload: 50 Services, created over the loop, each deleted a while later.
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	workErr := make(chan error, 1)
	go func() { workErr <- s.churn(workCtx, rand.New(rand.NewPCG(*seed, 3))) }()

	var takeovers []time.Duration
	poll.Within(t, 2*time.Minute, "a first leader", func() error {
		if _, ok := currentTerm(); !ok {
			return fmt.Errorf("lease %s not held", s.lease)
		}
		return nil
	})
	for i := range *kills {
		// A random part of a term: between one and six seconds of leading.
		wait := time.Second + time.Duration(rng.IntN(5000))*time.Millisecond
		tm, _ := currentTerm()
		if d := time.Until(tm.acquired.Add(wait)); d > 0 {
			time.Sleep(d) // the kill point itself, not a wait for a condition
		}
		if kl.ready != nil {
			poll.WithinContext(t, 5*time.Minute, fmt.Sprintf("kill %d: every replica up", i), kl.ready)
			tm, _ = currentTerm()
		}
		leader := byIdentity(tm.holder)
		if leader == nil {
			t.Fatalf("kill %d: the lease holder %q is none of the replicas", i, tm.holder)
		}
		kl.kill(leader)
		var next term
		poll.Within(t, 2*takeoverBound, fmt.Sprintf("kill %d: a new leader after %s", i, leader.name), func() error {
			tm, _ := currentTerm()
			if tm.holder == leader.identity {
				return fmt.Errorf("lease still names %s", leader.name)
			}
			next = tm
			return nil
		})
		d := next.acquired.Sub(leader.killed)
		takeovers = append(takeovers, d)
		t.Logf("kill %d: %s killed %s into its term; %s took over %s later", i, leader.name,
			leader.killed.Sub(tm.acquired).Round(10*time.Millisecond), nameOf(byIdentity(next.holder)), d.Round(10*time.Millisecond))
		if d > takeoverBound {
			t.Errorf("kill %d: takeover took %s, above the bound %s", i, d.Round(10*time.Millisecond), takeoverBound)
		}
	}

	// The workload runs to its end: all 50 created and deleted.
	select {
	case err := <-workErr:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Minute):
		t.Fatal("the workload did not finish within 5m")
	}
	poll.WithinContext(t, 2*time.Minute, "every Service deleted and every load balancer gone", func(ctx context.Context) error {
		list, err := s.env.Client.CoreV1().Services(s.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if n := len(list.Items); n != 0 {
			return fmt.Errorf("%d Services left", n)
		}
		return s.converged(ctx)
	})
	stopWatch()
	<-watched
	lbs, stuck, err := s.leaked(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lbs != 0 || stuck != 0 {
		t.Errorf("%d load balancers without a Service, %d Services stuck", lbs, stuck)
	}

	// Every call at the cloud falls in its caller's term: after the caller acquired the
	// lease and before it was killed, which is before the next holder acquired it.
	mu.Lock()
	history := append([]term(nil), terms...)
	mu.Unlock()
	byName := map[string][]*replica{}
	for _, r := range kl.all() {
		byName[r.name] = append(byName[r.name], r)
	}
	var outside []string
	calls := map[string]int{}
	for _, c := range s.w.Log() {
		calls[c.Replica]++
		if !slices.ContainsFunc(byName[c.Replica], func(r *replica) bool { return inTerm(history, r, c.Arrived) }) {
			outside = append(outside, fmt.Sprintf("%s %s %s at %s", c.Replica, c.Op, c.LB, c.Arrived.Format("15:04:05.000")))
		}
	}
	if len(outside) > 0 {
		t.Errorf("%d cloud calls outside their caller's term: %s", len(outside), strings.Join(outside, "; "))
	}
	for i := 1; i < len(history); i++ {
		prev := byIdentity(history[i-1].holder)
		if prev != nil && !prev.killed.IsZero() && prev.killed.After(history[i].acquired) {
			t.Errorf("terms overlap: %s was killed at %s, after %s acquired the lease at %s", prev.name,
				prev.killed.Format("15:04:05.000"), history[i].holder, history[i].acquired.Format("15:04:05.000"))
		}
	}
	var worst, sum time.Duration
	for _, d := range takeovers {
		worst = max(worst, d)
		sum += d
	}
	var names []string
	for name := range byName {
		names = append(names, fmt.Sprintf("%s:%d", name, calls[name]))
	}
	slices.Sort(names)
	t.Logf("%d kills, seed %d: takeovers %s (mean %s, max %s, bound %s); %d terms; cloud calls per replica %s, %d outside a term; %d load balancers without a Service, %d Services stuck; test took %s",
		len(takeovers), *seed, roundAll(takeovers), (sum / time.Duration(max(1, len(takeovers)))).Round(10*time.Millisecond),
		worst.Round(10*time.Millisecond), takeoverBound, len(history), strings.Join(names, " "), len(outside), lbs, stuck, time.Since(start).Round(time.Second))
}

// inTerm tells whether r may call the cloud at: it held the lease then (it acquired it
// at or before at, no later holder had acquired it yet) and was not yet killed.
func inTerm(history []term, r *replica, at time.Time) bool {
	if r == nil {
		return false
	}
	if !r.killed.IsZero() && at.After(r.killed) {
		return false
	}
	for i, tm := range history {
		if tm.holder != r.identity || at.Before(tm.acquired) {
			continue
		}
		if i+1 == len(history) || at.Before(history[i+1].acquired) {
			return true
		}
	}
	return false
}

// nameOf names r, or says it is no replica.
func nameOf(r *replica) string {
	if r == nil {
		return "(none of the replicas)"
	}
	return r.name
}

func roundAll(ds []time.Duration) string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Round(10*time.Millisecond).String())
	}
	return strings.Join(out, " ")
}

// churn creates workloadServices Services, one every 1 to 3 seconds, and deletes each
// 2 to 20 seconds after its creation, until all are deleted or ctx ends (then it
// deletes the rest at once).
func (s *scenario) churn(ctx context.Context, rng *rand.Rand) error {
	services := s.env.Client.CoreV1().Services(s.ns)
	type pending struct {
		name string
		at   time.Time
	}
	var deletes []pending
	next := time.Now()
	created := 0
	for created < workloadServices || len(deletes) > 0 {
		now := time.Now()
		if created < workloadServices && !now.Before(next) {
			name := fmt.Sprintf("churn-%d", created)
			if _, err := services.Create(context.WithoutCancel(ctx), s.service(name), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating Service %s: %w", name, err)
			}
			created++
			deletes = append(deletes, pending{name, now.Add(2*time.Second + time.Duration(rng.IntN(18000))*time.Millisecond)})
			next = now.Add(time.Second + time.Duration(rng.IntN(2000))*time.Millisecond)
		}
		done := ctx.Err() != nil
		kept := deletes[:0]
		for _, d := range deletes {
			if done || !now.Before(d.at) {
				if err := services.Delete(context.WithoutCancel(ctx), d.name, metav1.DeleteOptions{}); err != nil {
					return fmt.Errorf("deleting Service %s: %w", d.name, err)
				}
				continue
			}
			kept = append(kept, d)
		}
		deletes = kept
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

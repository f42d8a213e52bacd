package instrumented

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/internal/testkit/metrictest"
)

// fakeClock is a clock that moves only when Step is called; timers fire inside Step.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) stopper {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Step moves the clock by d, firing due timers in order (outside the clock's lock).
func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
		var due *fakeTimer
		for len(c.timers) > 0 {
			t := c.timers[0]
			if t.stopped {
				c.timers = c.timers[1:]
				continue
			}
			if !t.at.After(end) {
				due = t
				c.timers = c.timers[1:]
				if t.at.After(c.now) {
					c.now = t.at
				}
			}
			break
		}
		if due == nil {
			c.now = end
			c.mu.Unlock()
			return
		}
		due.stopped = true
		c.mu.Unlock()
		due.f()
	}
}

// tryTake takes a token without waiting, as a call finding the bucket non-empty does.
func tryTake(b *budget) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	b.refill(now)
	if b.tokens < 1 {
		return time.Time{}, false
	}
	b.tokens--
	b.rate.callSent(now)
	return now, true
}

// quota is the cloud's account-wide token bucket, as providers/local's rate limit.
type quota struct {
	rate, burst, tokens float64
	last                time.Time
}

func (q *quota) allow(now time.Time) bool {
	q.tokens = min(q.burst, q.tokens+now.Sub(q.last).Seconds()*q.rate)
	q.last = now
	if q.tokens < 1 {
		return false
	}
	q.tokens--
	return true
}

type simResult struct {
	sent, throttled             int // nephele's calls in the measured window
	neighbourSent, neighbourThr int
	maxRate, minRate            float64 // over the whole run, after the first second
}

// simulate runs a client with endless work through a budget against a cloud quota
// for d, with calls answered after latency, and a neighbour sending neighbourQPS
// calls/s to the same quota. A throttled answer holds the budget for retryAfter, as
// the call path does with the cloud's Retry-After. It counts calls in the last half of d.
func simulate(start, lo, hi, quotaQPS float64, latency time.Duration, neighbourQPS float64, retryAfter, d time.Duration) simResult {
	clk := newFakeClock()
	b := newBudget(clk, start, lo, hi, int(max(1, hi)), nil)
	t0 := clk.Now()
	q := &quota{rate: quotaQPS, burst: quotaQPS, tokens: quotaQPS, last: t0}
	type answer struct {
		at, sent  time.Time
		throttled bool
	}
	var pending []answer
	res := simResult{minRate: hi}
	step := time.Millisecond
	var nextNeighbour time.Time
	if neighbourQPS > 0 {
		nextNeighbour = t0
	}
	for clk.Now().Sub(t0) < d {
		now := clk.Now()
		measured := now.Sub(t0) >= d/2
		for len(pending) > 0 && !pending[0].at.After(now) {
			if pending[0].throttled && retryAfter > 0 {
				b.hold(now.Add(retryAfter))
			}
			b.observe(pending[0].sent, pending[0].throttled)
			pending = pending[1:]
		}
		if !nextNeighbour.IsZero() && !nextNeighbour.After(now) {
			ok := q.allow(now)
			if measured {
				res.neighbourSent++
				if !ok {
					res.neighbourThr++
				}
			}
			nextNeighbour = nextNeighbour.Add(time.Duration(float64(time.Second) / neighbourQPS))
		}
		for {
			sent, ok := tryTake(b)
			if !ok {
				break
			}
			allowed := q.allow(now)
			pending = append(pending, answer{at: now.Add(latency), sent: sent, throttled: !allowed})
			if measured {
				res.sent++
				if !allowed {
					res.throttled++
				}
			}
		}
		if r := b.Rate(); now.Sub(t0) > time.Second {
			res.maxRate = max(res.maxRate, r)
			res.minRate = min(res.minRate, r)
		}
		clk.Step(step)
	}
	return res
}

func TestAdaptiveBudget(t *testing.T) {
	const run = 4 * time.Minute
	window := (run / 2).Seconds()
	tests := []struct {
		name                string
		start, lo, hi       float64
		quota               float64
		latency             time.Duration
		retryAfter          time.Duration // the cloud's Retry-After on a throttled answer
		neighbour           float64
		wantMinRate         float64 // nephele's accepted calls/s in the window, at least
		wantMaxThrottled    float64 // share of nephele's calls throttled, at most
		wantMaxNeighbourThr float64 // share of the neighbour's calls throttled, at most
		ceiling, floor      float64 // the rate must stay within, when non-zero
	}{
		{name: "converges near a quota of 50/s", start: 20, lo: 1, hi: 1000, quota: 50, latency: 50 * time.Millisecond,
			wantMinRate: 0.8 * 50, wantMaxThrottled: 0.02},
		{name: "converges near a quota of 25/s with 100ms calls", start: 20, lo: 1, hi: 1000, quota: 25, latency: 100 * time.Millisecond,
			wantMinRate: 0.8 * 25, wantMaxThrottled: 0.02},
		{name: "starts above the quota and backs off", start: 200, lo: 1, hi: 1000, quota: 50, latency: 50 * time.Millisecond,
			wantMinRate: 0.8 * 50, wantMaxThrottled: 0.02},
		{name: "leaves a neighbour's 20/s usable", start: 20, lo: 1, hi: 1000, quota: 50, latency: 50 * time.Millisecond, neighbour: 20,
			wantMinRate: 0.75 * 30, wantMaxThrottled: 0.02, wantMaxNeighbourThr: 0.05},
		{name: "a Retry-After of a whole second at each throttled answer", start: 20, lo: 1, hi: 1000, quota: 50, latency: 50 * time.Millisecond,
			retryAfter: time.Second, wantMinRate: 0.8 * 50, wantMaxThrottled: 0.02},
		{name: "a neighbour and whole-second Retry-Afters", start: 20, lo: 1, hi: 1000, quota: 50, latency: 50 * time.Millisecond, neighbour: 20,
			retryAfter: time.Second, wantMinRate: 0.7 * 30, wantMaxThrottled: 0.02, wantMaxNeighbourThr: 0.05},
		{name: "slow profile: 25/s, 100ms calls, whole-second Retry-Afters", start: 20, lo: 1, hi: 100, quota: 25, latency: 100 * time.Millisecond,
			retryAfter: time.Second, wantMinRate: 0.8 * 25, wantMaxThrottled: 0.02},
		{name: "slow profile with a neighbour: 5/s left, 100ms calls, whole-second Retry-Afters", start: 20, lo: 1, hi: 100, quota: 25, latency: 100 * time.Millisecond,
			// The SDKs' curve had 5.3% of nephele's calls throttled here, probing every
			// few seconds (see CubicProbeCalls).
			neighbour: 20, retryAfter: time.Second, wantMinRate: 0.7 * 5, wantMaxThrottled: 0.03, wantMaxNeighbourThr: 0.05},
		{name: "never exceeds the ceiling", start: 10, lo: 1, hi: 30, quota: 100, latency: 50 * time.Millisecond,
			wantMinRate: 0.95 * 30, ceiling: 30},
		{name: "the floor holds under a tiny quota", start: 10, lo: 5, hi: 100, quota: 2, latency: 50 * time.Millisecond,
			floor: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := simulate(tt.start, tt.lo, tt.hi, tt.quota, tt.latency, tt.neighbour, tt.retryAfter, run)
			accepted := float64(r.sent-r.throttled) / window
			t.Logf("nephele: %.1f calls/s accepted, %d of %d throttled; neighbour: %d of %d throttled; rate %.1f to %.1f",
				accepted, r.throttled, r.sent, r.neighbourThr, r.neighbourSent, r.minRate, r.maxRate)
			if tt.wantMinRate > 0 && accepted < tt.wantMinRate {
				t.Errorf("accepted %.1f calls/s, want at least %.1f", accepted, tt.wantMinRate)
			}
			if accepted > tt.quota*1.01 {
				t.Errorf("accepted %.1f calls/s above the quota %v: the simulation is wrong", accepted, tt.quota)
			}
			if tt.wantMaxThrottled > 0 && float64(r.throttled) > tt.wantMaxThrottled*float64(r.sent) {
				t.Errorf("%d of %d calls throttled, want at most %.0f%%", r.throttled, r.sent, 100*tt.wantMaxThrottled)
			}
			if tt.wantMaxNeighbourThr > 0 && float64(r.neighbourThr) > tt.wantMaxNeighbourThr*float64(r.neighbourSent) {
				t.Errorf("neighbour: %d of %d calls throttled, want at most %.0f%%", r.neighbourThr, r.neighbourSent, 100*tt.wantMaxNeighbourThr)
			}
			if tt.ceiling > 0 && r.maxRate > tt.ceiling {
				t.Errorf("rate reached %.2f, above the ceiling %v", r.maxRate, tt.ceiling)
			}
			if tt.floor > 0 && r.minRate < tt.floor {
				t.Errorf("rate fell to %.2f, below the floor %v", r.minRate, tt.floor)
			}
		})
	}
}

func TestBudgetCutsOncePerThrottlingEpisode(t *testing.T) {
	clk := newFakeClock()
	b := newBudget(clk, 40, 1, 100, 100, nil)
	early := clk.Now()
	clk.Step(time.Second)
	b.observe(early, false)
	before := b.Rate()
	tests := []struct {
		name    string
		sent    time.Time
		wantCut bool
	}{
		{name: "a throttled answer cuts the rate", sent: clk.Now(), wantCut: true},
		{name: "a call sent before that cut does not cut again", sent: early, wantCut: false},
	}
	for _, tt := range tests {
		if got := b.observe(tt.sent, true); got != tt.wantCut {
			t.Errorf("%s: cut = %v, want %v", tt.name, got, tt.wantCut)
		}
	}
	if got, want := b.Rate(), before*CubicBeta; got > want+1e-9 {
		t.Errorf("rate after the cut = %.2f, want at most %.2f (%v of %.2f)", got, want, CubicBeta, before)
	}
	clk.Step(10 * time.Millisecond)
	if !b.observe(clk.Now(), true) {
		t.Error("a call sent after the cut, throttled, did not cut again")
	}
}

func TestFixedBudgetDoesNotAdapt(t *testing.T) {
	clk := newFakeClock()
	b := newBudget(clk, 20, 20, 20, 40, nil)
	b.observe(clk.Now(), true)
	clk.Step(time.Minute)
	b.observe(clk.Now(), false)
	if got := b.Rate(); got != 20 {
		t.Errorf("fixed budget's rate = %v, want 20", got)
	}
}

// queued returns how many calls of class wait.
func queued(b *budget, class cloud.Class) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queues[class])
}

// waitQueued polls until n calls of class wait, or fails the test.
func waitQueued(t *testing.T, b *budget, class cloud.Class, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for queued(b, class) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d %s calls queued, want %d", queued(b, class), class, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestBudgetServesCriticalFirstWithoutStarvingRefine(t *testing.T) {
	tests := []struct {
		name         string
		refine, crit int
		want         string
	}{
		{name: "critical first, one refine in five", refine: 10, crit: 10, want: "CCCCRCCCCRCCRRRRRRRR"},
		{name: "refine alone goes in order", refine: 3, want: "RRR"},
		{name: "critical alone goes in order", crit: 3, want: "CCC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			b := newBudget(clk, 10, 10, 10, 1, nil)
			if _, ok := tryTake(b); !ok {
				t.Fatal("the full bucket gave no token")
			}
			var mu sync.Mutex
			var order []byte
			var wg sync.WaitGroup
			enqueue := func(class cloud.Class, letter byte, n int) {
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, err := b.acquire(context.Background(), class); err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						order = append(order, letter)
						mu.Unlock()
					}()
					waitQueued(t, b, class, i+1)
				}
			}
			// Refine calls were waiting first: critical ones still go ahead of them.
			enqueue(cloud.ClassRefine, 'R', tt.refine)
			enqueue(cloud.ClassCritical, 'C', tt.crit)
			for i := range tt.refine + tt.crit {
				clk.Step(100 * time.Millisecond)
				deadline := time.Now().Add(10 * time.Second)
				for {
					mu.Lock()
					n := len(order)
					mu.Unlock()
					if n == i+1 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("grant %d did not come after %v", i+1, 100*time.Millisecond)
					}
					time.Sleep(time.Millisecond)
				}
			}
			wg.Wait()
			if got := string(order); got != tt.want {
				t.Errorf("grant order %s, want %s", got, tt.want)
			}
		})
	}
}

func TestBudgetWaiterLeavesOnCancel(t *testing.T) {
	clk := newFakeClock()
	b := newBudget(clk, 1, 1, 1, 1, nil)
	tryTake(b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.acquire(ctx, cloud.ClassRefine)
		done <- err
	}()
	waitQueued(t, b, cloud.ClassRefine, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire after cancel: %v, want context.Canceled", err)
	}
	if n := queued(b, cloud.ClassRefine); n != 0 {
		t.Errorf("%d calls still queued after cancel, want 0", n)
	}
	clk.Step(time.Second)
	if _, ok := tryTake(b); !ok {
		t.Error("the token the canceled call waited for was not left for others")
	}
}

// TestThrottledAnswerCutsTheBudget goes through the whole call path: a throttled
// answer from the cloud cuts the rate, and the class metrics count the calls.
func TestThrottledAnswerCutsTheBudget(t *testing.T) {
	fake, c, reg := setup(t, fakecloud.Options{}, Options{QPS: 40, MinQPS: 1, MaxQPS: 100, Burst: 100})
	before, ok := c.Rate()
	if !ok || before != 40 {
		t.Fatalf("Rate() = %v, %v; want 40, true", before, ok)
	}
	fake.ThrottleNext(cloud.OpListRoutes, 1, time.Millisecond)
	routes, _ := c.For("node-route-controller").Routes()
	if _, err := routes.ListRoutes(context.Background(), "c1"); !cloud.IsThrottled(err) {
		t.Fatalf("ListRoutes: %v, want throttled", err)
	}
	after, _ := c.Rate()
	if after > before*CubicBeta+1e-9 {
		t.Errorf("rate after a throttled answer = %v, want at most %v", after, before*CubicBeta)
	}
	if _, err := routes.ListRoutes(cloud.WithClass(context.Background(), cloud.ClassRefine), "c1"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		class  cloud.Class
		result cloud.Result
		want   float64
	}{
		{cloud.ClassCritical, cloud.ResultThrottled, 1},
		{cloud.ClassRefine, cloud.ResultSuccess, 1},
	} {
		got := metrictest.Value(t, reg, "nephele_cloud_class_requests_total", map[string]string{"class": string(tt.class), "result": string(tt.result)})
		if got != tt.want {
			t.Errorf("class_requests_total{%s,%s} = %v, want %v", tt.class, tt.result, got, tt.want)
		}
	}
	if got := metrictest.Value(t, reg, "nephele_cloud_budget_cuts_total", nil); got != 1 {
		t.Errorf("budget_cuts_total = %v, want 1", got)
	}
	if got := metrictest.Value(t, reg, "nephele_cloud_budget_rate", nil); got != after {
		t.Errorf("budget_rate = %v, want %v", got, after)
	}
}

func TestBudgetHoldEmptiesTheBucket(t *testing.T) {
	clk := newFakeClock()
	b := newBudget(clk, 10, 10, 10, 10, nil)
	b.hold(clk.Now().Add(time.Second))
	tests := []struct {
		name    string
		step    time.Duration
		wantGet bool
	}{
		{name: "nothing during the hold, though the bucket was full", step: 900 * time.Millisecond, wantGet: false},
		{name: "nothing at the hold's end: the bucket starts empty", step: 100 * time.Millisecond, wantGet: false},
		{name: "one token a period after the hold", step: 100 * time.Millisecond, wantGet: true},
		{name: "and no more at once", step: 0, wantGet: false},
	}
	for _, tt := range tests {
		clk.Step(tt.step)
		if _, got := tryTake(b); got != tt.wantGet {
			t.Errorf("%s: token = %v, want %v", tt.name, got, tt.wantGet)
		}
	}
}

// driver sends calls through an adaptive rate on a fake clock, as fast as the rate
// allows, and answers each at once.
type driver struct {
	r    *adaptiveRate
	now  time.Time
	owed float64 // calls the rate allows but not yet sent
}

// driverStep is the driver's clock step.
const driverStep = 10 * time.Millisecond

func newDriver(start float64) *driver {
	now := time.Unix(1_000_000, 0)
	return &driver{r: newAdaptiveRate(start, 1, 100, now), now: now}
}

// step moves the clock on one step and sends what the rate allows in it, every answer
// throttled or every one accepted.
func (d *driver) step(throttled bool) {
	d.now = d.now.Add(driverStep)
	for d.owed += d.r.rate * driverStep.Seconds(); d.owed >= 1; d.owed-- {
		d.r.callSent(d.now)
		if throttled {
			d.r.throttled(d.now, d.now)
		} else {
			d.r.succeeded(d.now)
		}
	}
}

// run steps for dur.
func (d *driver) run(dur time.Duration, throttled bool) {
	for end := d.now.Add(dur); d.now.Before(end); {
		d.step(throttled)
	}
}

// climb returns how long the rate takes to reach target with every call accepted,
// giving up after 5 minutes.
func (d *driver) climb(target float64) time.Duration {
	start := d.now
	for d.now.Sub(start) < 5*time.Minute && d.r.rate < target {
		d.step(false)
	}
	return d.now.Sub(start)
}

// climb returns how long the rate takes, after a cut at w, to reach target with every
// call answered: what the stretched cubic costs a client whose quota came back.
func climb(w, target float64) time.Duration {
	d := newDriver(w)
	// A throttled answer to a call sent now, at rate w, cuts it there.
	d.r.sent.rate, d.r.accepted.rate = w, w
	d.r.throttled(d.now, d.now)
	return d.climb(target)
}

// TestRateClimbsBackAfterEverythingWasThrottled: a cloud that throttled every call for
// a minute makes the accepted rate next to nothing; the cut must still be from the
// floor, or the curve back to next to nothing would hold the rate at the floor until
// the next cut (found in review: still at the floor after an hour).
func TestRateClimbsBackAfterEverythingWasThrottled(t *testing.T) {
	d := newDriver(20)
	d.run(10*time.Second, false)
	d.run(time.Minute, true)
	if got := d.climb(20); got > 30*time.Second {
		t.Errorf("took %s to climb back to 20/s after a minute of throttled answers, want at most 30s (rate %.2f, W %.3g)", got, d.r.rate, d.r.lastMax)
	}
}

// TestSlowCallerDoesNotClimbUnseen: a manager calling every few seconds after a busy
// spell does not go on showing its busy rate, so its budget does not climb on it.
func TestSlowCallerDoesNotClimbUnseen(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	r := newAdaptiveRate(20, 1, 100, now)
	for range 200 { // 10 s at 20 calls/s
		now = now.Add(50 * time.Millisecond)
		r.callSent(now)
		r.succeeded(now)
	}
	for range 200 { // 10 minutes, a call every 3 s
		now = now.Add(3 * time.Second)
		r.callSent(now)
		r.succeeded(now)
	}
	// The rate may grow to twice the measured send rate: the busy spell's 20/s must
	// not be it any more.
	if r.sent.rate > 1 {
		t.Errorf("after 10 minutes of a call every 3 s the measured send rate is %.1f calls/s", r.sent.rate)
	}
}

func TestRateClimbsBackFromACut(t *testing.T) {
	for _, tt := range []struct {
		name      string
		w, target float64
		within    time.Duration
	}{
		// The SDKs' curve: the stretch does not apply above about 29 calls/s.
		{"50/s back to 50/s", 50, 50, 4 * time.Second},
		// A neighbour left: 5 calls/s were left, the quota is 25 again.
		{"5/s up to 25/s", 5, 25, 20 * time.Second},
		// The cloud throttled everything: the floor, then the quota again.
		{"1/s up to 20/s", 1, 20, 30 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := climb(tt.w, tt.target)
			t.Logf("%.0f/s to %.0f/s in %s", tt.w, tt.target, got)
			if got > tt.within {
				t.Errorf("took %s to climb from %.0f/s to %.0f/s, want at most %s", got, tt.w, tt.target, tt.within)
			}
		})
	}
}

// TestBurstAfterIdleIsCutFromItsOwnRate: a manager idle for a minute, then throttled by
// the first answers of a burst, is cut from the rate it ran at, not from the idle
// minute's: with the minute counted it was cut from 40 calls/s to 2.8, where the
// stretched curve climbs slowly.
func TestBurstAfterIdleIsCutFromItsOwnRate(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	r := newAdaptiveRate(20, 1, 100, now)
	call := func() {
		r.callSent(now)
		r.succeeded(now)
	}
	for range 200 { // 10 s at 20 calls/s
		now = now.Add(50 * time.Millisecond)
		call()
	}
	busy := r.rate
	now = now.Add(time.Minute)
	call()
	sent := now
	now = now.Add(100 * time.Millisecond)
	if !r.throttled(sent, now) {
		t.Fatal("the throttled answer did not cut the rate")
	}
	if want := 0.5 * CubicBeta * busy; r.rate < want {
		t.Errorf("cut to %.2f calls/s after running at %.1f, want at least %.2f", r.rate, busy, want)
	}
}

package instrumented

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/nephele-dev/nephele/cloud"
)

// The adaptive rate follows the curve of the AWS SDKs' adaptive retry mode, itself
// TCP CUBIC's (RFC 9438) applied to a request rate: after a throttled answer at rate W
// the rate drops to Beta·W, grows back along a concave cubic that flattens as it nears
// W (where the quota was found last), stays near W for a while, then probes above it
// ever faster until the next throttled answer.
//
//	rate(t) = Scale·(t − K)³ + W,   K = ∛(W·(1 − Beta) / Scale)
//
// t is the time since the last cut; rate(0) = Beta·W.
//
// Two departures from the SDKs' curve keep the throttled share low when the quota left
// to the client is small (a neighbour on the same account takes most of it). W is the
// lowest of the rate, the measured send rate and the measured accepted rate at the
// cut, never below the floor: sends that were throttled do not count as quota found.
// And K is at least CubicProbeCalls/W seconds (at most CubicMaxK), the cubic's scale
// shrunk to match: each probe above W costs a throttled answer or two, and with the
// SDKs' scale a client left 5 calls/s would probe every few seconds, a throttled
// answer in 20 of its calls. Above about 29 calls/s (where ∛(0.75·W) = 80/W) the SDKs'
// K is the longer one and the curve is theirs. The price is a slower climb from a
// small rate: from 5 calls/s back to 25 once the neighbour leaves takes about 17 s
// instead of 5, from the floor of 1/s to 20/s 25 s instead of 4.5.
const (
	// CubicBeta is the share of the rate kept after a throttled answer.
	CubicBeta = 0.7
	// CubicScale is the cubic's scale, in calls/s per s³: how fast the rate comes back.
	CubicScale = 0.4
	// CubicProbeCalls bounds how often the rate probes above the quota it found: the
	// curve takes at least the time of this many calls at W to come back to W.
	CubicProbeCalls = 80
	// CubicMaxK bounds that stretch, in seconds: a client cut to a small rate (a cloud
	// throttling everything for a while) still finds its quota again within tens of
	// seconds.
	CubicMaxK = 5.0
	// measureInterval and measureSmoothing make the measured rates: events per
	// interval, smoothed exponentially. The rate never grows above twice the measured
	// send rate, so a quiet client does not climb to its ceiling unseen.
	measureInterval  = 500 * time.Millisecond
	measureSmoothing = 0.8
	measureIdle      = 4 * measureInterval
)

// clock is time as the budget sees it; tests use a fake one.
type clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) stopper
}

type stopper interface{ Stop() bool }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) stopper {
	return time.AfterFunc(d, f)
}

// adaptiveRate is the CUBIC-like fill rate of the budget's token bucket. It is not
// safe for concurrent use; the budget's mutex guards it.
type adaptiveRate struct {
	min, max float64
	rate     float64
	// lastMax is W, the rate at the last cut (or start/Beta at the start, so that the
	// curve begins at the start rate), epoch the time of that cut, k the seconds
	// after it at which the curve is back at lastMax and scale the cubic's scale
	// that makes it so.
	lastMax float64
	epoch   time.Time
	k       float64
	scale   float64

	// sent measures the calls sent, accepted the answers that were not throttled.
	sent, accepted meter
}

// meter measures a rate of events. Its rate is 0 while it knows none: before its
// first interval, and again after an idle gap; the first interval after that counts
// for measureSmoothing of it, as any other.
type meter struct {
	rate  float64
	start time.Time // of the current interval
	last  time.Time // of the last add
	count int
}

// add notes n events at now; n = 0 notes activity without events (a throttled answer
// for the accepted rate), so that a rate falls while only those come. A gap of
// measureIdle or more since the last add tells nothing of the rate the cloud allows,
// only that the manager was idle: the meter forgets its rate and starts again. Counted,
// a quiet minute would make a burst's first throttled answer cut from next to
// nothing; kept, a manager calling every few seconds would go on showing the rate of
// its last burst.
func (m *meter) add(now time.Time, n int) {
	idle := now.Sub(m.last) >= measureIdle
	m.last = now
	if idle {
		m.rate, m.start, m.count = 0, now, n
		return
	}
	m.count += n
	d := now.Sub(m.start)
	if d < measureInterval {
		return
	}
	cur := float64(m.count) / d.Seconds()
	m.rate = measureSmoothing*cur + (1-measureSmoothing)*m.rate
	m.count = 0
	m.start = now
}

func newAdaptiveRate(start, lo, hi float64, now time.Time) *adaptiveRate {
	r := &adaptiveRate{min: lo, max: hi, sent: meter{start: now, last: now}, accepted: meter{start: now, last: now}}
	r.rate = r.clamp(start)
	r.restart(r.rate/CubicBeta, now)
	return r
}

func (r *adaptiveRate) clamp(v float64) float64 { return min(r.max, max(r.min, v)) }

func (r *adaptiveRate) restart(lastMax float64, now time.Time) {
	r.lastMax = lastMax
	r.epoch = now
	r.k = math.Cbrt(lastMax * (1 - CubicBeta) / CubicScale)
	r.scale = CubicScale
	if minK := min(CubicProbeCalls/lastMax, CubicMaxK); r.k < minK {
		r.k = minK
		r.scale = lastMax * (1 - CubicBeta) / (minK * minK * minK)
	}
}

// curve is the cubic at now.
func (r *adaptiveRate) curve(now time.Time) float64 {
	t := now.Sub(r.epoch).Seconds() - r.k
	return r.scale*t*t*t + r.lastMax
}

// callSent notes one call sent at now, for the measured send rate.
func (r *adaptiveRate) callSent(now time.Time) { r.sent.add(now, 1) }

// succeeded moves the rate along the curve after an answer that was not throttled,
// never above twice the measured rate unless it is already there.
func (r *adaptiveRate) succeeded(now time.Time) {
	r.accepted.add(now, 1)
	r.rate = r.clamp(min(r.curve(now), max(r.rate, 2*r.sent.rate)))
}

// throttled cuts the rate after a throttled answer to a call sent at sentAt, and
// reports whether it did. A call sent before the last cut was sent at the old rate: its
// throttled answer is the same congestion the cut answered, so it does not cut again
// (as TCP cuts once per window), or a burst of throttled answers would take the rate
// to its floor.
func (r *adaptiveRate) throttled(sentAt, now time.Time) bool {
	r.accepted.add(now, 0)
	if sentAt.Before(r.epoch) {
		return false
	}
	use := r.rate
	for _, m := range []float64{r.sent.rate, r.accepted.rate} {
		if m > 0 && m < use {
			use = m
		}
	}
	// Never below the floor: the accepted rate of a cloud that throttled everything
	// for a while is next to nothing, and a curve back to next to nothing would keep
	// the rate at the floor until the next cut.
	use = max(use, r.min)
	r.restart(use, now)
	r.rate = r.clamp(use * CubicBeta)
	return true
}

// budget is the token bucket every cloud call takes a token from, filled at the
// adaptive rate, with waiting calls served by class.
type budget struct {
	clock clock
	// burst caps the bucket; while the rate adapts, the bucket holds at most one
	// second of the current rate, so that a cut takes effect at once.
	burst    int
	adaptive bool
	onRate   func(float64)

	mu     sync.Mutex
	rate   *adaptiveRate
	tokens float64
	last   time.Time // the bucket's fill time; the hold's end during a hold
	queues map[cloud.Class][]*waiter
	// skipped counts critical grants in a row while refine calls waited.
	skipped int
	timer   stopper
}

type waiter struct {
	class   cloud.Class
	ready   chan struct{}
	granted time.Time // zero until a token is given
}

// newBudget returns a budget starting at start calls/s, adapting between lo and hi
// (a fixed rate when lo == hi), with a bucket of burst tokens, full at the start.
func newBudget(c clock, start, lo, hi float64, burst int, onRate func(float64)) *budget {
	now := c.Now()
	b := &budget{
		clock:    c,
		burst:    burst,
		adaptive: lo < hi,
		onRate:   onRate,
		rate:     newAdaptiveRate(start, lo, hi, now),
		last:     now,
		queues:   make(map[cloud.Class][]*waiter, 2),
	}
	b.tokens = b.capacity()
	if onRate != nil {
		onRate(b.rate.rate)
	}
	return b
}

func (b *budget) capacity() float64 {
	if !b.adaptive {
		return float64(b.burst)
	}
	return min(float64(b.burst), max(1, math.Ceil(b.rate.rate)))
}

// Rate returns the current fill rate in calls/s.
func (b *budget) Rate() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rate.rate
}

// acquire waits for a token for a call of class, and returns when it got it. When
// ctx ends first, the call leaves the queue (or gives back the token it was just
// given) and acquire returns ctx's error.
func (b *budget) acquire(ctx context.Context, class cloud.Class) (time.Time, error) {
	w := &waiter{class: class, ready: make(chan struct{})}
	b.mu.Lock()
	b.queues[class] = append(b.queues[class], w)
	b.dispatchLocked()
	b.mu.Unlock()
	select {
	case <-w.ready:
		return w.granted, nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !w.granted.IsZero() {
		b.tokens = min(b.capacity(), b.tokens+1)
	} else {
		b.remove(w)
	}
	b.dispatchLocked()
	return time.Time{}, ctx.Err()
}

func (b *budget) remove(w *waiter) {
	q := b.queues[w.class]
	for i, x := range q {
		if x == w {
			b.queues[w.class] = append(q[:i:i], q[i+1:]...)
			return
		}
	}
}

// next takes the waiter to serve next: the oldest critical call, unless refine calls
// have waited through cloud.RefineEvery-1 critical grants in a row.
func (b *budget) next() *waiter {
	crit, ref := b.queues[cloud.ClassCritical], b.queues[cloud.ClassRefine]
	if len(ref) == 0 {
		b.skipped = 0
	}
	switch {
	case len(crit) > 0 && (len(ref) == 0 || b.skipped < cloud.RefineEvery-1):
		if len(ref) > 0 {
			b.skipped++
		}
		b.queues[cloud.ClassCritical] = crit[1:]
		return crit[0]
	case len(ref) > 0:
		b.skipped = 0
		b.queues[cloud.ClassRefine] = ref[1:]
		return ref[0]
	}
	return nil
}

func (b *budget) waiting() bool {
	return len(b.queues[cloud.ClassCritical]) > 0 || len(b.queues[cloud.ClassRefine]) > 0
}

func (b *budget) refill(now time.Time) {
	if !now.After(b.last) {
		return // held: nothing is earned before the hold ends
	}
	b.tokens = min(b.capacity(), b.tokens+now.Sub(b.last).Seconds()*b.rate.rate)
	b.last = now
}

// hold empties the bucket and grants nothing before until: the cloud said (with a
// Retry-After) that the account's quota is spent until then. Without it, the calls
// granted tokens while the Retry-After held them would all go at its end, at once,
// into a quota that has only just begun to refill, and be throttled again.
func (b *budget) hold(until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(b.clock.Now())
	b.tokens = 0
	if until.After(b.last) {
		b.last = until
	}
	b.dispatchLocked()
}

// dispatchLocked gives the tokens there are to waiters, in class order, and arms a
// timer for the next token while any wait.
func (b *budget) dispatchLocked() {
	now := b.clock.Now()
	b.refill(now)
	for b.tokens >= 1 && b.waiting() {
		w := b.next()
		b.tokens--
		b.rate.callSent(now)
		w.granted = now
		close(w.ready)
	}
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	if !b.waiting() {
		return
	}
	d := time.Duration((1 - b.tokens) / b.rate.rate * float64(time.Second))
	if b.last.After(now) {
		d += b.last.Sub(now)
	}
	b.timer = b.clock.AfterFunc(max(d, time.Microsecond), func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.dispatchLocked()
	})
}

// observe feeds the answer to a call granted at sentAt into the rate: throttled or
// not. It reports whether the rate was cut.
func (b *budget) observe(sentAt time.Time, throttled bool) bool {
	if !b.adaptive {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	// Tokens earned so far are earned at the old rate.
	b.refill(now)
	cut := false
	if throttled {
		cut = b.rate.throttled(sentAt, now)
		b.tokens = min(b.tokens, b.capacity())
	} else {
		b.rate.succeeded(now)
	}
	if b.onRate != nil {
		b.onRate(b.rate.rate)
	}
	if b.waiting() {
		b.dispatchLocked()
	}
	return cut
}

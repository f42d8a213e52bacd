package faults

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/nephele-dev/nephele/localcloud/api"
)

// Decision is what happens to one call. The server waits Latency, then answers 503 if
// Outage, 501 if NotImplemented, 429 with RetryAfter if Throttled, 500 if Fail, and
// otherwise serves the call, hiding instances younger than InvisibleFor.
type Decision struct {
	Latency        time.Duration
	Outage         bool
	NotImplemented bool
	Throttled      bool
	RetryAfter     time.Duration
	Fail           bool
	InvisibleFor   time.Duration
}

// Options configure an Injector.
type Options struct {
	// Seed seeds the random generator behind latency distributions and error rates.
	Seed uint64
	// Now is the clock for rate limits; nil means time.Now.
	Now func() time.Time
}

// Injector holds fault rules and decides what happens to each call. It is safe for
// concurrent use.
type Injector struct {
	now func() time.Time

	mu    sync.Mutex
	rng   *rand.Rand
	rules []*rule
}

type rule struct {
	api.Fault
	bucket *bucket // nil without a rate limit
}

// New returns an Injector with the given rules, which must pass api.ValidateFaults.
func New(opts Options, rules []api.Fault) (*Injector, error) {
	in := &Injector{
		now: opts.Now,
		rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
	}
	if in.now == nil {
		in.now = time.Now
	}
	if err := in.Replace(rules); err != nil {
		return nil, err
	}
	return in, nil
}

func (in *Injector) newRule(f api.Fault) *rule {
	r := &rule{Fault: f}
	if f.Latency != nil {
		l := *f.Latency
		r.Latency = &l
	}
	if f.RateLimit != nil {
		rl := *f.RateLimit
		r.RateLimit = &rl
		r.bucket = newBucket(rl.QPS, rl.Burst, in.now())
	}
	return r
}

// Replace replaces every rule. Rate-limit buckets start full.
func (in *Injector) Replace(faults []api.Fault) error {
	if err := api.ValidateFaults(faults); err != nil {
		return err
	}
	rules := make([]*rule, 0, len(faults))
	for _, f := range faults {
		rules = append(rules, in.newRule(f))
	}
	in.mu.Lock()
	in.rules = rules
	in.mu.Unlock()
	return nil
}

// Put adds a rule or replaces the rule with the same operation pattern.
func (in *Injector) Put(f api.Fault) error {
	if err := f.Validate("fault"); err != nil {
		return err
	}
	r := in.newRule(f)
	in.mu.Lock()
	defer in.mu.Unlock()
	for i, old := range in.rules {
		if old.Operation == f.Operation {
			in.rules[i] = r
			return nil
		}
	}
	in.rules = append(in.rules, r)
	return nil
}

// Delete removes the rule for an operation pattern and reports whether there was one.
func (in *Injector) Delete(pattern string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := len(in.rules)
	in.rules = slices.DeleteFunc(in.rules, func(r *rule) bool { return r.Operation == pattern })
	return len(in.rules) != n
}

// Rules returns a copy of the rules, in the order they were added.
func (in *Injector) Rules() []api.Fault {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]api.Fault, 0, len(in.rules))
	for _, r := range in.rules {
		f := r.Fault
		if f.Latency != nil {
			l := *f.Latency
			f.Latency = &l
		}
		if f.RateLimit != nil {
			rl := *f.RateLimit
			f.RateLimit = &rl
		}
		out = append(out, f)
	}
	return out
}

// Decide returns what happens to one call of op, consuming rate-limit tokens and
// random draws.
func (in *Injector) Decide(op string) Decision {
	in.mu.Lock()
	defer in.mu.Unlock()
	var (
		d                                 Decision
		latency, errRate, invisible, cost *rule
		latencyS, errS, invisibleS, costS int
		limited                           []*rule
	)
	for _, r := range in.rules {
		spec := api.MatchOperation(r.Operation, op)
		if spec == 0 {
			continue
		}
		d.Outage = d.Outage || r.Outage
		d.NotImplemented = d.NotImplemented || r.NotImplemented
		if r.Latency != nil && spec > latencyS {
			latency, latencyS = r, spec
		}
		if r.ErrorRate > 0 && spec > errS {
			errRate, errS = r, spec
		}
		if r.InvisibleFor.Duration > 0 && spec > invisibleS {
			invisible, invisibleS = r, spec
		}
		if r.Cost > 0 && spec > costS {
			cost, costS = r, spec
		}
		if r.bucket != nil {
			limited = append(limited, r)
		}
	}
	tokens := 1.0
	if cost != nil {
		tokens = float64(cost.Cost)
	}
	if latency != nil {
		d.Latency = in.sample(latency.Latency)
	}
	if invisible != nil {
		d.InvisibleFor = invisible.InvisibleFor.Duration
	}
	if d.Outage || d.NotImplemented {
		return d
	}
	if len(limited) > 0 {
		now := in.now()
		for _, r := range limited {
			if w := r.bucket.wait(now, tokens); w > d.RetryAfter {
				d.RetryAfter = w
			}
		}
		if d.RetryAfter > 0 {
			d.Throttled = true
			return d
		}
		for _, r := range limited {
			r.bucket.take(tokens)
		}
	}
	if errRate != nil && in.rng.Float64() < errRate.ErrorRate {
		d.Fail = true
	}
	return d
}

// sample draws one latency. Called with in.mu held.
func (in *Injector) sample(l *api.Latency) time.Duration {
	switch l.Distribution {
	case api.DistributionUniform:
		span := l.Max.Duration - l.Min.Duration
		if span <= 0 {
			return l.Min.Duration
		}
		return l.Min.Duration + time.Duration(in.rng.Int64N(int64(span)+1))
	case api.DistributionNormal:
		v := float64(l.Mean.Duration) + in.rng.NormFloat64()*float64(l.StdDev.Duration)
		if v <= 0 {
			return 0
		}
		if v > math.MaxInt64 {
			return time.Duration(math.MaxInt64)
		}
		return time.Duration(v)
	default:
		return l.Fixed.Duration
	}
}

// bucket is a token bucket. It is guarded by the Injector's mutex.
type bucket struct {
	rate   float64 // tokens per second
	burst  float64
	tokens float64
	last   time.Time
}

func newBucket(qps float64, burst int, now time.Time) *bucket {
	b := float64(burst)
	if burst == 0 {
		b = math.Max(1, math.Ceil(qps))
	}
	return &bucket{rate: qps, burst: b, tokens: b, last: now}
}

// wait refills the bucket up to now and returns how long until a call costing n tokens
// (at most the burst: a fuller bucket never comes) can take them; 0 means now.
func (b *bucket) wait(now time.Time, n float64) time.Duration {
	if now.After(b.last) {
		b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
	n = math.Min(n, b.burst)
	if b.tokens >= n {
		return 0
	}
	w := time.Duration((n - b.tokens) / b.rate * float64(time.Second))
	if w <= 0 {
		w = time.Nanosecond
	}
	return w
}

// take consumes a call's n tokens (at most the burst); wait must have returned 0 for
// them just before.
func (b *bucket) take(n float64) { b.tokens -= math.Min(n, b.burst) }

// String describes a decision for logs.
func (d Decision) String() string {
	return fmt.Sprintf("latency=%s outage=%t notImplemented=%t throttled=%t retryAfter=%s fail=%t invisibleFor=%s",
		d.Latency, d.Outage, d.NotImplemented, d.Throttled, d.RetryAfter, d.Fail, d.InvisibleFor)
}

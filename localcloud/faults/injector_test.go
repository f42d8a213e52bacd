package faults

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/localcloud/api"
)

// fakeClock is a settable clock for rate limits.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time               { return c.t }
func (c *fakeClock) step(d time.Duration)         { c.t = c.t.Add(d) }
func ms(n int) api.Duration                       { return api.Duration{Duration: time.Duration(n) * time.Millisecond} }
func fixed(d time.Duration) *api.Latency          { return &api.Latency{Fixed: api.Duration{Duration: d}} }
func limit(qps float64, burst int) *api.RateLimit { return &api.RateLimit{QPS: qps, Burst: burst} }

func newInjector(t *testing.T, clock *fakeClock, rules ...api.Fault) *Injector {
	t.Helper()
	opts := Options{Seed: 42}
	if clock != nil {
		opts.Now = clock.now
	}
	in, err := New(opts, rules)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return in
}

func TestDecideSelectsMostSpecificKnob(t *testing.T) {
	in := newInjector(t, nil,
		api.Fault{Operation: "*", Latency: fixed(time.Second)},
		api.Fault{Operation: "lb.*", Latency: fixed(2 * time.Second)},
		api.Fault{Operation: "lb.ensure", Latency: fixed(3 * time.Second)},
		api.Fault{Operation: "instances.*", InvisibleFor: ms(500)},
		api.Fault{Operation: "routes.delete", Outage: true},
		api.Fault{Operation: "routes.*", NotImplemented: true},
	)
	tests := []struct {
		op   string
		want Decision
	}{
		{op: "lb.ensure", want: Decision{Latency: 3 * time.Second}},
		{op: "lb.get", want: Decision{Latency: 2 * time.Second}},
		{op: "instances.list", want: Decision{Latency: time.Second, InvisibleFor: 500 * time.Millisecond}},
		{op: "routes.delete", want: Decision{Latency: time.Second, Outage: true, NotImplemented: true}},
		{op: "routes.list", want: Decision{Latency: time.Second, NotImplemented: true}},
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			if got := in.Decide(tt.op); got != tt.want {
				t.Errorf("Decide(%s) = %v, want %v", tt.op, got, tt.want)
			}
		})
	}
}

func TestRateLimitThrottlesWithRetryAfter(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	in := newInjector(t, clock, api.Fault{Operation: "instances.list", RateLimit: limit(2, 3)})
	for i := range 3 {
		if d := in.Decide("instances.list"); d.Throttled {
			t.Fatalf("call %d within the burst throttled: %v", i, d)
		}
	}
	d := in.Decide("instances.list")
	if !d.Throttled || d.RetryAfter != 500*time.Millisecond {
		t.Fatalf("call past the burst = %v, want throttled with RetryAfter 500ms (one token at 2/s)", d)
	}
	if d := in.Decide("instances.get"); d.Throttled {
		t.Fatalf("another operation throttled: %v", d)
	}
	clock.step(500 * time.Millisecond)
	if d := in.Decide("instances.list"); d.Throttled {
		t.Fatalf("call after the refill throttled: %v", d)
	}
	if d := in.Decide("instances.list"); !d.Throttled {
		t.Fatalf("second call after one token refilled not throttled")
	}
}

func TestRateLimitsStack(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	in := newInjector(t, clock,
		api.Fault{Operation: "*", RateLimit: limit(1, 2)},
		api.Fault{Operation: "lb.ensure", RateLimit: limit(0.1, 1)},
	)
	if d := in.Decide("lb.ensure"); d.Throttled {
		t.Fatalf("first call throttled: %v", d)
	}
	d := in.Decide("lb.ensure")
	if !d.Throttled || d.RetryAfter != 10*time.Second {
		t.Fatalf("second lb.ensure = %v, want throttled by its own 0.1/s bucket (10s)", d)
	}
	// The refused call took no token from the account-wide bucket: one is left.
	if d := in.Decide("lb.get"); d.Throttled {
		t.Fatalf("lb.get throttled although the shared bucket has a token: %v", d)
	}
	if d := in.Decide("routes.list"); !d.Throttled || d.RetryAfter != time.Second {
		t.Fatalf("third call overall = %v, want throttled by the shared 1/s bucket", d)
	}
}

// TestCostTakesTokensFromEveryBucket: a call of an operation with a cost takes that many
// tokens from the account-wide bucket, waits for as many, and never for more than the
// bucket holds.
func TestCostTakesTokensFromEveryBucket(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	in := newInjector(t, clock,
		api.Fault{Operation: "*", RateLimit: limit(10, 10)},
		api.Fault{Operation: "routes.apply", Cost: 4},
		api.Fault{Operation: "routes.*", Cost: 50},
	)
	for i := range 2 {
		if d := in.Decide("routes.apply"); d.Throttled {
			t.Fatalf("apply %d within the burst throttled: %v", i, d)
		}
	}
	// 2 tokens are left: an apply (4, its own rule's cost, the most specific) waits for
	// 2 more at 10/s; a plain call still gets one.
	if d := in.Decide("routes.apply"); !d.Throttled || d.RetryAfter != 200*time.Millisecond {
		t.Fatalf("third apply = %v, want throttled for 200ms (2 tokens at 10/s)", d)
	}
	if d := in.Decide("lb.get"); d.Throttled {
		t.Fatalf("lb.get throttled with 2 tokens left: %v", d)
	}
	// routes.list costs 50 by the group rule, more than the burst of 10: it waits
	// for a full bucket, not forever.
	clock.step(time.Second)
	if d := in.Decide("routes.list"); d.Throttled {
		t.Fatalf("routes.list on a full bucket throttled: %v", d)
	}
	if d := in.Decide("lb.get"); !d.Throttled || d.RetryAfter != 100*time.Millisecond {
		t.Fatalf("lb.get after a call that emptied the bucket = %v, want throttled for 100ms", d)
	}
}

func TestErrorRateIsSeededAndClose(t *testing.T) {
	draw := func() []bool {
		in := newInjector(t, nil, api.Fault{Operation: "lb.get", ErrorRate: 0.3})
		out := make([]bool, 1000)
		for i := range out {
			out[i] = in.Decide("lb.get").Fail
		}
		return out
	}
	a, b := draw(), draw()
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two injectors with the same seed failed different calls")
	}
	fails := 0
	for _, f := range a {
		if f {
			fails++
		}
	}
	// 1000 draws at 0.3: the standard deviation is about 14.5, so this range is >6σ.
	if fails < 210 || fails > 390 {
		t.Errorf("error rate 0.3 failed %d of 1000 calls", fails)
	}
}

func TestLatencyDistributions(t *testing.T) {
	tests := []struct {
		name     string
		latency  *api.Latency
		min, max time.Duration
		mean     time.Duration
		tol      time.Duration
	}{
		{name: "fixed", latency: fixed(200 * time.Millisecond), min: 200 * time.Millisecond, max: 200 * time.Millisecond, mean: 200 * time.Millisecond},
		{
			name:    "uniform",
			latency: &api.Latency{Distribution: api.DistributionUniform, Min: ms(50), Max: ms(150)},
			min:     50 * time.Millisecond, max: 150 * time.Millisecond, mean: 100 * time.Millisecond, tol: 5 * time.Millisecond,
		},
		{
			name:    "normal",
			latency: &api.Latency{Distribution: api.DistributionNormal, Mean: ms(100), StdDev: ms(20)},
			min:     0, max: time.Hour, mean: 100 * time.Millisecond, tol: 3 * time.Millisecond,
		},
		{
			name:    "normal never negative",
			latency: &api.Latency{Distribution: api.DistributionNormal, Mean: ms(1), StdDev: ms(100)},
			min:     0, max: time.Hour, mean: 40 * time.Millisecond, tol: 40 * time.Millisecond,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := newInjector(t, nil, api.Fault{Operation: "*", Latency: tt.latency})
			const n = 4000
			var sum time.Duration
			for range n {
				d := in.Decide("instances.get").Latency
				if d < tt.min || d > tt.max {
					t.Fatalf("latency %s outside [%s, %s]", d, tt.min, tt.max)
				}
				sum += d
			}
			mean := sum / n
			if diff := time.Duration(math.Abs(float64(mean - tt.mean))); diff > tt.tol {
				t.Errorf("mean latency %s, want %s ± %s", mean, tt.mean, tt.tol)
			}
		})
	}
}

func TestOutageAndNotImplementedSkipTokens(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	in := newInjector(t, clock, api.Fault{Operation: "lb.*", RateLimit: limit(1, 1)}, api.Fault{Operation: "lb.delete", Outage: true})
	if d := in.Decide("lb.delete"); !d.Outage || d.Throttled {
		t.Fatalf("Decide(lb.delete) = %v, want an outage", d)
	}
	if d := in.Decide("lb.get"); d.Throttled {
		t.Fatalf("the outage consumed the bucket's token: %v", d)
	}
}

func TestRuleChanges(t *testing.T) {
	in := newInjector(t, nil, api.Fault{Operation: "lb.ensure", Outage: true})
	if err := in.Put(api.Fault{Operation: "lb.ensure", ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	if err := in.Put(api.Fault{Operation: "routes.list", Outage: true}); err != nil {
		t.Fatal(err)
	}
	if d := in.Decide("lb.ensure"); d.Outage || !d.Fail {
		t.Fatalf("after Put replaced the rule: %v, want only failures", d)
	}
	if got := len(in.Rules()); got != 2 {
		t.Fatalf("rules after two Puts = %d, want 2", got)
	}
	if !in.Delete("routes.list") || in.Delete("routes.list") {
		t.Fatal("Delete should report true once, then false")
	}
	if err := in.Put(api.Fault{Operation: "nope"}); err == nil {
		t.Fatal("Put accepted an unknown operation")
	}
	if err := in.Replace([]api.Fault{{Operation: "*", Outage: true}, {Operation: "*", ErrorRate: 1}}); err == nil {
		t.Fatal("Replace accepted two rules for one pattern")
	}
	if d := in.Decide("lb.ensure"); !d.Fail {
		t.Fatal("a failed Replace changed the rules")
	}
	// Rules returns copies.
	rules := in.Rules()
	rules[0].ErrorRate = 0
	if in.Rules()[0].ErrorRate != 1 {
		t.Fatal("changing the result of Rules changed the injector")
	}
	if err := in.Replace(nil); err != nil {
		t.Fatal(err)
	}
	if d := in.Decide("lb.ensure"); d != (Decision{}) {
		t.Fatalf("after clearing: %v", d)
	}
}

func TestParseRule(t *testing.T) {
	tests := []struct {
		in      string
		want    api.Fault
		wantErr string
	}{
		{in: "lb.ensure:latency=200ms", want: api.Fault{Operation: "lb.ensure", Latency: fixed(200 * time.Millisecond)}},
		{in: "instances.list:latency=50ms-200ms", want: api.Fault{Operation: "instances.list", Latency: &api.Latency{Distribution: api.DistributionUniform, Min: ms(50), Max: ms(200)}}},
		{in: "*:latency=100ms+-20ms", want: api.Fault{Operation: "*", Latency: &api.Latency{Distribution: api.DistributionNormal, Mean: ms(100), StdDev: ms(20)}}},
		{in: "*:latency=100ms±20ms", want: api.Fault{Operation: "*", Latency: &api.Latency{Distribution: api.DistributionNormal, Mean: ms(100), StdDev: ms(20)}}},
		{in: "lb.*:errors=0.25", want: api.Fault{Operation: "lb.*", ErrorRate: 0.25}},
		{in: "lb.*:errors=10%", want: api.Fault{Operation: "lb.*", ErrorRate: 0.1}},
		{in: "*:rate=10/s,burst=20", want: api.Fault{Operation: "*", RateLimit: limit(10, 20)}},
		{in: "*:rate=120/m", want: api.Fault{Operation: "*", RateLimit: limit(2, 0)}},
		{in: "routes.*:outage", want: api.Fault{Operation: "routes.*", Outage: true}},
		{in: "routes.apply:cost=5", want: api.Fault{Operation: "routes.apply", Cost: 5}},
		{in: "routes.apply:cost=0", wantErr: "want 1 or more tokens"},
		{in: "routes.apply:cost=20000", wantErr: "cost"},
		{in: "routes.*:unimplemented", want: api.Fault{Operation: "routes.*", NotImplemented: true}},
		{in: "instances.*:invisible=5s", want: api.Fault{Operation: "instances.*", InvisibleFor: api.Duration{Duration: 5 * time.Second}}},
		{in: " lb.get : latency=1s , errors=1 ", want: api.Fault{Operation: "lb.get", Latency: fixed(time.Second), ErrorRate: 1}},
		{in: "lb.ensure", wantErr: "want OPERATION:KNOB"},
		{in: "lb.ensure:", wantErr: "want OPERATION:KNOB"},
		{in: "lb.nope:outage", wantErr: "operation"},
		{in: "lb.ensure:latency", wantErr: "needs a value"},
		{in: "lb.ensure:latency=fast", wantErr: "latency"},
		{in: "lb.ensure:latency=200ms-100ms", wantErr: "below min"},
		{in: "lb.ensure:errors=2", wantErr: "fraction"},
		{in: "lb.ensure:rate=0", wantErr: "positive"},
		{in: "lb.ensure:rate=5/d", wantErr: "N/s"},
		{in: "lb.ensure:burst=5", wantErr: "burst needs rate"},
		{in: "lb.ensure:outage=yes", wantErr: "takes no value"},
		{in: "lb.ensure:wobble=1", wantErr: "unknown knob"},
		{in: "lb.get:invisible=5s", wantErr: "only instance operations"},
		{in: "instances.create:invisible=5s", wantErr: "not on instances.create"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRule(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseRule(%q) = %+v, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRule(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseRule(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

package instrumented

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nephele-dev/nephele/cloud"
)

// DefaultMaxRetryAfter is the longest Retry-After honoured when Options.MaxRetryAfter
// is 0.
const DefaultMaxRetryAfter = 5 * time.Minute

// Options configures a Cloud. The zero value adds metrics (unregistered) and nothing
// else: no timeout, no rate limit.
type Options struct {
	// Timeout bounds each provider call; 0 means no bound beyond the caller's context.
	// Waits for Retry-After and the rate limit come before and are not bounded by it.
	Timeout time.Duration
	// QPS is the rate, in calls per second, at which the client-side budget shared by
	// all controllers starts; QPS <= 0 means no limit (and MinQPS, MaxQPS are ignored).
	QPS float64
	// MinQPS and MaxQPS bound the adaptive rate: it rises while calls succeed and is
	// cut on throttled answers, never below MinQPS nor above MaxQPS. 0 means QPS, so
	// that leaving both 0 keeps the rate fixed at QPS. They must satisfy
	// MinQPS <= QPS <= MaxQPS.
	MinQPS, MaxQPS float64
	// Burst caps how many calls may go at once; <= 0 means max(1, ceil(MaxQPS)). While
	// the rate adapts, the bucket also holds at most one second of the current rate.
	Burst int
	// MaxRetryAfter caps the Retry-After the cloud may ask for, so that one absurd
	// answer cannot stop every controller for hours; 0 means DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// Registerer gets the metrics. Collectors already registered there (by another
	// Cloud) are shared. Nil keeps the metrics unregistered.
	Registerer prometheus.Registerer

	// clock replaces the real clock in tests.
	clock clock
}

// Cloud instruments a provider. Create it with New and hand each controller the
// provider returned by For.
type Cloud struct {
	inner         cloud.Provider
	timeout       time.Duration
	maxRetryAfter time.Duration
	budget        *budget // nil when unlimited
	metrics       *metrics

	mu sync.Mutex
	// throttledUntil is when the cloud allows calls again after a Retry-After.
	throttledUntil time.Time
}

// New wraps p. It fails when p is nil, an option is negative, or the metrics cannot be
// registered.
func New(p cloud.Provider, opts Options) (*Cloud, error) {
	if p == nil {
		return nil, errors.New("instrumenting the cloud provider: provider is nil")
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("instrumenting cloud provider %q: timeout %s is negative", p.ProviderName(), opts.Timeout)
	}
	if opts.MaxRetryAfter < 0 {
		return nil, fmt.Errorf("instrumenting cloud provider %q: maximum Retry-After %s is negative", p.ProviderName(), opts.MaxRetryAfter)
	}
	for _, q := range []struct {
		name string
		v    float64
	}{{"QPS", opts.QPS}, {"minimum QPS", opts.MinQPS}, {"maximum QPS", opts.MaxQPS}} {
		if math.IsNaN(q.v) || math.IsInf(q.v, 0) {
			return nil, fmt.Errorf("instrumenting cloud provider %q: %s %v is not a number", p.ProviderName(), q.name, q.v)
		}
	}
	m, err := newMetrics(opts.Registerer, p.ProviderName())
	if err != nil {
		return nil, fmt.Errorf("instrumenting cloud provider %q: %w", p.ProviderName(), err)
	}
	c := &Cloud{inner: p, timeout: opts.Timeout, maxRetryAfter: opts.MaxRetryAfter, metrics: m}
	if c.maxRetryAfter == 0 {
		c.maxRetryAfter = DefaultMaxRetryAfter
	}
	if opts.QPS > 0 {
		lo, hi := opts.MinQPS, opts.MaxQPS
		if lo == 0 {
			lo = opts.QPS
		}
		if hi == 0 {
			hi = opts.QPS
		}
		if lo < 0 || lo > opts.QPS || hi < opts.QPS {
			return nil, fmt.Errorf("instrumenting cloud provider %q: QPS %v must lie between the minimum %v and the maximum %v", p.ProviderName(), opts.QPS, lo, hi)
		}
		burst := opts.Burst
		if burst <= 0 {
			burst = max(1, int(math.Ceil(hi)))
		}
		clk := opts.clock
		if clk == nil {
			clk = realClock{}
		}
		c.budget = newBudget(clk, opts.QPS, lo, hi, burst, m.rate.Set)
	}
	return c, nil
}

// Rate returns the budget's rate now, in calls per second, and false when there is no
// client-side limit.
func (c *Cloud) Rate() (float64, bool) {
	if c.budget == nil {
		return 0, false
	}
	return c.budget.Rate(), true
}

// For returns the provider controller uses. It has the capabilities the wrapped
// provider reports (asked on each capability call, not once) and its name; each call
// through it is instrumented with controller as the metrics' controller label.
func (c *Cloud) For(controller string) cloud.Provider {
	if controller == "" {
		controller = "unknown"
	}
	return &provider{c: c, controller: controller}
}

// ThrottledUntil returns when calls may go to the cloud again after the latest
// Retry-After; a time in the past means now.
func (c *Cloud) ThrottledUntil() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.throttledUntil
}

// noteRetryAfter holds every controller's calls back for d, capped at MaxRetryAfter,
// keeping a later deadline already recorded. It returns err as the caller must see it:
// when d was over the cap, a *cloud.ThrottledError carrying the capped wait wraps err,
// so that a controller scheduling its retry from cloud.RetryAfter waits no longer than
// the calls do. This is the one place a Retry-After is capped.
func (c *Cloud) noteRetryAfter(d time.Duration, err error) error {
	if d > c.maxRetryAfter {
		err = &cloud.ThrottledError{
			RetryAfter: c.maxRetryAfter,
			Err:        fmt.Errorf("the cloud's Retry-After of %s is capped at %s: %w", d, c.maxRetryAfter, err),
		}
		d = c.maxRetryAfter
	}
	until := time.Now().Add(d)
	if c.budget != nil {
		c.budget.hold(c.budget.clock.Now().Add(d))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if until.After(c.throttledUntil) {
		c.throttledUntil = until
	}
	return err
}

// waitRetryAfter waits until the cloud's Retry-After has passed. The deadline is read
// again after each wait: another controller's call may have pushed it further.
func (c *Cloud) waitRetryAfter(ctx context.Context, controller string) error {
	for {
		d := time.Until(c.ThrottledUntil())
		if d <= 0 {
			return nil
		}
		start := time.Now()
		err := sleep(ctx, d)
		c.metrics.wait.WithLabelValues(controller, WaitRetryAfter).Add(time.Since(start).Seconds())
		if err != nil {
			return fmt.Errorf("waiting %s for the cloud's Retry-After: %w", d.Round(time.Millisecond), err)
		}
	}
}

// waitBudget takes a token from the shared budget in class, and returns when it was
// given (the zero time without a budget). A call whose ctx ends first leaves the queue.
func (c *Cloud) waitBudget(ctx context.Context, controller string, class cloud.Class) (time.Time, error) {
	if c.budget == nil {
		return time.Time{}, nil
	}
	start := time.Now()
	granted, err := c.budget.acquire(ctx, class)
	waited := time.Since(start).Seconds()
	c.metrics.wait.WithLabelValues(controller, WaitRateLimit).Add(waited)
	c.metrics.classWait.WithLabelValues(string(class)).Observe(waited)
	if err != nil {
		return time.Time{}, fmt.Errorf("waiting %s for the client-side cloud budget: %w", time.Duration(waited*float64(time.Second)).Round(time.Millisecond), err)
	}
	return granted, nil
}

// observe feeds a call's answer to the adaptive budget. Only the cloud's answers
// count: a call that timed out or was canceled says nothing about the quota.
func (c *Cloud) observe(granted time.Time, result cloud.Result) {
	if c.budget == nil || granted.IsZero() {
		return
	}
	switch result {
	case cloud.ResultTimeout, cloud.ResultCanceled:
		return
	case cloud.ResultThrottled:
		if c.budget.observe(granted, true) {
			c.metrics.cuts.Inc()
		}
	default:
		c.budget.observe(granted, false)
	}
}

// sleep waits for d or until ctx ends, returning ctx.Err() in that case.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// call makes one instrumented call of fn for controller.
func call[T any](ctx context.Context, p *provider, operation cloud.Operation, subject string, fn func(context.Context) (T, error)) (T, error) {
	c := p.c
	op := string(operation)
	var zero T
	// The fence is checked before the waits, so that a fenced caller does not queue for
	// tokens, and again after them, just before the call: a wait (or a pause of the
	// whole process) may have outlasted the lease.
	if _, err := p.checkFence(op); err != nil {
		return zero, wrap(op, subject, err)
	}
	if err := c.waitRetryAfter(ctx, p.controller); err != nil {
		return zero, wrap(op, subject, err)
	}
	class := ClassOf(ctx, operation)
	granted, err := c.waitBudget(ctx, p.controller, class)
	if err != nil {
		return zero, wrap(op, subject, err)
	}
	// A Retry-After may have come in while this call waited for its token.
	if err := c.waitRetryAfter(ctx, p.controller); err != nil {
		return zero, wrap(op, subject, err)
	}
	closesAt, err := p.checkFence(op)
	if err != nil {
		return zero, wrap(op, subject, err)
	}

	callCtx := ctx
	if c.timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	// The call ends when the fence closes: a request still under way then is cut off
	// rather than left to land after another replica may have taken over.
	callCtx, cancelFenced := fencedContext(callCtx, closesAt)
	defer cancelFenced()
	inFlight := c.metrics.inFlight.WithLabelValues(p.controller, op)
	inFlight.Inc()
	start := time.Now()
	v, err := fn(callCtx)
	elapsed := time.Since(start)
	inFlight.Dec()

	// A provider may fail with an error of its own when the context ends (a closed
	// connection, say). Name the context's error too, so that the result is a
	// timeout, not a cloud failure.
	if err != nil && cloud.Classify(err) == cloud.ResultError && callCtx.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, callCtx.Err())
	}
	result := cloud.Classify(err)
	c.metrics.requests.WithLabelValues(p.controller, op, string(result)).Inc()
	c.metrics.classRequests.WithLabelValues(string(class), string(result)).Inc()
	c.observe(granted, result)
	c.metrics.duration.WithLabelValues(p.controller, op).Observe(elapsed.Seconds())
	c.metrics.upstreamDuration.WithLabelValues(op).Observe(elapsed.Seconds())
	if err != nil {
		// As upstream providers count: every failed call, a "not found" too.
		c.metrics.upstreamErrors.WithLabelValues(op).Inc()
	}
	if err != nil && !closesAt.IsZero() && ctx.Err() == nil && !time.Now().Before(closesAt) {
		// Cut off by the fence, not failed by the cloud: the caller must stop, not retry.
		return v, wrap(op, subject, fmt.Errorf("the fence closed while the call ran: %w (%w)", cloud.ErrFenced, err))
	}
	if err != nil {
		if d, ok := cloud.RetryAfter(err); ok {
			err = c.noteRetryAfter(d, err)
		}
		return v, wrap(op, subject, err)
	}
	return v, nil
}

// wrap names the operation and its subject in err, keeping err matchable.
func wrap(op, subject string, err error) error {
	if subject == "" {
		return fmt.Errorf("cloud %s: %w", op, err)
	}
	return fmt.Errorf("cloud %s %q: %w", op, subject, err)
}

package poll

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Timeout is how long Eventually waits: far longer than anything a test waits for takes
// on an idle machine, so that load never fails a test.
const Timeout = 60 * time.Second

// The interval between calls starts at firstInterval and doubles up to maxInterval.
const (
	firstInterval = 5 * time.Millisecond
	maxInterval   = 100 * time.Millisecond
)

// Eventually calls cond until it returns nil. Once Timeout has passed it fails the test
// with t.Fatalf, naming what and quoting cond's last error. Call it from the test's
// goroutine, as t.Fatalf requires.
func Eventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	Within(t, Timeout, what, cond)
}

// Within is Eventually with its own deadline: for a test whose assertion is the time
// something takes (a follower takes over within a lease duration), or a wait known to
// take longer than Timeout.
func Within(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	if err := Until(t.Context(), timeout, func(context.Context) error { return cond() }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// EventuallyContext is Eventually for a condition that calls out (an API server, a
// cloud): cond's context ends at the deadline, so a call that hangs cannot outlast the
// wait.
func EventuallyContext(t testing.TB, what string, cond func(context.Context) error) {
	t.Helper()
	WithinContext(t, Timeout, what, cond)
}

// WithinContext is Within for a condition that calls out (an API server, a cloud):
// cond's context ends at the deadline, so a call that hangs cannot outlast the wait.
func WithinContext(t testing.TB, timeout time.Duration, what string, cond func(context.Context) error) {
	t.Helper()
	if err := Until(t.Context(), timeout, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Until calls cond until it returns nil, and returns nil then. It returns an error
// quoting cond's last error once timeout has passed or ctx has ended, whichever comes
// first; cond's context ends then too. The first call is immediate.
func Until(ctx context.Context, timeout time.Duration, cond func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	interval := firstInterval
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		last := cond(ctx)
		if last == nil {
			return nil
		}
		timer.Reset(interval)
		select {
		case <-ctx.Done():
			return &TimeoutError{After: time.Since(start).Round(time.Millisecond), Last: last, Cause: context.Cause(ctx)}
		case <-timer.C:
		}
		interval = min(2*interval, maxInterval)
	}
}

// TimeoutError is Until's answer when the condition did not hold in time.
type TimeoutError struct {
	// After is how long Until waited.
	After time.Duration
	// Last is the condition's last error: what it saw instead of what it waited for.
	Last error
	// Cause is why the wait ended: context.DeadlineExceeded at the deadline, or the
	// cause of the caller's context ending first.
	Cause error
}

func (e *TimeoutError) Error() string {
	if errors.Is(e.Cause, context.DeadlineExceeded) {
		return fmt.Sprintf("still not after %s: %v", e.After, e.Last)
	}
	return fmt.Sprintf("gave up after %s (%v): %v", e.After, e.Cause, e.Last)
}

// Unwrap returns the condition's last error, so errors.Is sees what it was.
func (e *TimeoutError) Unwrap() error { return e.Last }

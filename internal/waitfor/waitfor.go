package waitfor

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The interval between calls starts at firstInterval and doubles up to maxInterval.
const (
	firstInterval = 5 * time.Millisecond
	maxInterval   = 100 * time.Millisecond
)

// Condition calls cond until it returns nil, and returns nil then. It returns a
// *TimeoutError quoting cond's last error once timeout has passed or ctx has ended,
// whichever comes first; cond's context ends then too. The first call is immediate.
func Condition(ctx context.Context, timeout time.Duration, cond func(context.Context) error) error {
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

// TimeoutError is Condition's answer when the condition did not hold in time.
type TimeoutError struct {
	// After is how long Condition waited.
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

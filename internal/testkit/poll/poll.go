package poll

import (
	"context"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/waitfor"
)

// Timeout is how long Eventually waits: far longer than anything a test waits for takes
// on an idle machine, so that load never fails a test.
const Timeout = 60 * time.Second

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

// Until is waitfor.Condition: it calls cond until it returns nil, or returns a
// *TimeoutError quoting cond's last error once timeout has passed or ctx has ended. For a
// test that must decide itself what a timeout means.
func Until(ctx context.Context, timeout time.Duration, cond func(context.Context) error) error {
	return waitfor.Condition(ctx, timeout, cond)
}

// TimeoutError is Until's answer when the condition did not hold in time.
type TimeoutError = waitfor.TimeoutError

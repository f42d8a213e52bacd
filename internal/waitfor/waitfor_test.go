package waitfor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCondition(t *testing.T) {
	errNotYet := errors.New("not yet")
	tests := []struct {
		name     string
		timeout  time.Duration
		holdsAt  int // the call that first returns nil; 0: never
		wantErr  bool
		minCalls int
	}{
		{name: "holds at once", timeout: time.Second, holdsAt: 1, minCalls: 1},
		{name: "holds on the fifth call", timeout: 10 * time.Second, holdsAt: 5, minCalls: 5},
		{name: "never holds", timeout: time.Second, wantErr: true, minCalls: 3}, // calls at 0, 5 and 15 ms: a second leaves room for a loaded machine
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := Condition(t.Context(), tt.timeout, func(context.Context) error {
				calls++
				if calls == tt.holdsAt {
					return nil
				}
				return fmt.Errorf("call %d: %w", calls, errNotYet)
			})
			if (err != nil) != tt.wantErr {
				t.Fatalf("Condition = %v, want error %v", err, tt.wantErr)
			}
			if calls < tt.minCalls || (tt.holdsAt > 0 && calls != tt.holdsAt) {
				t.Errorf("%d calls, want %d (at least %d)", calls, tt.holdsAt, tt.minCalls)
			}
			if !tt.wantErr {
				return
			}
			var te *TimeoutError
			if !errors.As(err, &te) || !errors.Is(err, errNotYet) || !errors.Is(te.Cause, context.DeadlineExceeded) {
				t.Errorf("Condition = %#v, want a TimeoutError at the deadline wrapping the last error", err)
			}
			if want := fmt.Sprintf("call %d: not yet", calls); !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "still not after ") {
				t.Errorf("Condition = %q, want the last answer %q after the time waited", err, want)
			}
		})
	}
}

// TestConditionEndsWithTheCallersContext checks that a wait ends with its caller's context and
// that the condition's context ends with it.
func TestConditionEndsWithTheCallersContext(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	stop := errors.New("test over")
	var condCtx context.Context
	err := Condition(ctx, time.Minute, func(c context.Context) error {
		condCtx = c
		cancel(stop)
		return errors.New("still waiting")
	})
	if !errors.Is(err, stop) && !strings.Contains(err.Error(), "test over") {
		t.Errorf("Condition = %v, want it to name the caller's cause", err)
	}
	if !strings.Contains(err.Error(), "still waiting") {
		t.Errorf("Condition = %v, want the last answer", err)
	}
	if condCtx.Err() == nil {
		t.Error("the condition's context is still live after Until returned")
	}
}

// TestConditionBoundsTheConditionsCalls checks that a condition blocked in a call is cut
// off at the deadline.
func TestConditionBoundsTheConditionsCalls(t *testing.T) {
	start := time.Now()
	err := Condition(t.Context(), 50*time.Millisecond, func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Condition = %v, want the deadline", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Until took %s for a 50ms deadline", d)
	}
}

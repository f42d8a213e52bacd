package cloud

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// wrap wraps err twice the way a provider and a caller typically would.
func wrap(err error) error {
	return fmt.Errorf("syncing service default/web: %w", fmt.Errorf("calling the cloud: %w", err))
}

func TestSentinelsThroughWrapping(t *testing.T) {
	tests := []struct {
		name string
		err  error
		is   func(error) bool
		want error
	}{
		{name: "not found", err: NotFoundf("instance %q", "i-1"), is: IsNotFound, want: ErrNotFound},
		{name: "invalid", err: Invalidf("annotation %q: want a number", "x"), is: IsInvalid, want: ErrInvalid},
		{name: "throttled", err: Throttled(time.Second, errors.New("429")), is: IsThrottled, want: ErrThrottled},
		{name: "throttled without cause", err: Throttled(0, nil), is: IsThrottled, want: ErrThrottled},
		{name: "not implemented", err: fmt.Errorf("routes: %w", ErrNotImplemented), is: IsNotImplemented, want: ErrNotImplemented},
		{name: "fenced", err: fmt.Errorf("lease kube-system/ccm may have expired: %w", ErrFenced), is: IsFenced, want: ErrFenced},
	}
	all := []error{ErrNotFound, ErrInvalid, ErrThrottled, ErrNotImplemented, ErrFenced}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, err := range []error{tt.err, wrap(tt.err)} {
				if !tt.is(err) {
					t.Errorf("predicate(%v) = false, want true", err)
				}
				for _, s := range all {
					if got := errors.Is(err, s); got != (s == tt.want) {
						t.Errorf("errors.Is(%v, %v) = %v, want %v", err, s, got, s == tt.want)
					}
				}
			}
		})
	}
}

func TestErrorMessagesNameTheObject(t *testing.T) {
	if got := NotFoundf("instance %q", "i-1").Error(); !strings.Contains(got, `instance "i-1"`) {
		t.Errorf("NotFoundError message = %q, want it to name the instance", got)
	}
	if got := Invalidf("port %d", 70000).Error(); !strings.Contains(got, "port 70000") {
		t.Errorf("InvalidError message = %q, want it to name the port", got)
	}
}

func TestThrottledError(t *testing.T) {
	cause := errors.New("HTTP 429")
	tests := []struct {
		name      string
		err       error
		wantAfter time.Duration
		wantOK    bool
		wantMsg   []string
	}{
		{name: "retry-after and cause", err: Throttled(3*time.Second, cause), wantAfter: 3 * time.Second, wantOK: true, wantMsg: []string{"throttled", "retry after 3s", "HTTP 429"}},
		{name: "no retry-after", err: Throttled(0, cause), wantMsg: []string{"throttled", "HTTP 429"}},
		{name: "negative retry-after", err: Throttled(-time.Second, nil), wantMsg: []string{"throttled"}},
		{name: "wrapped", err: wrap(Throttled(time.Minute, nil)), wantAfter: time.Minute, wantOK: true, wantMsg: []string{"retry after 1m0s"}},
		{name: "plain sentinel has no retry-after", err: fmt.Errorf("x: %w", ErrThrottled)},
		{name: "nil", err: nil},
		{name: "other error", err: errors.New("boom")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after, ok := RetryAfter(tt.err)
			if after != tt.wantAfter || ok != tt.wantOK {
				t.Errorf("RetryAfter = %v, %v; want %v, %v", after, ok, tt.wantAfter, tt.wantOK)
			}
			for _, m := range tt.wantMsg {
				if !strings.Contains(tt.err.Error(), m) {
					t.Errorf("message %q does not contain %q", tt.err.Error(), m)
				}
			}
		})
	}

	t.Run("errors.As and Unwrap", func(t *testing.T) {
		err := wrap(Throttled(time.Second, cause))
		var te *ThrottledError
		if !errors.As(err, &te) {
			t.Fatalf("errors.As(%v, *ThrottledError) = false", err)
		}
		if te.RetryAfter != time.Second {
			t.Errorf("RetryAfter = %v, want 1s", te.RetryAfter)
		}
		if !errors.Is(err, cause) {
			t.Errorf("errors.Is(err, cause) = false: the cloud's error must stay reachable")
		}
	})
}

func TestClassify(t *testing.T) {
	deadline, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-deadline.Done()
	canceled, cancel2 := context.WithCancel(context.Background())
	cancel2()

	tests := []struct {
		name string
		err  error
		want Result
	}{
		{name: "nil", err: nil, want: ResultSuccess},
		{name: "not found", err: NotFoundf("lb %q", "a"), want: ResultNotFound},
		{name: "wrapped not found", err: wrap(NotFoundf("lb %q", "a")), want: ResultNotFound},
		{name: "throttled", err: Throttled(time.Second, nil), want: ResultThrottled},
		{name: "wrapped sentinel throttled", err: wrap(ErrThrottled), want: ResultThrottled},
		{name: "not implemented", err: wrap(ErrNotImplemented), want: ResultNotImplemented},
		{name: "invalid", err: wrap(Invalidf("bad")), want: ResultInvalid},
		{name: "deadline", err: context.DeadlineExceeded, want: ResultTimeout},
		{name: "wrapped deadline", err: wrap(context.DeadlineExceeded), want: ResultTimeout},
		{name: "deadline from a context", err: wrap(deadline.Err()), want: ResultTimeout},
		{name: "canceled", err: wrap(canceled.Err()), want: ResultCanceled},
		{name: "other", err: errors.New("HTTP 500"), want: ResultError},
		{name: "wrapped other", err: wrap(errors.New("HTTP 503")), want: ResultError},
		// A throttled answer that also timed out is still a throttle: the Retry-After matters more.
		{name: "throttled wrapping a deadline", err: Throttled(time.Second, context.DeadlineExceeded), want: ResultThrottled},
		// A timeout must never be read as "gone".
		{name: "joined timeout and error", err: errors.Join(errors.New("x"), context.DeadlineExceeded), want: ResultTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

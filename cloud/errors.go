package cloud

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors a provider wraps (with %w) so that callers can test them with errors.Is.
var (
	// ErrNotFound means the cloud positively answered that the object does not exist.
	// It is the only error that lets a controller take destructive action.
	ErrNotFound = errors.New("not found in the cloud")

	// ErrNotImplemented means the provider does not implement the operation.
	ErrNotImplemented = errors.New("not implemented by the provider")

	// ErrThrottled means the cloud refused the call because of a rate limit. Providers
	// should return a *ThrottledError, which matches ErrThrottled and carries Retry-After.
	ErrThrottled = errors.New("throttled by the cloud")

	// ErrInvalid means the request can never succeed as it is: the Service or Node asks
	// for something the provider cannot do. Retrying helps only after the object changes.
	ErrInvalid = errors.New("invalid request for the provider")

	// ErrFenced is wrapped by the error of every call the manager's cloud call path
	// refused because the leader lease guarding the caller may have expired, and of a
	// call cut short because that happened while it ran. A provider never returns it.
	// It is not a cloud failure: the caller is no longer allowed to act for the cluster,
	// so a controller treats it as stopping, never as something to retry.
	ErrFenced = errors.New("cloud calls are fenced")
)

// NotFoundf returns an error wrapping ErrNotFound whose message, formatted as
// fmt.Sprintf does, names what is missing.
func NotFoundf(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrNotFound)
}

// Invalidf returns an error wrapping ErrInvalid, formatted as fmt.Sprintf does. The
// message should name the offending field or annotation and say what would be accepted.
func Invalidf(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrInvalid)
}

// ThrottledError reports that the cloud rate-limited a call. It matches ErrThrottled.
type ThrottledError struct {
	// RetryAfter is how long the cloud asked callers to wait; zero if it did not say.
	RetryAfter time.Duration
	// Err is the underlying error from the cloud, if any.
	Err error
}

// Error implements error.
func (e *ThrottledError) Error() string {
	msg := "throttled by the cloud"
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is reports whether target is ErrThrottled.
func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

// Unwrap returns the underlying error.
func (e *ThrottledError) Unwrap() error { return e.Err }

// Throttled returns a *ThrottledError with the given Retry-After.
func Throttled(retryAfter time.Duration, err error) error {
	return &ThrottledError{RetryAfter: retryAfter, Err: err}
}

// IsNotFound reports whether err positively says the object is gone.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsNotImplemented reports whether err says the provider does not implement the call.
func IsNotImplemented(err error) bool { return errors.Is(err, ErrNotImplemented) }

// IsThrottled reports whether err says the cloud rate-limited the call.
func IsThrottled(err error) bool { return errors.Is(err, ErrThrottled) }

// IsInvalid reports whether err says the request can never succeed as it is.
func IsInvalid(err error) bool { return errors.Is(err, ErrInvalid) }

// IsFenced reports whether err says the call was refused, or cut short, because the
// caller's leader lease may have expired.
func IsFenced(err error) bool { return errors.Is(err, ErrFenced) }

// RetryAfter returns the wait a throttled error asks for, and whether err carries one.
func RetryAfter(err error) (time.Duration, bool) {
	var t *ThrottledError
	if errors.As(err, &t) && t.RetryAfter > 0 {
		return t.RetryAfter, true
	}
	return 0, false
}

// Result classifies the outcome of a cloud call into a small, fixed set of values that
// is safe to use as a metric label.
type Result string

// The results Classify returns.
const (
	ResultSuccess        Result = "success"
	ResultNotFound       Result = "not_found"
	ResultThrottled      Result = "throttled"
	ResultNotImplemented Result = "not_implemented"
	ResultInvalid        Result = "invalid"
	ResultTimeout        Result = "timeout"
	ResultCanceled       Result = "canceled"
	ResultError          Result = "error"
)

// Classify returns the Result of a cloud call that returned err.
func Classify(err error) Result {
	switch {
	case err == nil:
		return ResultSuccess
	case IsNotFound(err):
		return ResultNotFound
	case IsThrottled(err):
		return ResultThrottled
	case IsNotImplemented(err):
		return ResultNotImplemented
	case IsInvalid(err):
		return ResultInvalid
	case errors.Is(err, context.DeadlineExceeded):
		return ResultTimeout
	case errors.Is(err, context.Canceled):
		return ResultCanceled
	default:
		return ResultError
	}
}

package upstream

import (
	"context"
	"errors"
	"fmt"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/cloud"
)

// Error is an upstream provider's error mapped to the provider contract. errors.Is
// matches both the contract's sentinel and the upstream error.
type Error struct {
	// Op names the upstream call, such as "InstanceMetadata".
	Op string
	// Subject is what the call was about: a node, a Service, a route.
	Subject string
	// Err is the upstream provider's error.
	Err error

	sentinel error
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("upstream cloud provider: %s %s: %v", e.Op, e.Subject, e.Err)
}

// Unwrap returns the contract's sentinel, when there is one, and the upstream error.
func (e *Error) Unwrap() []error {
	if e.sentinel == nil {
		return []error{e.Err}
	}
	return []error{e.sentinel, e.Err}
}

// area says which capability a call belongs to; InstanceNotFound means "gone" only
// for instance calls.
type area int

const (
	areaInstances area = iota
	areaLoadBalancers
	areaRoutes
)

// mapError maps an upstream error of call op about subject to the contract.
func mapError(a area, op, subject string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &Error{Op: op, Subject: subject, Err: err}
	}
	var retry *api.RetryError
	if errors.As(err, &retry) {
		return cloud.Throttled(retry.RetryAfter(), &Error{Op: op, Subject: subject, Err: err})
	}
	e := &Error{Op: op, Subject: subject, Err: err}
	switch {
	case errors.Is(err, cloudprovider.InstanceNotFound) && a == areaInstances:
		e.sentinel = cloud.ErrNotFound
	case errors.Is(err, cloudprovider.NotImplemented), errors.Is(err, cloudprovider.ImplementedElsewhere):
		e.sentinel = cloud.ErrNotImplemented
	}
	return e
}

// implementedElsewhere reports whether err is upstream's ImplementedElsewhere.
func implementedElsewhere(err error) bool { return errors.Is(err, cloudprovider.ImplementedElsewhere) }

// notImplemented reports whether err is upstream's NotImplemented.
func notImplemented(err error) bool { return errors.Is(err, cloudprovider.NotImplemented) }

// call runs fn, one upstream call, so that ctx is honored even when the provider ignores
// it: call returns ctx's error as soon as ctx ends, and fn goes on in the background
// until it returns, its result discarded. A panic in fn is returned as an error.
func call[T any](ctx context.Context, op string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	type outcome struct {
		v   T
		err error
	}
	run := func() (o outcome) {
		defer func() {
			if r := recover(); r != nil {
				o = outcome{err: fmt.Errorf("the upstream provider panicked in %s: %v", op, r)}
			}
		}()
		v, err := fn(ctx)
		return outcome{v, err}
	}
	if ctx.Done() == nil {
		o := run()
		return o.v, o.err
	}
	done := make(chan outcome, 1)
	go func() { done <- run() }()
	select {
	case o := <-done:
		return o.v, o.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nephele-dev/nephele/cloud"
)

// pollInterval is the pause between two reads while waiting for the cloud to converge.
const pollInterval = 100 * time.Millisecond

// checker is what one check records: its problems (any makes it fail) or why it was
// skipped.
type checker struct {
	ctx      context.Context
	s        *suite
	problems []string
	skipped  string
}

func (c *checker) errorf(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

func (c *checker) skipf(format string, args ...any) {
	c.skipped = fmt.Sprintf(format, args...)
}

func (c *checker) failed() bool { return len(c.problems) > 0 }

// fixture returns the test instance for key, or records why there is none (a skip
// without an InstanceFactory, a failure otherwise) and returns nil.
func (c *checker) fixture(key string) *fixture {
	f := c.s.fixture(c.ctx, key)
	switch {
	case errors.Is(f.err, errNoFactory):
		c.skipf("%v", f.err)
		return nil
	case f.err != nil:
		c.errorf("%v", f.err)
		return nil
	case f.meta == nil && c.s.instances != nil:
		c.errorf("instance %s has no metadata", f.nodeName)
		return nil
	}
	return f
}

// call runs fn within the call timeout.
func call[T any](c *checker, fn func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.CallTimeout)
	defer cancel()
	return within(ctx, c.s.cfg.CancelBound, fn)
}

// do runs fn, which returns only an error, within the call timeout.
func do(c *checker, fn func(context.Context) error) error {
	_, err := call(c, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
	return err
}

func (c *checker) metadata(node *corev1.Node) (*cloud.Instance, error) {
	inst, err := call(c, func(ctx context.Context) (*cloud.Instance, error) { return c.s.instances.InstanceMetadata(ctx, node) })
	if err == nil && inst == nil {
		return nil, errors.New("InstanceMetadata returned neither an instance nor an error")
	}
	return inst, err
}

func (c *checker) list() ([]cloud.Instance, error) {
	return call(c, c.s.lister.ListInstances)
}

// poll calls try until it reports done or the call timeout has passed, and records
// what try last said when it never did.
func (c *checker) poll(what string, try func() (done bool, last string)) bool {
	deadline := time.Now().Add(c.s.cfg.CallTimeout)
	for {
		done, last := try()
		if done {
			return true
		}
		if time.Now().After(deadline) || c.ctx.Err() != nil {
			c.errorf("%s: still not so after %s; last: %s", what, c.s.cfg.CallTimeout, last)
			return false
		}
		select {
		case <-c.ctx.Done():
		case <-time.After(pollInterval):
		}
	}
}

// describe says what an error is in the contract's terms, for messages.
func describe(err error) string {
	if err == nil {
		return "no error"
	}
	kind := "a temporary error"
	switch {
	case isHung(err):
		kind = "no answer"
	case cloud.IsNotFound(err):
		kind = "NotFound"
	case cloud.IsThrottled(err):
		kind = "Throttled"
	case cloud.IsNotImplemented(err):
		kind = "NotImplemented"
	case cloud.IsInvalid(err):
		kind = "Invalid"
	}
	return fmt.Sprintf("%s (%v)", kind, err)
}

package fakecloud

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nephele-dev/nephele/cloud"
)

// AnyOp programs a fault for every operation. A fault set for a specific operation
// (one of cloud.Operations()) takes precedence over one set for AnyOp.
const AnyOp cloud.Operation = "*"

// Hook is called on every operation, after any hang and latency and before injected
// errors and the operation itself. A non-nil error is returned to the caller as is and
// the operation does not happen. The subject is what the call is about:
//
//   - cloud.OpInstanceMetadata: the node's provider ID, or its name when it has none
//   - cloud.OpListInstances: empty
//   - load balancer operations: the spec's Name
//   - cloud.OpListRoutes: the cluster name
//   - cloud.OpCreateRoute, cloud.OpDeleteRoute: the route's target node
//
// A hook may block; it should return ctx.Err() when ctx ends.
type Hook func(ctx context.Context, op cloud.Operation, subject string) error

// ErrInjected is wrapped by the errors that Throttle makes up, so that tests can tell
// an injected failure from a real one.
var ErrInjected = errors.New("fault injected by the fake cloud")

type hangKey struct {
	op      cloud.Operation
	subject string
}

type failure struct {
	remaining int
	err       error
}

// faultState is the fault program. It is guarded by Cloud.mu.
type faultState struct {
	latency map[cloud.Operation]time.Duration
	errs    map[cloud.Operation]error
	next    map[cloud.Operation][]failure
	// hangs hold a channel per hang that Unhang closes, releasing the waiting calls.
	hangs map[hangKey]chan struct{}
	hook  Hook
}

func newFaultState() faultState {
	return faultState{
		latency: map[cloud.Operation]time.Duration{},
		errs:    map[cloud.Operation]error{},
		next:    map[cloud.Operation][]failure{},
		hangs:   map[hangKey]chan struct{}{},
	}
}

// SetLatency makes every call of op take at least d before anything else happens; a
// call whose context ends first returns ctx.Err(). d <= 0 removes the latency.
func (c *Cloud) SetLatency(op cloud.Operation, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d <= 0 {
		delete(c.faults.latency, op)
		return
	}
	c.faults.latency[op] = d
}

// SetError makes every call of op fail with err (wrapped with the operation and
// subject, so errors.Is and errors.As still match) until it is cleared with a nil err.
func (c *Cloud) SetError(op cloud.Operation, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		delete(c.faults.errs, op)
		return
	}
	c.faults.errs[op] = err
}

// FailNext makes the next n calls of op fail with err. Successive FailNext calls queue
// up: FailNext(op, 2, a) then FailNext(op, 1, b) fails two calls with a, then one with
// b. These failures come before an error set with SetError.
func (c *Cloud) FailNext(op cloud.Operation, n int, err error) {
	if n <= 0 || err == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults.next[op] = append(c.faults.next[op], failure{remaining: n, err: err})
}

// Throttle makes every call of op fail with a *cloud.ThrottledError carrying
// retryAfter, as SetError does; clear it with SetError(op, nil).
func (c *Cloud) Throttle(op cloud.Operation, retryAfter time.Duration) {
	c.SetError(op, cloud.Throttled(retryAfter, fmt.Errorf("rate limit exceeded: %w", ErrInjected)))
}

// ThrottleNext makes the next n calls of op fail with a *cloud.ThrottledError carrying
// retryAfter, as FailNext does.
func (c *Cloud) ThrottleNext(op cloud.Operation, n int, retryAfter time.Duration) {
	c.FailNext(op, n, cloud.Throttled(retryAfter, fmt.Errorf("rate limit exceeded: %w", ErrInjected)))
}

// Hang makes calls of op about subject block until their context ends, and return
// ctx.Err(). An empty subject hangs every call of op. Calls already hanging go on when
// Unhang or ClearFaults releases them.
func (c *Cloud) Hang(op cloud.Operation, subject string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := hangKey{op: op, subject: subject}
	if _, ok := c.faults.hangs[k]; !ok {
		c.faults.hangs[k] = make(chan struct{})
	}
}

// Unhang undoes Hang(op, subject) and lets the calls it holds go on.
func (c *Cloud) Unhang(op cloud.Operation, subject string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := hangKey{op: op, subject: subject}
	if ch, ok := c.faults.hangs[k]; ok {
		close(ch)
		delete(c.faults.hangs, k)
	}
}

// SetHook installs h to be called on every operation; nil removes it.
func (c *Cloud) SetHook(h Hook) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults.hook = h
}

// ClearFaults removes every latency, error, hang and the hook, and releases hanging
// calls. The cloud's state and call log stay.
func (c *Cloud) ClearFaults() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.faults.hangs {
		close(ch)
	}
	c.faults = newFaultState()
}

// lookup returns the value for op, falling back to AnyOp.
func lookup[V any](m map[cloud.Operation]V, op cloud.Operation) (V, bool) {
	if v, ok := m[op]; ok {
		return v, true
	}
	v, ok := m[AnyOp]
	return v, ok
}

// hangFor returns the channel a call of op about subject must wait on, or nil.
// Callers hold c.mu.
func (c *Cloud) hangFor(op cloud.Operation, subject string) chan struct{} {
	for _, k := range []hangKey{{op, subject}, {op, ""}, {AnyOp, subject}, {AnyOp, ""}} {
		if ch, ok := c.faults.hangs[k]; ok {
			return ch
		}
	}
	return nil
}

// takeFailure consumes one queued failure for op and returns its error, or the error
// set with SetError, or nil. Callers hold c.mu.
func (c *Cloud) takeFailure(op cloud.Operation) error {
	for _, o := range []cloud.Operation{op, AnyOp} {
		q := c.faults.next[o]
		if len(q) == 0 {
			continue
		}
		err := q[0].err
		if q[0].remaining--; q[0].remaining == 0 {
			q = q[1:]
		}
		if len(q) == 0 {
			delete(c.faults.next, o)
		} else {
			c.faults.next[o] = q
		}
		return err
	}
	err, _ := lookup(c.faults.errs, op)
	return err
}

// inject runs the fault program for one call: hang, latency, hook, then queued and
// standing errors. It returns the error the call must fail with, or nil to go on.
func (c *Cloud) inject(ctx context.Context, op cloud.Operation, subject string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// A hang is looked up again after each release, so that a call released by Unhang
	// of one key still honours another hang that matches it.
	for {
		c.mu.Lock()
		ch := c.hangFor(op, subject)
		c.mu.Unlock()
		if ch == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
	c.mu.Lock()
	latency, _ := lookup(c.faults.latency, op)
	hook := c.faults.hook
	c.mu.Unlock()
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	if hook != nil {
		if err := hook(ctx, op, subject); err != nil {
			return err
		}
	}
	c.mu.Lock()
	err := c.takeFailure(op)
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("fake cloud %s %q: %w", op, subject, err)
	}
	return nil
}

// do runs one logged call of op: the fault program, then fn unless a fault failed it.
func (c *Cloud) do(ctx context.Context, op cloud.Operation, subject string, fn func() error) error {
	start := time.Now()
	c.mu.Lock()
	c.calls.start(op)
	c.mu.Unlock()

	err := c.inject(ctx, op, subject)
	if err == nil {
		err = fn()
	}

	c.mu.Lock()
	c.calls.finish(Call{Op: op, Subject: subject, Start: start, Duration: time.Since(start), Err: err}, c.logLimit)
	c.mu.Unlock()
	return err
}

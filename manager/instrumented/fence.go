package instrumented

import (
	"context"
	"errors"
	"time"

	"github.com/nephele-dev/nephele/cloud"
)

// Fence decides whether calls may reach the cloud at all. The manager fences each
// controller's calls on the leader lease that guards the controller: once the lease may
// have expired, by this process's own clock, another replica may be leading, and a call
// from here could undo its work.
type Fence interface {
	// Open returns the time the fence closes unless something (a lease renewal) moves
	// it on, or an error wrapping cloud.ErrFenced when it is closed now. The time must
	// carry a monotonic clock reading (a time.Now derivative), so that a jump of the wall
	// clock neither opens nor closes the fence.
	Open() (closesAt time.Time, err error)
}

// ForFenced returns the provider controller uses, as For does, with every call gated
// by fence: a call is refused, before any wait and again just before it reaches the
// provider, while the fence is closed, and its context ends when the fence closes. A
// nil fence gates nothing.
func (c *Cloud) ForFenced(controller string, fence Fence) cloud.Provider {
	p := c.For(controller).(*provider)
	p.fence = fence
	return p
}

// checkFence returns the fence's closing time, or the refusal, counted, as the caller
// must see it. Without a fence it returns the zero time.
func (p *provider) checkFence(op string) (time.Time, error) {
	if p.fence == nil {
		return time.Time{}, nil
	}
	closesAt, err := p.fence.Open()
	if err != nil {
		p.c.metrics.fenced.WithLabelValues(p.controller, op).Inc()
		if !errors.Is(err, cloud.ErrFenced) {
			err = errors.Join(err, cloud.ErrFenced)
		}
		return time.Time{}, err
	}
	return closesAt, nil
}

// fencedContext bounds ctx by the fence's closing time; zero means no bound.
func fencedContext(ctx context.Context, closesAt time.Time) (context.Context, context.CancelFunc) {
	if closesAt.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, closesAt)
}

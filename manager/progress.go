package manager

import (
	"fmt"
	"sync"
	"time"
)

// Progress tracks whether a controller is making progress, for /readyz. A controller
// calls Progressed after each unit of work it finishes (successfully or not) and may
// report how much work is waiting with SetPending. A controller with waiting work that
// has finished nothing for the stall timeout is reported unhealthy, as is a controller
// whose Run has returned.
//
// A nil *Progress is valid and reports nothing, so a controller built outside a manager
// (in a test, say) needs no health tracking of its own.
type Progress struct {
	name  string
	stall time.Duration
	now   func() time.Time

	mu      sync.Mutex
	last    time.Time
	pending func() int
	started bool
	stopped bool
	stopErr error
}

// NewProgress returns a Progress for the named controller that reports a stall after
// stall without progress while work is pending.
func NewProgress(name string, stall time.Duration) *Progress {
	return &Progress{name: name, stall: stall, now: time.Now, last: time.Now()}
}

// Progressed records that the controller finished a unit of work.
func (p *Progress) Progressed() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.last = p.now()
	p.mu.Unlock()
}

// SetPending sets the function that reports how many units of work are waiting,
// typically a work queue's Len.
func (p *Progress) SetPending(f func() int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.pending = f
	p.mu.Unlock()
}

// Started marks the controller running; the manager calls it.
func (p *Progress) Started() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.started, p.last = true, p.now()
	p.mu.Unlock()
}

// Stopped marks the controller's Run as returned with err; the manager calls it.
func (p *Progress) Stopped(err error) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.stopped, p.stopErr = true, err
	p.mu.Unlock()
}

// Name returns the controller's name.
func (p *Progress) Name() string { return p.name }

// Check returns nil when the controller is healthy and an error saying why not.
func (p *Progress) Check() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.stopped && p.stopErr != nil:
		return fmt.Errorf("controller %s stopped: %v", p.name, p.stopErr)
	case p.stopped:
		return fmt.Errorf("controller %s stopped", p.name)
	case !p.started:
		return nil // not leader (yet) for this controller: nothing to judge
	}
	if p.pending == nil {
		return nil
	}
	n := p.pending()
	if idle := p.now().Sub(p.last); n > 0 && idle > p.stall {
		return fmt.Errorf("controller %s has %d items waiting and has finished none for %s", p.name, n, idle.Round(time.Second))
	}
	return nil
}

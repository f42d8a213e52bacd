package nodeinit

import (
	"sync"
	"time"
)

// pacer spaces out the inventory listings node initialization asks for. Nodes of a burst
// arrive one after another; without pacing each one that arrives after the last listing
// started would need a listing of its own, so a burst of N nodes could cost N listings.
// The pacer lets one listing be requested at once and the next only after gap; nodes that
// arrive in between either share a listing already requested after they were created or
// wait for the next one.
type pacer struct {
	gap time.Duration

	mu     sync.Mutex
	last   time.Time // when the last listing was requested; zero if never
	failed bool      // whether that listing failed
}

// schedule decides how a node created at created gets a listing that started after it. It
// returns the time the listing the caller must wait for was requested (the caller asks
// the inventory for a listing no older than that), or how long to wait before asking
// again.
func (p *pacer) schedule(now, created time.Time) (requested time.Time, wait time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.last.IsZero() && !p.failed && !p.last.Before(created) {
		return p.last, 0 // share the listing already requested
	}
	if !p.last.IsZero() {
		if d := p.last.Add(p.gap).Sub(now); d > 0 {
			return time.Time{}, d
		}
	}
	p.last, p.failed = now, false
	return now, 0
}

// fail records that the listing requested at requested failed, so that the next caller
// requests a new one (after the gap) instead of sharing the failure forever.
func (p *pacer) fail(requested time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last.Equal(requested) {
		p.failed = true
	}
}

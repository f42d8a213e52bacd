package controllers

import (
	"sync"
	"time"
)

// DefaultDegradedAfter is how long a transient error must last before Degraded is set:
// long enough to ride out an API server restart or a conflict storm, as OpenShift's
// operator does (two minutes for its sync controllers).
const DefaultDegradedAfter = 2 * time.Minute

// transientWindow remembers since when a controller has failed with transient errors.
type transientWindow struct {
	after time.Duration
	now   func() time.Time

	mu    sync.Mutex
	since time.Time
}

func newTransientWindow(after time.Duration, now func() time.Time) *transientWindow {
	if after <= 0 {
		after = DefaultDegradedAfter
	}
	if now == nil {
		now = time.Now
	}
	return &transientWindow{after: after, now: now}
}

// fail records a transient error and reports whether it has lasted long enough to be
// Degraded, and if not, how long until it is.
func (w *transientWindow) fail() (degraded bool, wait time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if w.since.IsZero() {
		w.since = now
	}
	elapsed := now.Sub(w.since)
	if elapsed >= w.after {
		return true, 0
	}
	return false, w.after - elapsed
}

// ok forgets the failures: the next transient error starts a new window.
func (w *transientWindow) ok() {
	w.mu.Lock()
	w.since = time.Time{}
	w.mu.Unlock()
}

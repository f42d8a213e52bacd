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
// Degraded, and when it will have if it goes on. That time does not change from one
// failure to the next, so a condition message naming it is written once: a message that
// counted down would change the status at every reconcile, and each status write
// queues the next reconcile at once, past the error's back-off.
func (w *transientWindow) fail() (degraded bool, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if w.since.IsZero() {
		w.since = now
	}
	at = w.since.Add(w.after)
	return !now.Before(at), at
}

// ok forgets the failures: the next transient error starts a new window.
func (w *transientWindow) ok() {
	w.mu.Lock()
	w.since = time.Time{}
	w.mu.Unlock()
}

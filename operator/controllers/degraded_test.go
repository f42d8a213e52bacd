package controllers

import (
	"testing"
	"time"
)

func TestTransientWindow(t *testing.T) {
	now := time.Unix(1000, 0)
	w := newTransientWindow(2*time.Minute, func() time.Time { return now })
	steps := []struct {
		advance  time.Duration
		ok       bool
		degraded bool
		wait     time.Duration
	}{
		{0, false, false, 2 * time.Minute},
		{90 * time.Second, false, false, 30 * time.Second},
		{30 * time.Second, false, true, 0},
		{time.Second, true, false, 0},
		{time.Second, false, false, 2 * time.Minute}, // a success starts a new window
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		if s.ok {
			w.ok()
			continue
		}
		degraded, at := w.fail()
		if wait := max(at.Sub(now), 0); degraded != s.degraded || wait != s.wait {
			t.Errorf("step %d: fail() = %t, %v from now; want %t, %v", i, degraded, wait, s.degraded, s.wait)
		}
	}
}

// TestTransientWindowDegradedAtIsStable checks the time fail names stays the same from
// one failure to the next, so a condition message naming it does not change the status
// at every reconcile, and starts anew after a success.
func TestTransientWindowDegradedAtIsStable(t *testing.T) {
	now := time.Unix(1000, 0)
	w := newTransientWindow(2*time.Minute, func() time.Time { return now })
	want := now.Add(2 * time.Minute)
	for i := range 3 {
		if _, at := w.fail(); !at.Equal(want) {
			t.Errorf("failure %d: degraded at %v, want %v", i, at, want)
		}
		now = now.Add(17 * time.Second)
	}
	w.ok()
	if _, at := w.fail(); !at.Equal(now.Add(2 * time.Minute)) {
		t.Errorf("after a success: degraded at %v, want %v", at, now.Add(2*time.Minute))
	}
}

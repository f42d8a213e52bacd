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
		degraded, wait := w.fail()
		if degraded != s.degraded || wait != s.wait {
			t.Errorf("step %d: fail() = %t, %v; want %t, %v", i, degraded, wait, s.degraded, s.wait)
		}
	}
}

// TestTransientWindowDegradedAtIsStable checks the time a condition message names stays
// the same from one failure to the next, so the message does not change the status at
// every reconcile, and starts anew after a success.
func TestTransientWindowDegradedAtIsStable(t *testing.T) {
	now := time.Unix(1000, 0)
	w := newTransientWindow(2*time.Minute, func() time.Time { return now })
	if at := w.degradedAt(); !at.IsZero() {
		t.Fatalf("degradedAt before a failure = %v, want zero", at)
	}
	want := now.Add(2 * time.Minute)
	for i := range 3 {
		w.fail()
		if at := w.degradedAt(); !at.Equal(want) {
			t.Errorf("failure %d: degradedAt = %v, want %v", i, at, want)
		}
		now = now.Add(17 * time.Second)
	}
	w.ok()
	w.fail()
	if at := w.degradedAt(); !at.Equal(now.Add(2 * time.Minute)) {
		t.Errorf("after a success: degradedAt = %v, want %v", at, now.Add(2*time.Minute))
	}
}

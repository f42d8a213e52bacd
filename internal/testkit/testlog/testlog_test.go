package testlog

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// recorder is a testing.TB that keeps what is logged and the cleanups registered.
type recorder struct {
	testing.TB
	lines    []string
	cleanups []func()
}

func (r *recorder) Log(args ...any)  { r.lines = append(r.lines, fmt.Sprint(args...)) }
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func TestWritesUntilTheCleanupsRun(t *testing.T) {
	r := &recorder{TB: t}
	log := New(r, 1)
	log.Info("shown")
	log.V(1).Info("shown at 1")
	log.V(2).Info("above the verbosity")
	log.Error(errors.New("boom"), "shown error")
	if len(r.cleanups) != 1 {
		t.Fatalf("New registered %d cleanups, want 1", len(r.cleanups))
	}
	r.cleanups[0]()
	log.Info("after the end")
	log.Error(errors.New("boom"), "after the end")

	if len(r.lines) != 3 {
		t.Fatalf("logged %d lines, want 3: %q", len(r.lines), r.lines)
	}
	for i, want := range []string{"shown", "shown at 1", "shown error"} {
		if !strings.Contains(r.lines[i], want) {
			t.Errorf("line %d = %q, want it to contain %q", i, r.lines[i], want)
		}
	}
}

// blocked is a testing.TB whose Log blocks until released, recording the order of
// events.
type blocked struct {
	testing.TB
	entered, release chan struct{}
	mu               sync.Mutex
	events           []string
	cleanups         []func()
}

func (b *blocked) Log(...any) {
	close(b.entered)
	<-b.release
	b.event("write returned")
}

func (b *blocked) Cleanup(f func()) { b.cleanups = append(b.cleanups, f) }

func (b *blocked) event(e string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = append(b.events, e)
}

// TestTheEndWaitsForAWriteUnderWay checks that the test's end waits for a write in
// progress: the testing package marks the test done right after its cleanups, and a
// write still in t.Log would race with it.
func TestTheEndWaitsForAWriteUnderWay(t *testing.T) {
	b := &blocked{TB: t, entered: make(chan struct{}), release: make(chan struct{})}
	log := New(b, 0)
	go log.Info("from a component's goroutine")
	<-b.entered
	ended := make(chan struct{})
	go func() {
		b.cleanups[0]()
		b.event("ended")
		close(ended)
	}()
	// Give the end every chance to overtake the write before releasing it.
	for range 100 {
		runtime.Gosched()
	}
	close(b.release)
	<-ended
	if want := []string{"write returned", "ended"}; !slices.Equal(b.events, want) {
		t.Errorf("events %q, want %q", b.events, want)
	}
}

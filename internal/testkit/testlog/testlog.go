package testlog

import (
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
)

// New returns a logger that writes to t's log up to verbosity (as testr's Options) until
// t's cleanups run, and drops everything after. Cleanups registered after New run
// first, so what a component logs while a later cleanup stops it is still shown.
func New(t testing.TB, verbosity int) logr.Logger {
	g := &guarded{t: t}
	t.Cleanup(g.end)
	return testr.NewWithInterface(g, testr.Options{Verbosity: verbosity})
}

// guarded is the testr.TestingT the logger writes to: t, until end.
type guarded struct {
	t     testing.TB
	mu    sync.RWMutex
	ended bool
}

// Helper marks nothing: testr's frames would be marked through this wrapper, not as
// themselves, so the reported line is the wrapper's either way.
func (g *guarded) Helper() {}

// Log writes to t's log unless the test has ended. The read lock is held across the
// write, so end cannot return, and the test cannot finish, while a write is under way.
func (g *guarded) Log(args ...any) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if !g.ended {
		g.t.Log(args...)
	}
}

// end stops the forwarding; it returns once no write is under way.
func (g *guarded) end() {
	g.mu.Lock()
	g.ended = true
	g.mu.Unlock()
}

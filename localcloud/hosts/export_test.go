package hosts

import (
	"context"
	"strings"
	"sync"
)

// Abandon makes the machine behave as if its process had been killed: it stops acting
// (no restarts, no changes) and releases the directory's lock, leaving everything it made
// in place for the next Open or Cleanup.
func (m *Machine) Abandon() {
	m.mu.Lock()
	m.closed = true
	for _, h := range m.hosts {
		if h.timer != nil {
			h.timer.Stop()
		}
	}
	m.mu.Unlock()
	close(m.stop)
	m.wg.Wait()
	_ = m.lock.Close()
}

// HoldCommands makes every command of the machine whose line contains match wait,
// before it runs, until release is called; entered receives each such line as it starts
// waiting. Call it before the machine is used concurrently.
func (m *Machine) HoldCommands(match string) (entered <-chan string, release func()) {
	in := make(chan string, 16)
	held := make(chan struct{})
	var once sync.Once
	next := m.exec
	m.exec = func(ctx context.Context, stdin string, name string, args ...string) (string, error) {
		if line := name + " " + strings.Join(args, " "); strings.Contains(line, match) {
			in <- line
			select {
			case <-held:
			case <-ctx.Done():
			}
		}
		return next(ctx, stdin, name, args...)
	}
	return in, func() { once.Do(func() { close(held) }) }
}

package hosts

import (
	"context"
	"strings"
	"sync"
)

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

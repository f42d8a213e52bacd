package testenv

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/controlplane"
)

// Shared is one control plane shared by the tests of a package: starting one costs
// seconds, so a package starts it once, on first use, and stops it after its last test.
//
//	var shared = testenv.Shared{Options: controlplane.Options{Kwok: true}}
//
//	func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		env := shared.Env(t)
//		...
//	}
type Shared struct {
	// Options are the components to start.
	Options controlplane.Options
	// Setup, when set, runs once after the control plane is up: more components,
	// namespaces, RBAC the package's tests all need.
	Setup func(ctx context.Context, env *controlplane.Env) error

	once sync.Once
	env  *controlplane.Env
	err  error
}

// Env returns the shared control plane, starting it on first use. When it cannot start,
// it fails t: integration tests never skip.
func (s *Shared) Env(t testing.TB) *controlplane.Env {
	t.Helper()
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s.env, s.err = controlplane.Start(ctx, s.Options)
		if s.err == nil && s.Setup != nil {
			if err := s.Setup(ctx, s.env); err != nil {
				s.err = fmt.Errorf("setting up the shared control plane: %w", err)
			}
		}
	})
	if s.err != nil {
		t.Fatalf("starting the control plane: %v", s.err)
	}
	return s.env
}

// Main runs the package's tests and stops the control plane, keeping its directory and
// logs when a test failed. It returns the exit code for os.Exit.
func (s *Shared) Main(m *testing.M) int {
	code := m.Run()
	if s.env == nil {
		return code
	}
	var err error
	if code != 0 {
		err = s.env.StopKeepingLogs()
		fmt.Fprintf(os.Stderr, "control plane logs kept in %s\n", s.env.Dir)
	} else {
		err = s.env.Stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
	return code
}

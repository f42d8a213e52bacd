package hosts_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/localcloud/hosts"
)

// TestSlowStartBlocksNoOtherHost: while a host's start waits in a command, the machine
// answers Status (of that host and of others), Routes and SetRoutes, and stops another
// host; the start then completes.
func TestSlowStartBlocksNoOtherHost(t *testing.T) {
	tn := newTestNet(t, 8)
	ctx := context.Background()
	m := tn.open(t)
	a, b := sleeper(tn, 2, "i-00000000000a", "a"), sleeper(tn, 3, "i-00000000000b", "b")
	if err := m.Start(ctx, a); err != nil {
		t.Fatal(err)
	}
	running(t, m, a.ID)

	entered, release := m.HoldCommands("netns add " + tn.cfg.Bridge + "-" + b.ID)
	defer release()
	started := make(chan error, 1)
	go func() { started <- m.Start(ctx, b) }()
	select {
	case <-entered:
	case err := <-started:
		t.Fatalf("host b started without its held command: %v", err)
	case <-time.After(poll.Timeout):
		t.Fatal("host b's start never reached its network namespace")
	}

	answered := make(chan error, 1)
	go func() {
		answered <- func() error {
			if st, ok := m.Status(b.ID); !ok || st.Phase != hosts.PhaseStopped {
				return fmt.Errorf("status of the host being built: %+v, %v", st, ok)
			}
			if st, ok := m.Status(a.ID); !ok || st.Phase != hosts.PhaseRunning {
				return fmt.Errorf("status of the running host: %+v, %v", st, ok)
			}
			_ = m.Routes()
			if err := m.SetRoutes(ctx, []hosts.Route{{Destination: tn.cfg.Guards[0], Via: a.Address}}); err != nil {
				return err
			}
			return m.Stop(ctx, a.ID)
		}()
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Status, SetRoutes or Stop of another host waited for a host's start")
	}
	release()
	if err := <-started; err != nil {
		t.Fatalf("starting host b: %v", err)
	}
	running(t, m, b.ID)
}

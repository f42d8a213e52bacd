package route

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

func TestCIDRLocks(t *testing.T) {
	var l cidrLocks
	x, y := mustPrefix("10.244.1.0/24"), mustPrefix("10.244.2.0/24")

	unlockX, err := l.lock(t.Context(), x)
	if err != nil {
		t.Fatal(err)
	}
	// Another CIDR is independent.
	unlockY, err := l.lock(t.Context(), y)
	if err != nil {
		t.Fatal(err)
	}
	unlockY()

	// The same CIDR waits; a waiter whose context ends gives up.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.lock(ctx, x); err == nil {
		t.Fatal("second lock of a held CIDR succeeded")
	}

	got := make(chan struct{})
	go func() {
		unlock, err := l.lock(t.Context(), x)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		close(got)
		unlock()
	}()
	select {
	case <-got:
		t.Fatal("a waiter got a held lock")
	case <-time.After(20 * time.Millisecond):
	}
	unlockX()
	<-got

	// Entries go once nobody holds or waits for them.
	poll.Within(t, 5*time.Second, "the lock entries to go", func() error {
		if n := l.len(); n != 0 {
			return fmt.Errorf("%d lock entries left", n)
		}
		return nil
	})
}

func TestCIDRLocksMutualExclusion(t *testing.T) {
	var l cidrLocks
	x := mustPrefix("10.244.1.0/24")
	var mu sync.Mutex
	inside, maxInside := 0, 0
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for range 50 {
				unlock, err := l.lock(context.Background(), x)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				inside++
				maxInside = max(maxInside, inside)
				mu.Unlock()
				mu.Lock()
				inside--
				mu.Unlock()
				unlock()
			}
		})
	}
	wg.Wait()
	if maxInside != 1 {
		t.Errorf("%d holders at once, want 1", maxInside)
	}
	if l.len() != 0 {
		t.Errorf("%d lock entries left, want 0", l.len())
	}
}

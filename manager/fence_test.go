package manager

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

var fenceStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// testFence is a fence on a 6s lease (so open for 5.4s after a renewal) held by "me".
func testFence() (*leaseFence, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(fenceStart)
	return newLeaseFence(LeaseConfig{Namespace: "kube-system", Name: "ccm", Identity: "me", LeaseDuration: 6 * time.Second}, clk), clk
}

func mine() resourcelock.LeaderElectionRecord {
	return resourcelock.LeaderElectionRecord{HolderIdentity: "me"}
}

func isClosed(f *leaseFence) bool {
	select {
	case <-f.Closed():
		return true
	default:
		return false
	}
}

func TestLeaseFence(t *testing.T) {
	const open = 5400 * time.Millisecond // 6s less 10%
	tests := []struct {
		name string
		// steps act on the fence and clock; the fence is then checked at the clock's time.
		steps      func(f *leaseFence, clk *clocktesting.FakeClock)
		wantOpen   bool
		wantCloses time.Duration // after fenceStart, when open
		wantLatch  bool          // Closed() fired
	}{
		{
			name:  "never acquired",
			steps: func(*leaseFence, *clocktesting.FakeClock) {},
		},
		{
			name:       "just acquired",
			steps:      func(f *leaseFence, clk *clocktesting.FakeClock) { f.record(mine(), clk.Now(), nil) },
			wantOpen:   true,
			wantCloses: open,
		},
		{
			name: "open until the margin before the lease duration",
			steps: func(f *leaseFence, clk *clocktesting.FakeClock) {
				f.record(mine(), clk.Now(), nil)
				clk.Step(open - time.Millisecond)
			},
			wantOpen:   true,
			wantCloses: open,
		},
		{
			name: "closed at the margin before the lease duration",
			steps: func(f *leaseFence, clk *clocktesting.FakeClock) {
				f.record(mine(), clk.Now(), nil)
				clk.Step(open)
			},
			wantLatch: true,
		},
		{
			name: "counted from when the renewal was sent, not when it returned",
			steps: func(f *leaseFence, clk *clocktesting.FakeClock) {
				sent := clk.Now()
				clk.Step(2 * time.Second) // a slow apiserver
				f.record(mine(), sent, nil)
				clk.Step(open - 2*time.Second)
			},
			wantLatch: true,
		},
		{
			name: "a renewal moves it on",
			steps: func(f *leaseFence, clk *clocktesting.FakeClock) {
				f.record(mine(), clk.Now(), nil)
				clk.Step(3 * time.Second)
				f.record(mine(), clk.Now(), nil)
				clk.Step(5 * time.Second)
			},
			wantOpen:   true,
			wantCloses: 3*time.Second + open,
		},
		{
			name: "a failed renewal does not",
			steps: func(f *leaseFence, clk *clocktesting.FakeClock) {
				f.record(mine(), clk.Now(), nil)
				clk.Step(3 * time.Second)
				f.record(mine(), clk.Now(), errors.New("conflict"))
				clk.Step(3 * time.Second)
			},
			wantLatch: true,
		},
		{
			name: "an older renewal answered late does not move it back",
			steps: func(f *leaseFence, clk *clocktesting.FakeClock) {
				early := clk.Now()
				clk.Step(time.Second)
				f.record(mine(), clk.Now(), nil)
				f.record(mine(), early, nil)
			},
			wantOpen:   true,
			wantCloses: time.Second + open,
		},
		{
			name: "releasing the lease closes it",
			steps: func(f *leaseFence, clk *clocktesting.FakeClock) {
				f.record(mine(), clk.Now(), nil)
				f.record(resourcelock.LeaderElectionRecord{}, clk.Now(), nil)
			},
			wantLatch: true,
		},
		{
			name: "once closed, a renewal does not reopen it",
			steps: func(f *leaseFence, clk *clocktesting.FakeClock) {
				f.record(mine(), clk.Now(), nil)
				clk.Step(10 * time.Second) // paused past the lease
				if _, err := f.Open(); err == nil {
					panic("open after the pause")
				}
				f.record(mine(), clk.Now(), nil) // nobody took over after all
			},
			wantLatch: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, clk := testFence()
			tt.steps(f, clk)
			closesAt, err := f.Open()
			if tt.wantOpen {
				if err != nil {
					t.Fatalf("Open: %v, want open", err)
				}
				if want := fenceStart.Add(tt.wantCloses); !closesAt.Equal(want) {
					t.Errorf("closes at +%s, want +%s", closesAt.Sub(fenceStart), tt.wantCloses)
				}
			} else if !errors.Is(err, cloud.ErrFenced) {
				t.Fatalf("Open = %v, %v; want an error wrapping ErrFenced", closesAt, err)
			}
			if got := isClosed(f); got != tt.wantLatch {
				t.Errorf("Closed() fired = %v, want %v", got, tt.wantLatch)
			}
		})
	}
}

func TestLeaseFenceWatchClosesWithoutCalls(t *testing.T) {
	f, clk := testFence()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); f.watch(ctx) }()

	f.record(mine(), clk.Now(), nil)
	waitTimer := func() {
		poll.Eventually(t, "the watcher to wait for the fence's closing time", func() error {
			if !clk.HasWaiters() {
				return errors.New("no timer yet")
			}
			return nil
		})
	}
	waitTimer()
	// A renewal 3s in pushes the closing time to 8.4s.
	clk.Step(3 * time.Second)
	f.record(mine(), clk.Now(), nil)
	poll.Eventually(t, "the watcher to take the renewal", func() error {
		if len(f.renewed) != 0 || !clk.HasWaiters() {
			return errors.New("renewal not taken yet")
		}
		return nil
	})
	clk.Step(3 * time.Second) // 6s: past the first closing time, before the second
	if isClosed(f) {
		t.Fatal("the fence closed at its first closing time although a renewal moved it on")
	}
	waitTimer()
	clk.Step(3 * time.Second) // 9s
	select {
	case <-f.Closed():
	case <-time.After(10 * time.Second):
		t.Fatal("the fence did not close at its closing time")
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not return once the fence closed")
	}
}

func TestLeaseFenceWatchStopsWithTheContext(t *testing.T) {
	f, _ := testFence()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.watch(ctx) }()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not return when its context ended")
	}
	if isClosed(f) {
		t.Error("ending the watch closed the fence")
	}
}

// slowLock is a lease lock whose writes take a second of the fake clock.
type slowLock struct {
	resourcelock.Interface
	clk *clocktesting.FakeClock
	err error
	// holder is who Get says holds the lease; updates counts Update calls.
	holder  string
	updates int
}

func (l *slowLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return &resourcelock.LeaderElectionRecord{HolderIdentity: l.holder}, nil, nil
}

func (l *slowLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	l.clk.Step(time.Second)
	return l.err
}

func (l *slowLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	l.updates++
	l.clk.Step(time.Second)
	return l.err
}

func TestFencedLockRecordsWhenWritesWereSent(t *testing.T) {
	for _, write := range []string{"create", "update"} {
		t.Run(write, func(t *testing.T) {
			f, clk := testFence()
			inner := &slowLock{clk: clk}
			lock := f.lock(inner)
			do := lock.Update
			if write == "create" {
				do = lock.Create
			}
			if err := do(context.Background(), mine()); err != nil {
				t.Fatal(err)
			}
			closesAt, err := f.Open()
			if err != nil {
				t.Fatalf("Open after a successful %s: %v", write, err)
			}
			if want := fenceStart.Add(5400 * time.Millisecond); !closesAt.Equal(want) {
				t.Errorf("closes at +%s, want +5.4s: counted from when the %s was sent", closesAt.Sub(fenceStart), write)
			}
			inner.err = errors.New("conflict")
			clk.Step(time.Second)
			if err := do(context.Background(), mine()); err == nil {
				t.Fatal("the lock hid the inner error")
			}
			if again, _ := f.Open(); !again.Equal(closesAt) {
				t.Errorf("a failed %s moved the fence to +%s", write, again.Sub(fenceStart))
			}
		})
	}
}

// A leader that was paused or cut off releases its lease on the way out; client-go reads
// the lease first but trusts its own stale record: the release must not clear the lease
// of the replica that took over meanwhile.
func TestFencedLockReleasesOnlyItsOwnLease(t *testing.T) {
	for _, tc := range []struct {
		holder      string
		wantRelease bool
	}{{holder: "me", wantRelease: true}, {holder: "other", wantRelease: false}} {
		t.Run("held by "+tc.holder, func(t *testing.T) {
			f, clk := testFence()
			inner := &slowLock{clk: clk, holder: tc.holder}
			lock := f.lock(inner)
			if _, _, err := lock.Get(context.Background()); err != nil {
				t.Fatal(err)
			}
			err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{})
			if released := err == nil; released != tc.wantRelease {
				t.Errorf("release of a lease held by %q: err %v, want released %v", tc.holder, err, tc.wantRelease)
			}
			if !tc.wantRelease && inner.updates != 0 {
				t.Errorf("the release reached the lease %d times", inner.updates)
			}
		})
	}
}

// TestFencedLockReleasesALeaseItCreated covers a replica that read another's record,
// then created the lease (the other's was deleted) and stops before it reads again: the
// release is of its own lease and goes through.
func TestFencedLockReleasesALeaseItCreated(t *testing.T) {
	f, clk := testFence()
	inner := &slowLock{clk: clk, holder: "other"}
	lock := f.lock(inner)
	if _, _, err := lock.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := lock.Create(context.Background(), mine()); err != nil {
		t.Fatal(err)
	}
	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{}); err != nil {
		t.Errorf("release of the lease this replica created: %v", err)
	}
}

func TestAllOfFences(t *testing.T) {
	a, clk := testFence()
	b := newLeaseFence(LeaseConfig{Namespace: "kube-system", Name: "migration", Identity: "me", LeaseDuration: 10 * time.Second}, clk)
	both := allOf{a, b}
	a.record(mine(), clk.Now(), nil)
	if _, err := both.Open(); !errors.Is(err, cloud.ErrFenced) {
		t.Fatalf("Open with one fence never opened: %v, want ErrFenced", err)
	}
	b.record(mine(), clk.Now(), nil)
	closesAt, err := both.Open()
	if err != nil || !closesAt.Equal(fenceStart.Add(5400*time.Millisecond)) {
		t.Fatalf("Open = +%s, %v; want the earlier closing time, +5.4s", closesAt.Sub(fenceStart), err)
	}
	clk.Step(6 * time.Second)
	b.record(mine(), clk.Now(), nil)
	if _, err := both.Open(); !errors.Is(err, cloud.ErrFenced) {
		t.Fatalf("Open with the main fence closed: %v, want ErrFenced", err)
	}
}

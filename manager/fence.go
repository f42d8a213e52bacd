package manager

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/manager/instrumented"
)

// FenceMarginFactor is the share of the lease duration by which a leader's fence closes
// before the lease can expire in another replica's eyes: 1.5s of upstream's 15s lease.
//
// A replica may take a lease over once it has seen no renewal for a lease duration by
// its own clock, counted from when it saw the renewal, which is after the leader sent
// it. So while the leader's own clock shows less than a lease duration since it sent its
// last successful renewal, no other replica can be leading, provided the two clocks run
// at the same rate. The margin is what that proviso costs: it tolerates the replicas'
// clocks running up to 10% apart over one lease (NTP keeps real clocks within 0.05%),
// and covers the time a request takes from the fence check to the cloud, since the
// call's context also ends when the fence closes.
const FenceMarginFactor = 0.1

// leaseFence keeps cloud calls inside this process's term as the lease's holder. The
// lock it wraps records, on each successful acquire or renewal, the monotonic time the
// request was sent; the fence is open until a lease duration less the margin after it.
// Once it has closed it stays closed: the term is over, and the manager stops the work
// the lease guards and exits, to come back as a follower with fresh caches.
//
// The clock is the process's monotonic clock (CLOCK_MONOTONIC on Linux), which keeps
// running while the process is stopped (SIGSTOP, a long pause of the Go runtime, a
// frozen cgroup) or its VM is paused by a hypervisor that advances the guest's clock,
// and does not follow wall clock steps. It does not run while the whole machine is
// suspended to RAM; neither does client-go's leader election's.
type leaseFence struct {
	lease    string
	identity string
	// open is how long after a renewal was sent the fence stays open.
	open  time.Duration
	clock clock.Clock

	mu sync.Mutex
	// sent is when the last successful acquire or renewal was sent; zero before one.
	sent time.Time
	// closed is set once the fence has closed after being open.
	closed bool
	// done is closed with closed.
	done chan struct{}
	// renewed is signalled on each renewal (without blocking), for watch.
	renewed chan struct{}
}

func newLeaseFence(lc LeaseConfig, clk clock.Clock) *leaseFence {
	margin := time.Duration(float64(lc.LeaseDuration) * FenceMarginFactor)
	return &leaseFence{
		lease:    lc.String(),
		identity: lc.Identity,
		open:     lc.LeaseDuration - margin,
		clock:    clk,
		done:     make(chan struct{}),
		renewed:  make(chan struct{}, 1),
	}
}

// Open implements instrumented.Fence.
func (f *leaseFence) Open() (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sent.IsZero() {
		return time.Time{}, fmt.Errorf("lease %s is not held by this instance: %w", f.lease, cloud.ErrFenced)
	}
	closesAt := f.sent.Add(f.open)
	since := f.clock.Since(f.sent)
	if f.closed || since >= f.open {
		f.closeLocked()
		return time.Time{}, fmt.Errorf("lease %s may have expired: its last renewal was sent %s ago, and the fence closes %s after one: %w",
			f.lease, since.Round(time.Millisecond), f.open, cloud.ErrFenced)
	}
	return closesAt, nil
}

// Closed returns a channel closed once the fence has closed for good.
func (f *leaseFence) Closed() <-chan struct{} { return f.done }

func (f *leaseFence) closeLocked() {
	if !f.closed {
		f.closed = true
		close(f.done)
	}
}

// record takes note of a write to the lease sent at sent that returned err: a renewal
// or acquisition by this instance moves the fence on, a successful write naming
// another holder (a release) closes it.
func (f *leaseFence) record(rec resourcelock.LeaderElectionRecord, sent time.Time, err error) {
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if rec.HolderIdentity != f.identity {
		if !f.sent.IsZero() {
			f.closeLocked()
		}
		return
	}
	if f.closed || !sent.After(f.sent) {
		return
	}
	f.sent = sent
	select {
	case f.renewed <- struct{}{}:
	default:
	}
}

// watch returns once the fence has closed (closing it when its time has come, so that
// Closed fires even when no call asks), or when ctx is done.
func (f *leaseFence) watch(ctx context.Context) {
	for {
		f.mu.Lock()
		held := !f.sent.IsZero()
		f.mu.Unlock()
		if !held {
			// Not acquired yet: nothing can expire before the first renewal.
			select {
			case <-ctx.Done():
				return
			case <-f.renewed:
				continue
			}
		}
		closesAt, err := f.Open()
		if err != nil {
			return // closed, now for good
		}
		t := f.clock.NewTimer(closesAt.Sub(f.clock.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-f.renewed:
			t.Stop()
		case <-t.C():
		}
	}
}

// lock returns l with every write recorded by the fence.
func (f *leaseFence) lock(l resourcelock.Interface) resourcelock.Interface {
	return &fencedLock{Interface: l, fence: f}
}

// fencedLock is a lease lock whose writes the fence sees, with the time each was sent.
//
// It also refuses a release (a write with no holder) unless the record read just before
// it names this instance. client-go's release reads the lease to refresh its resource
// version, but decides that it still leads from the record it saw last, which for a
// leader that was paused or cut off from the apiserver is its own, stale one: it would
// clear the lease of the replica that took over, and let a third one in beside it.
type fencedLock struct {
	resourcelock.Interface
	fence *leaseFence

	mu sync.Mutex
	// holder is the holder named by the last record read or written; read is false
	// before one.
	holder string
	read   bool
}

// saw notes the holder of a record the apiserver just returned or took.
func (l *fencedLock) saw(holder string) {
	l.mu.Lock()
	l.holder, l.read = holder, true
	l.mu.Unlock()
}

func (l *fencedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil && rec != nil {
		l.saw(rec.HolderIdentity)
	}
	return rec, raw, err
}

// Create and Update note the holder they wrote: a replica that created the lease after
// reading another's record, and stops before its next read, still releases its own.
func (l *fencedLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	sent := l.fence.clock.Now()
	err := l.Interface.Create(ctx, rec)
	l.fence.record(rec, sent, err)
	if err == nil {
		l.saw(rec.HolderIdentity)
	}
	return err
}

func (l *fencedLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if rec.HolderIdentity == "" {
		l.mu.Lock()
		holder, read := l.holder, l.read
		l.mu.Unlock()
		if read && holder != l.fence.identity {
			// The resource version read with that record makes the write fail should
			// the lease change again; this keeps it from clearing another's lease.
			return fmt.Errorf("not releasing lease %s: it is held by %q now, not by %s", l.fence.lease, holder, l.fence.identity)
		}
	}
	sent := l.fence.clock.Now()
	err := l.Interface.Update(ctx, rec)
	l.fence.record(rec, sent, err)
	if err == nil {
		l.saw(rec.HolderIdentity)
	}
	return err
}

// allOf is open while every fence in it is, and closes with the first to close.
type allOf []instrumented.Fence

func (fs allOf) Open() (time.Time, error) {
	var first time.Time
	for _, f := range fs {
		closesAt, err := f.Open()
		if err != nil {
			return time.Time{}, err
		}
		if first.IsZero() || closesAt.Before(first) {
			first = closesAt
		}
	}
	return first, nil
}

package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrLeaseLost is returned when the manager stops renewing a lease it held. The process
// should exit so that it restarts as a follower: carrying on risks two leaders.
var ErrLeaseLost = errors.New("leader lease lost")

// LeaseConfig names a coordination.k8s.io Lease and the election timings on it.
type LeaseConfig struct {
	Namespace     string
	Name          string
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

func (c LeaseConfig) String() string { return c.Namespace + "/" + c.Name }

// withLease campaigns for the lease and runs fn while it is held. It returns nil when ctx
// is done before or after leading (having stopped fn and released the lease), the error
// of fn if fn fails, and ErrLeaseLost when renewal fails or the fence closes. The lease
// is released only after fn has returned, so a successor never overlaps with work still
// in flight.
//
// fence, when not nil, sees every write to the lease; fn's cloud calls are gated on it
// (see leaseFence), and when it closes, fn is stopped as when renewal fails.
func withLease(ctx context.Context, log logr.Logger, client kubernetes.Interface, lc LeaseConfig, fence *leaseFence,
	watchdog *leaderelection.HealthzAdaptor, onState func(leading bool), fn func(ctx context.Context) error) error {
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, lc.Namespace, lc.Name,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: lc.Identity})
	if err != nil {
		return fmt.Errorf("lease %s: %w", lc, err)
	}
	var fenceClosed <-chan struct{} // nil, never ready, without a fence
	if fence != nil {
		lock = fence.lock(lock)
		fenceClosed = fence.Closed()
	}
	elected := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            lc.Name,
		LeaseDuration:   lc.LeaseDuration,
		RenewDeadline:   lc.RenewDeadline,
		RetryPeriod:     lc.RetryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(elected) },
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				if id != lc.Identity {
					log.Info("Lease held by another instance", "lease", lc.String(), "holder", id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("lease %s: %w", lc, err)
	}
	if watchdog != nil {
		watchdog.SetLeaderElection(le)
	}

	// The elector gets its own context so that cancelling ctx stops the work first and
	// releases the lease only afterwards.
	electCtx, cancelElect := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelElect()
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		le.Run(electCtx)
	}()

	log.Info("Waiting for lease", "lease", lc.String(), "identity", lc.Identity)
	select {
	case <-ctx.Done():
		cancelElect()
		<-electorDone
		return nil
	case <-electorDone:
		return fmt.Errorf("lease %s: leader election stopped before acquiring", lc)
	case <-elected:
	}
	log.Info("Acquired lease", "lease", lc.String())
	if onState != nil {
		onState(true)
		defer onState(false)
	}

	workCtx, cancelWork := context.WithCancel(ctx)
	defer cancelWork()
	if fence != nil {
		go fence.watch(workCtx)
	}
	workErr := make(chan error, 1)
	go func() { workErr <- fn(workCtx) }()

	var result error
	select {
	case err := <-workErr:
		result = err
	case <-electorDone:
		log.Error(ErrLeaseLost, "Stopping the work it guards", "lease", lc.String())
		cancelWork()
		<-workErr
		return fmt.Errorf("lease %s: %w", lc, ErrLeaseLost)
	case <-fenceClosed:
		// By this process's clock the lease may have expired (the process was paused,
		// or renewals failed for longer than the renew deadline allows): another replica
		// may be leading. Cloud calls are refused already; stop the work, then release
		// the lease should it still be ours.
		_, why := fence.Open()
		log.Error(ErrLeaseLost, "Stopping the work it guards: cloud calls are fenced", "lease", lc.String(), "reason", why.Error())
		cancelWork()
		<-workErr
		cancelElect()
		<-electorDone
		return fmt.Errorf("lease %s: %w: %w", lc, ErrLeaseLost, why)
	case <-ctx.Done():
		cancelWork()
		result = <-workErr
	}
	cancelElect()
	<-electorDone
	log.Info("Released lease", "lease", lc.String())
	return result
}

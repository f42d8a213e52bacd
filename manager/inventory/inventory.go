package inventory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nephele-dev/nephele/cloud"
)

// Inventory is the shared instance view. Create it with New and run Run in a goroutine
// the owner stops by cancelling its context; Sync and Lookup are safe for concurrent use.
type Inventory struct {
	lister cloud.InstanceLister
	now    func() time.Time
	kick   chan struct{}

	mu       sync.Mutex
	snap     *snapshot
	attempt  attempt       // the last completed listing attempt
	finished chan struct{} // closed and replaced after every attempt
	// requested is set by the Sync that sends on kick and cleared when Run takes the kick,
	// so at most one kick is ever pending. running is when the listing in progress
	// started, zero between listings. Together they let a Sync wait for a listing that
	// will do instead of asking for one more.
	requested bool
	running   time.Time
}

type snapshot struct {
	started time.Time
	byID    map[string]cloud.Instance
	byName  map[string]cloud.Instance
}

type attempt struct {
	started time.Time
	err     error
}

// New returns an inventory fed by lister.
func New(lister cloud.InstanceLister) *Inventory {
	return &Inventory{
		lister:   lister,
		now:      time.Now,
		kick:     make(chan struct{}, 1),
		finished: make(chan struct{}),
	}
}

// Run performs listings when asked until ctx is done.
func (inv *Inventory) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-inv.kick:
		}
		inv.list(ctx)
	}
}

func (inv *Inventory) list(ctx context.Context) {
	inv.mu.Lock()
	started := inv.now()
	inv.requested = false
	inv.running = started
	inv.mu.Unlock()

	insts, err := inv.lister.ListInstances(ctx)
	var snap *snapshot
	if err == nil {
		snap, err = index(insts, started)
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.running = time.Time{}
	if err != nil {
		err = fmt.Errorf("listing cloud instances: %w", err)
	} else {
		inv.snap = snap
	}
	inv.attempt = attempt{started: started, err: err}
	close(inv.finished)
	inv.finished = make(chan struct{})
}

// index builds the lookup maps. Two instances claiming one provider ID or node name
// make the answer ambiguous, so the listing is refused rather than guessed at.
func index(insts []cloud.Instance, started time.Time) (*snapshot, error) {
	s := &snapshot{
		started: started,
		byID:    make(map[string]cloud.Instance, len(insts)),
		byName:  make(map[string]cloud.Instance, len(insts)),
	}
	for _, in := range insts {
		if in.ProviderID == "" {
			return nil, fmt.Errorf("the cloud listed an instance (node name %q) without a provider ID", in.NodeName)
		}
		if _, dup := s.byID[in.ProviderID]; dup {
			return nil, fmt.Errorf("the cloud listed provider ID %q twice", in.ProviderID)
		}
		s.byID[in.ProviderID] = in
		if in.NodeName == "" {
			continue
		}
		if _, dup := s.byName[in.NodeName]; dup {
			return nil, fmt.Errorf("the cloud listed two instances for node name %q", in.NodeName)
		}
		s.byName[in.NodeName] = in
	}
	return s, nil
}

// Lookup returns the instance with providerID, or with nodeName when providerID is
// empty, from the last successful listing.
func (inv *Inventory) Lookup(providerID, nodeName string) (cloud.Instance, bool) {
	inv.mu.Lock()
	s := inv.snap
	inv.mu.Unlock()
	if s == nil {
		return cloud.Instance{}, false
	}
	var in cloud.Instance
	var ok bool
	if providerID != "" {
		in, ok = s.byID[providerID]
	} else {
		in, ok = s.byName[nodeName]
	}
	return in, ok
}

// Sync returns once a listing that started no more than maxAge before the call has
// completed, and returns that listing's error. Callers that arrive while a listing is
// running share it if it is recent enough, or the next one if not: however many callers
// arrive during one listing, they cause at most one more.
func (inv *Inventory) Sync(ctx context.Context, maxAge time.Duration) error {
	oldest := inv.now().Add(-maxAge)
	for {
		inv.mu.Lock()
		if inv.snap != nil && !inv.snap.started.Before(oldest) {
			inv.mu.Unlock()
			return nil
		}
		if a := inv.attempt; a.err != nil && !a.started.Before(oldest) {
			inv.mu.Unlock()
			return a.err
		}
		// A listing asked for and not started yet will start after oldest, and so may the
		// one running; asking again would only add a listing nobody needs.
		ask := !inv.requested && (inv.running.IsZero() || inv.running.Before(oldest))
		if ask {
			inv.requested = true
		}
		finished := inv.finished
		inv.mu.Unlock()

		if ask {
			select {
			case inv.kick <- struct{}{}:
			default: // cannot happen: only the Sync that set requested sends
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-finished:
		}
	}
}

// LastSync returns when the last successful listing started.
func (inv *Inventory) LastSync() time.Time {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.snap == nil {
		return time.Time{}
	}
	return inv.snap.started
}

package route

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/nephele-dev/nephele/cloud"
)

// soloFor is how long a change that failed alone after its call was split goes out by
// itself: each retry would otherwise make every call it joins invalid, and split again.
const soloFor = time.Minute

// maxSolo is how many solo destinations are kept before the expired ones are swept.
const maxSolo = 1024

// maxBatchWorkers bounds the node syncs in flight when the provider batches: each one
// waiting for a call is a goroutine parked on a channel, and more of them than a call
// takes would only wait for the call after.
const maxBatchWorkers = 1000

// batcher groups the route changes that node syncs make at the same moment into
// cloud.RouteBatcher calls, one call in flight at a time (a route table is one object in
// the clouds that batch, and writes to it conflict): a change that arrives while a call
// runs waits for it, and the next call takes every change waiting then, up to the
// provider's bound. A burst of N new nodes so costs about N/bound calls, and a lone
// change waits for no timer.
type batcher struct {
	routes batchingRoutes
	// max is the provider's bound on the changes of one call, read once: it is the
	// cloud's, and the node syncs in flight were sized by it.
	max int
	// cluster scopes the calls.
	cluster string

	// wake has room for one signal: a change was queued.
	wake    chan struct{}
	mu      sync.Mutex
	pending []*pendingChange
	// taken counts the changes taken from pending whose calls have not answered.
	taken int
	// solo holds, until when, the destinations whose change failed alone after a split:
	// their changes skip the batch meanwhile.
	solo map[netip.Prefix]time.Time
	// unbatched is set once the provider answered that it does not implement the
	// batch (an older cloud): every change then goes out by itself.
	unbatched bool
}

// batchingRoutes are Routes that batch: the route calls of a change made by itself, and
// the batch call.
type batchingRoutes interface {
	cloud.Routes
	cloud.RouteBatcher
}

// pendingChange is one change waiting for its call.
type pendingChange struct {
	change cloud.RouteChange
	// done receives the change's outcome once; it has room for it, so the loop never
	// waits for a sync that gave up.
	done chan error
}

func newBatcher(routes batchingRoutes, cluster string) *batcher {
	return &batcher{routes: routes, max: max(1, routes.MaxRouteChanges()), cluster: cluster,
		wake: make(chan struct{}, 1), solo: map[netip.Prefix]time.Time{}}
}

// alone reports whether ch goes out by itself rather than in a batch.
func (b *batcher) alone(ch cloud.RouteChange) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.unbatched {
		return true
	}
	key := ch.Route.DestinationCIDR.Masked()
	until, ok := b.solo[key]
	if ok && time.Now().After(until) {
		delete(b.solo, key)
		return false
	}
	return ok
}

// do queues ch for the next call and returns its outcome. When ctx ends first, a change
// not yet taken into a call is withdrawn; one already in a call waits for its answer,
// which the loop's own context bounds.
func (b *batcher) do(ctx context.Context, ch cloud.RouteChange) error {
	if b.alone(ch) {
		return b.single(ctx, ch)
	}
	p := &pendingChange{change: ch, done: make(chan error, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, p)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
	}
	b.mu.Lock()
	i := slices.Index(b.pending, p)
	if i >= 0 {
		b.pending = slices.Delete(b.pending, i, i+1)
	}
	b.mu.Unlock()
	if i >= 0 {
		return ctx.Err()
	}
	return <-p.done
}

// run makes the calls until ctx is done, then fails the changes still waiting.
func (b *batcher) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			b.mu.Lock()
			left := b.pending
			b.pending = nil
			b.mu.Unlock()
			for _, p := range left {
				p.done <- ctx.Err()
			}
			return
		case <-b.wake:
		}
		for {
			calls := b.take()
			if len(calls) == 0 {
				break
			}
			b.send(ctx, calls)
			b.mu.Lock()
			b.taken -= len(calls)
			b.mu.Unlock()
		}
	}
}

// take removes up to the provider's bound of waiting changes, oldest first.
func (b *batcher) take() []*pendingChange {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(b.max, len(b.pending))
	out := slices.Clone(b.pending[:n])
	b.pending = slices.Delete(b.pending, 0, n)
	b.taken += n
	return out
}

// unanswered returns how many changes wait for a call or for its answer.
func (b *batcher) unanswered() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending) + b.taken
}

// send applies ps in one call and answers each. When the cloud says a change cannot be
// made as asked (ErrInvalid), it splits ps in halves and tries again, down to single
// CreateRoute and DeleteRoute calls: the change at fault then gets the answer the cloud
// gives it alone, and the others are made. When the cloud does not implement the batch
// (ErrNotImplemented), every change goes out by itself, now and from then on. Any other
// error answers every change: it says nothing about one of them.
func (b *batcher) send(ctx context.Context, ps []*pendingChange) {
	if len(ps) == 1 {
		ps[0].done <- b.single(ctx, ps[0].change)
		return
	}
	changes := make([]cloud.RouteChange, len(ps))
	class := cloud.ClassRefine
	for i, p := range ps {
		changes[i] = p.change
		if !p.change.Delete {
			// A creation is the route of a node that waits for it.
			class = cloud.ClassCritical
		}
	}
	err := b.routes.ApplyRoutes(cloud.WithClass(ctx, class), b.cluster, changes)
	switch {
	case err == nil || cloud.IsThrottled(err) || ctx.Err() != nil:
	case cloud.IsInvalid(err):
		half := len(ps) / 2
		b.send(ctx, ps[:half])
		b.send(ctx, ps[half:])
		return
	case cloud.IsNotImplemented(err):
		// A cloud without the batch (an older one): every change by itself, from now on.
		b.mu.Lock()
		b.unbatched = true
		b.mu.Unlock()
		for _, p := range ps {
			p.done <- b.single(ctx, p.change)
		}
		return
	}
	for _, p := range ps {
		p.done <- err
	}
}

// single makes ch by itself; when that fails (not for stopping), ch's destination goes
// out by itself for soloFor, so that its retries do not make every call they join fail.
func (b *batcher) single(ctx context.Context, ch cloud.RouteChange) error {
	err := applyOne(ctx, b.routes, b.cluster, ch)
	key := ch.Route.DestinationCIDR.Masked()
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err == nil:
		delete(b.solo, key)
	case ctx.Err() == nil && !cloud.IsThrottled(err):
		now := time.Now()
		if len(b.solo) >= maxSolo {
			// Destinations whose node went away are never asked about again.
			maps.DeleteFunc(b.solo, func(_ netip.Prefix, until time.Time) bool { return now.After(until) })
		}
		b.solo[key] = now.Add(soloFor)
	}
	return err
}

// applyOne makes one change with the per-route calls.
func applyOne(ctx context.Context, routes cloud.Routes, cluster string, ch cloud.RouteChange) error {
	if ch.Delete {
		return routes.DeleteRoute(ctx, cluster, ch.Route)
	}
	return routes.CreateRoute(ctx, cluster, ch.NameHint, ch.Route)
}

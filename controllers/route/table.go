package route

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/nephele-dev/nephele/cloud"
)

// routeKey identifies a route in the index: the cloud's route as listed, without its
// node addresses, which a route cannot be told apart by (and whose slice would make
// cloud.Route unusable as a map key).
type routeKey struct {
	name, target string
	cidr         netip.Prefix
	blackhole    bool
}

func keyOf(r cloud.Route) routeKey {
	return routeKey{name: r.Name, target: r.TargetNode, cidr: r.DestinationCIDR, blackhole: r.Blackhole}
}

// indexOf returns the index of the route with r's key in rs, or -1.
func indexOf(rs []cloud.Route, r cloud.Route) int {
	k := keyOf(r)
	return slices.IndexFunc(rs, func(x cloud.Route) bool { return keyOf(x) == k })
}

// routeIndex holds the routes inside the cluster CIDRs, by target node and by CIDR.
// Routes outside the cluster CIDRs are dropped when the index is built: the controller
// never acts on them.
type routeIndex struct {
	byNode map[string][]cloud.Route
	byCIDR map[netip.Prefix][]cloud.Route
	n      int
	// unlisted are routes this controller created that no listing has shown yet, with
	// the time they were recorded. Their cloud name is unknown, so before deleting one
	// the controller waits for a listing that started after that time.
	unlisted map[routeKey]time.Time
}

func newRouteIndex(clusterCIDRs []netip.Prefix, routes []cloud.Route) *routeIndex {
	idx := &routeIndex{
		byNode: make(map[string][]cloud.Route, len(routes)),
		byCIDR: make(map[netip.Prefix][]cloud.Route, len(routes)),
	}
	for _, r := range routes {
		// The route is kept as listed, so a delete names it exactly as the cloud does.
		if cidr := r.DestinationCIDR.Masked(); cidr.IsValid() && insideAny(clusterCIDRs, cidr) {
			idx.add(r)
		}
	}
	return idx
}

func (idx *routeIndex) add(r cloud.Route) {
	idx.byNode[r.TargetNode] = append(idx.byNode[r.TargetNode], r)
	cidr := r.DestinationCIDR.Masked()
	idx.byCIDR[cidr] = append(idx.byCIDR[cidr], r)
	idx.n++
}

// remove removes one route equal to r and reports whether there was one.
func (idx *routeIndex) remove(r cloud.Route) bool {
	rs := idx.byNode[r.TargetNode]
	i := indexOf(rs, r)
	if i < 0 {
		return false
	}
	if rs = slices.Delete(rs, i, i+1); len(rs) == 0 {
		delete(idx.byNode, r.TargetNode)
	} else {
		idx.byNode[r.TargetNode] = rs
	}
	cidr := r.DestinationCIDR.Masked()
	cs := idx.byCIDR[cidr]
	if j := indexOf(cs, r); j >= 0 {
		if cs = slices.Delete(cs, j, j+1); len(cs) == 0 {
			delete(idx.byCIDR, cidr)
		} else {
			idx.byCIDR[cidr] = cs
		}
	}
	delete(idx.unlisted, keyOf(r))
	idx.n--
	return true
}

// hasHealthy reports whether a non-blackhole route sends cidr to node.
func (idx *routeIndex) hasHealthy(node string, cidr netip.Prefix) bool {
	for _, r := range idx.byNode[node] {
		if r.DestinationCIDR.Masked() == cidr && !r.Blackhole {
			return true
		}
	}
	return false
}

// addCreated records a route this controller created at the given time, unless a
// listing already shows it.
func (idx *routeIndex) addCreated(r cloud.Route, at time.Time) {
	if idx.hasHealthy(r.TargetNode, r.DestinationCIDR.Masked()) {
		return
	}
	idx.add(r)
	if idx.unlisted == nil {
		idx.unlisted = make(map[routeKey]time.Time)
	}
	idx.unlisted[keyOf(r)] = at
}

// change is a create or delete that succeeded while a listing was in flight, replayed
// onto that listing's result because the listing may have been taken before it.
type change struct {
	route   cloud.Route
	created bool
	at      time.Time
}

// listCall is one ListRoutes call shared by everyone who asked while it ran.
type listCall struct {
	started time.Time
	done    chan struct{}
	err     error
}

// table is the controller's copy of the cloud's routes: the last listing, updated with
// the controller's own successful creates and deletes. Listings are single-flight:
// callers asking while one runs share it.
type table struct {
	clusterCIDRs []netip.Prefix
	list         func(ctx context.Context) ([]cloud.Route, error)
	now          func() time.Time
	// onChange is called, with the lock held, with the number of routes after every change.
	onChange func(n int)

	mu          sync.Mutex
	idx         *routeIndex // nil until the first successful listing
	lastStarted time.Time   // start of the listing idx came from
	dirtySince  time.Time   // first cloud error since that listing; zero if none
	inflight    *listCall
	journal     []change
}

func newTable(clusterCIDRs []netip.Prefix, list func(context.Context) ([]cloud.Route, error), now func() time.Time, onChange func(int)) *table {
	if onChange == nil {
		onChange = func(int) {}
	}
	return &table{clusterCIDRs: clusterCIDRs, list: list, now: now, onChange: onChange}
}

// refresh returns once a listing that started no earlier than after has completed,
// starting one when needed, and returns that listing's error.
func (t *table) refresh(ctx context.Context, after time.Time) error {
	for {
		t.mu.Lock()
		if t.idx != nil && !t.lastStarted.Before(after) {
			t.mu.Unlock()
			return nil
		}
		if call := t.inflight; call != nil {
			t.mu.Unlock()
			select {
			case <-call.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			if !call.started.Before(after) {
				return call.err
			}
			continue // it started too early for this caller: start (or join) a newer one
		}
		call := &listCall{started: t.now(), done: make(chan struct{})}
		t.inflight = call
		t.mu.Unlock()

		routes, err := t.list(ctx)

		t.mu.Lock()
		if err == nil {
			idx := newRouteIndex(t.clusterCIDRs, routes)
			for _, c := range t.journal {
				if c.created {
					idx.addCreated(c.route, c.at)
				} else {
					idx.remove(c.route)
				}
			}
			t.idx, t.lastStarted = idx, call.started
			if !t.dirtySince.After(call.started) {
				t.dirtySince = time.Time{}
			}
			t.onChange(idx.n)
		}
		t.journal = nil
		t.inflight = nil
		call.err = err
		t.mu.Unlock()
		close(call.done)
		return err
	}
}

// needsListing reports whether a worker must list before planning: when nothing has
// been listed yet, or when a cloud error happened since the last listing and that
// listing is at least minAge old. It returns the time the listing must start after.
func (t *table) needsListing(minAge time.Duration) (after time.Time, need bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.idx == nil:
		return time.Time{}, true
	case !t.dirtySince.IsZero() && t.now().Sub(t.lastStarted) >= minAge:
		return t.dirtySince, true
	}
	return time.Time{}, false
}

// markDirty records that a cloud call failed, so the next worker relists.
func (t *table) markDirty() {
	t.mu.Lock()
	if t.dirtySince.IsZero() {
		t.dirtySince = t.now()
	}
	t.mu.Unlock()
}

// created records a route the controller created.
func (t *table) created(r cloud.Route) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idx == nil {
		return
	}
	now := t.now()
	if t.inflight != nil {
		t.journal = append(t.journal, change{route: r, created: true, at: now})
	}
	t.idx.addCreated(r, now)
	t.onChange(t.idx.n)
}

// deleted records a route the controller deleted.
func (t *table) deleted(r cloud.Route) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idx == nil {
		return
	}
	if t.inflight != nil {
		t.journal = append(t.journal, change{route: r})
	}
	t.idx.remove(r)
	t.onChange(t.idx.n)
}

// has reports whether the table holds r, or has no listing to tell.
func (t *table) has(r cloud.Route) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idx == nil {
		return true
	}
	return indexOf(t.idx.byNode[r.TargetNode], r) >= 0
}

// routed reports whether the table holds a healthy route sending cidr to node.
func (t *table) routed(node string, cidr netip.Prefix) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.idx != nil && t.idx.hasHealthy(node, cidr)
}

// view calls f with the index locked. f must not call back into the table.
func (t *table) view(f func(idx *routeIndex)) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idx == nil {
		return false
	}
	f(t.idx)
	return true
}

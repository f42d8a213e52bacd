package route

import (
	"context"
	"net/netip"
	"sync"
)

// cidrLocks serializes the cloud operations on one destination CIDR. Two workers can
// plan an operation on the same CIDR (the stale route of a gone node is also in the way
// of the node that now owns its CIDR), and many clouds delete routes by destination: a
// delete arriving after the new owner's create would remove the new route. Holding the
// CIDR's lock, a worker re-checks the route table before calling the cloud.
//
// Entries exist only while someone holds or waits for them, so memory does not grow
// with the CIDRs ever seen.
type cidrLocks struct {
	mu sync.Mutex
	m  map[netip.Prefix]*cidrLock
}

type cidrLock struct {
	sem  chan struct{} // one token: the lock, acquirable with a context
	refs int
}

// lock locks cidr, or returns ctx's error. The caller calls unlock exactly once.
func (l *cidrLocks) lock(ctx context.Context, cidr netip.Prefix) (unlock func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[netip.Prefix]*cidrLock)
	}
	e := l.m[cidr]
	if e == nil {
		e = &cidrLock{sem: make(chan struct{}, 1)}
		l.m[cidr] = e
	}
	e.refs++
	l.mu.Unlock()

	release := func() {
		l.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(l.m, cidr)
		}
		l.mu.Unlock()
	}
	select {
	case e.sem <- struct{}{}:
		return func() { <-e.sem; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// len returns the number of CIDRs locked or waited for.
func (l *cidrLocks) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

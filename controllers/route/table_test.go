package route

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud"
)

// blockingList is a ListRoutes that returns its routes when released.
type blockingList struct {
	calls   atomic.Int32
	started chan struct{} // receives once per call
	release chan struct{}
	routes  []cloud.Route
	err     error
}

func newBlockingList(routes ...cloud.Route) *blockingList {
	return &blockingList{started: make(chan struct{}, 100), release: make(chan struct{}), routes: routes}
}

func (b *blockingList) list(ctx context.Context) ([]cloud.Route, error) {
	b.calls.Add(1)
	b.started <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return slices.Clone(b.routes), b.err
}

// fakeClock is a settable clock for the table.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestTable(list func(context.Context) ([]cloud.Route, error), clock *fakeClock) *table {
	return newTable(prefixes("10.244.0.0/16", "fd00:10:244::/56"), list, clock.now, nil)
}

func TestRefreshSharesOneListing(t *testing.T) {
	bl := newBlockingList(rt("r1", "a", "10.244.1.0/24"))
	clock := &fakeClock{t: time.Unix(1000, 0)}
	tb := newTestTable(bl.list, clock)

	const callers = 20
	errs := make(chan error, callers)
	for range callers {
		go func() { errs <- tb.refresh(t.Context(), time.Time{}) }()
	}
	<-bl.started
	close(bl.release)
	for range callers {
		if err := <-errs; err != nil {
			t.Fatalf("refresh: %v", err)
		}
	}
	if n := bl.calls.Load(); n != 1 {
		t.Errorf("ListRoutes called %d times for %d concurrent callers, want 1", n, callers)
	}
	// A caller needing a listing newer than the last one starts another.
	clock.step(time.Second)
	if err := tb.refresh(t.Context(), clock.now()); err != nil {
		t.Fatal(err)
	}
	if n := bl.calls.Load(); n != 2 {
		t.Errorf("ListRoutes called %d times after a refresh for a newer listing, want 2", n)
	}
	// A caller content with any listing does not list again.
	if err := tb.refresh(t.Context(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if n := bl.calls.Load(); n != 2 {
		t.Errorf("ListRoutes called %d times, want still 2", n)
	}
}

func TestRefreshReplaysChangesMadeDuringTheListing(t *testing.T) {
	// The cloud answers with the state from before the changes below.
	bl := newBlockingList(rt("old", "a", "10.244.1.0/24"), rt("keep", "b", "10.244.2.0/24"))
	clock := &fakeClock{t: time.Unix(1000, 0)}
	tb := newTestTable(bl.list, clock)
	close(bl.release)
	if err := tb.refresh(t.Context(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	<-bl.started // the first listing's

	bl.release = make(chan struct{})
	clock.step(time.Second)
	done := make(chan error, 1)
	go func() { done <- tb.refresh(t.Context(), clock.now()) }()
	<-bl.started
	tb.deleted(rt("old", "a", "10.244.1.0/24"))
	tb.created(rt("hint-a", "a", "10.244.3.0/24"))
	close(bl.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	var got []cloud.Route
	var unlisted int
	tb.view(func(idx *routeIndex) {
		for _, rs := range idx.byNode {
			got = append(got, rs...)
		}
		unlisted = len(idx.unlisted)
	})
	slices.SortFunc(got, func(a, b cloud.Route) int { return a.DestinationCIDR.Addr().Compare(b.DestinationCIDR.Addr()) })
	want := []cloud.Route{rt("keep", "b", "10.244.2.0/24"), rt("hint-a", "a", "10.244.3.0/24")}
	if !equalOrEmpty(got, want) {
		t.Errorf("routes after the listing = %v, want %v", got, want)
	}
	if unlisted != 1 {
		t.Errorf("unlisted routes = %d, want 1 (the one created during the listing)", unlisted)
	}
}

func TestCreatedRouteSeenByAListingIsNotDuplicated(t *testing.T) {
	bl := newBlockingList(rt("cloud-name", "a", "10.244.1.0/24"))
	clock := &fakeClock{t: time.Unix(1000, 0)}
	tb := newTestTable(bl.list, clock)
	close(bl.release)
	if err := tb.refresh(t.Context(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	tb.created(rt("hint", "a", "10.244.1.0/24"))
	tb.view(func(idx *routeIndex) {
		if got := idx.byNode["a"]; len(got) != 1 || got[0].Name != "cloud-name" {
			t.Errorf("routes of a = %v, want only the listed one", got)
		}
		if idx.n != 1 {
			t.Errorf("n = %d, want 1", idx.n)
		}
	})
}

func TestNeedsListing(t *testing.T) {
	bl := newBlockingList()
	close(bl.release)
	clock := &fakeClock{t: time.Unix(1000, 0)}
	tb := newTestTable(bl.list, clock)
	const minAge = 10 * time.Second

	if _, need := tb.needsListing(minAge); !need {
		t.Fatal("needsListing before any listing = false, want true")
	}
	if err := tb.refresh(t.Context(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, need := tb.needsListing(minAge); need {
		t.Error("needsListing right after a listing = true, want false")
	}
	clock.step(time.Second)
	tb.markDirty()
	if _, need := tb.needsListing(minAge); need {
		t.Error("needsListing after an error within minAge of the listing = true, want false (errors must not cause a listing each)")
	}
	clock.step(minAge)
	after, need := tb.needsListing(minAge)
	if !need {
		t.Fatal("needsListing after an error and minAge = false, want true")
	}
	if err := tb.refresh(t.Context(), after); err != nil {
		t.Fatal(err)
	}
	if _, need := tb.needsListing(minAge); need {
		t.Error("needsListing after relisting = true, want false")
	}
	if n := bl.calls.Load(); n != 2 {
		t.Errorf("ListRoutes calls = %d, want 2", n)
	}
}

func TestRefreshErrorKeepsTheOldIndex(t *testing.T) {
	bl := newBlockingList(rt("r1", "a", "10.244.1.0/24"))
	close(bl.release)
	clock := &fakeClock{t: time.Unix(1000, 0)}
	tb := newTestTable(bl.list, clock)
	if err := tb.refresh(t.Context(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("HTTP 500")
	bl.err = boom
	clock.step(time.Second)
	if err := tb.refresh(t.Context(), clock.now()); !errors.Is(err, boom) {
		t.Fatalf("refresh error = %v, want %v", err, boom)
	}
	tb.view(func(idx *routeIndex) {
		if len(idx.byNode["a"]) != 1 {
			t.Errorf("index lost its routes after a failed listing: %v", idx.byNode)
		}
	})
}

func TestRouteIndexRemove(t *testing.T) {
	idx := newRouteIndex(prefixes("10.244.0.0/16"), []cloud.Route{
		rt("r1", "a", "10.244.1.0/24"), rt("r2", "a", "10.244.2.0/24"), rt("r3", "b", "10.244.1.0/24"),
	})
	if idx.remove(rt("nope", "a", "10.244.1.0/24")) {
		t.Error("remove of an unknown route reported true")
	}
	if !idx.remove(rt("r1", "a", "10.244.1.0/24")) {
		t.Fatal("remove of a known route reported false")
	}
	if got := idx.byNode["a"]; !equalOrEmpty(got, []cloud.Route{rt("r2", "a", "10.244.2.0/24")}) {
		t.Errorf("byNode[a] = %v", got)
	}
	if got := idx.byCIDR[prefixes("10.244.1.0/24")[0]]; !equalOrEmpty(got, []cloud.Route{rt("r3", "b", "10.244.1.0/24")}) {
		t.Errorf("byCIDR = %v", got)
	}
	idx.remove(rt("r2", "a", "10.244.2.0/24"))
	if _, ok := idx.byNode["a"]; ok || idx.n != 1 {
		t.Errorf("after removing all of a's routes: byNode has a = %v, n = %d", ok, idx.n)
	}
}

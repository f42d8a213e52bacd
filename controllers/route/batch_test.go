package route

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

// recordingBatcher passes calls to a fake cloud's batching Routes and records the size
// of every ApplyRoutes call.
type recordingBatcher struct {
	batchingRoutes

	mu    sync.Mutex
	sizes []int
}

func (r *recordingBatcher) ApplyRoutes(ctx context.Context, cluster string, changes []cloud.RouteChange) error {
	r.mu.Lock()
	r.sizes = append(r.sizes, len(changes))
	r.mu.Unlock()
	return r.batchingRoutes.ApplyRoutes(ctx, cluster, changes)
}

func (r *recordingBatcher) calls() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.sizes...)
}

// batchFixture is a batcher running against a batching fake cloud.
type batchFixture struct {
	cloud *fakecloud.Cloud
	rec   *recordingBatcher
	b     *batcher
}

func startBatcher(t *testing.T, maxChanges int) *batchFixture {
	t.Helper()
	fc, err := fakecloud.New(fakecloud.Options{MaxRouteChanges: maxChanges})
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := fc.Routes()
	rb, ok := rt.(batchingRoutes)
	if !ok {
		t.Fatal("the fake cloud's Routes do not batch with MaxRouteChanges set")
	}
	rec := &recordingBatcher{batchingRoutes: rb}
	f := &batchFixture{cloud: fc, rec: rec, b: newBatcher(rec, testCluster)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.b.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// until waits for cond, failing the test (with what) when it does not come true.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Eventually(t, what, func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}

// pending is how many changes wait for a call.
func (f *batchFixture) pending() int {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	return len(f.b.pending)
}

// behindAHeldCall makes first, holds its call in the cloud until every one of changes
// waits behind it, then lets it go; it returns the outcome of each change and of first.
func (f *batchFixture) behindAHeldCall(t *testing.T, first cloud.RouteChange, changes []cloud.RouteChange) ([]error, error) {
	t.Helper()
	ctx := t.Context()
	f.cloud.Hang(cloud.OpCreateRoute, first.Route.TargetNode)
	firstErr := make(chan error, 1)
	go func() { firstErr <- f.b.do(ctx, first) }()
	until(t, "the first change's call started", func() bool { return f.cloud.InFlight() == 1 })
	var errs []error
	done := make(chan struct{})
	go func() { errs = f.doAll(ctx, changes); close(done) }()
	until(t, fmt.Sprintf("%d changes wait", len(changes)), func() bool { return f.pending() == len(changes) })
	f.cloud.Unhang(cloud.OpCreateRoute, first.Route.TargetNode)
	err := <-firstErr
	<-done
	return errs, err
}

func createOf(i int) cloud.RouteChange {
	return cloud.RouteChange{
		NameHint: fmt.Sprintf("r%d", i),
		Route: cloud.Route{TargetNode: fmt.Sprintf("n%d", i),
			DestinationCIDR: netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/24", i))},
	}
}

// doAll makes the changes at once and returns each one's outcome.
func (f *batchFixture) doAll(ctx context.Context, changes []cloud.RouteChange) []error {
	errs := make([]error, len(changes))
	var wg sync.WaitGroup
	for i, ch := range changes {
		wg.Go(func() { errs[i] = f.b.do(ctx, ch) })
	}
	wg.Wait()
	return errs
}

// TestBatcherGroupsWaitingChanges holds the first change in its call while 100 more
// arrive: they go out in calls of at most the provider's bound, and a lone change goes
// out as a plain CreateRoute.
func TestBatcherGroupsWaitingChanges(t *testing.T) {
	f := startBatcher(t, 40)
	var rest []cloud.RouteChange
	for i := 1; i <= 100; i++ {
		rest = append(rest, createOf(i))
	}
	errs, firstErr := f.behindAHeldCall(t, createOf(0), rest)
	if firstErr != nil {
		t.Fatalf("first change: %v", firstErr)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("change %d: %v", i+1, err)
		}
	}
	if got, want := f.rec.calls(), []int{40, 40, 20}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ApplyRoutes calls took %v changes, want %v", got, want)
	}
	if n := f.cloud.Calls(cloud.OpCreateRoute); n != 1 {
		t.Errorf("CreateRoute calls = %d, want 1 (the lone first change)", n)
	}
	if n := len(f.cloud.AllRoutes(testCluster)); n != 101 {
		t.Errorf("the cloud has %d routes, want 101", n)
	}
}

// TestBatcherIsolatesAChangeTheCloudRefuses: one creation in a call conflicts with a
// route the cloud has (another node's), so the whole call is invalid; the batcher
// splits it until that change fails alone, with the answer its own CreateRoute gets,
// and makes every other change.
func TestBatcherIsolatesAChangeTheCloudRefuses(t *testing.T) {
	f := startBatcher(t, 100)
	bad := createOf(7)
	if err := f.cloud.AddRoute(testCluster, cloud.Route{Name: "theirs", TargetNode: "other", DestinationCIDR: bad.Route.DestinationCIDR}); err != nil {
		t.Fatal(err)
	}
	// The 16 wait together behind a held first change and go out in one call.
	var changes []cloud.RouteChange
	for i := range 16 {
		changes = append(changes, createOf(i))
	}
	errs, firstErr := f.behindAHeldCall(t, createOf(100), changes)
	if firstErr != nil {
		t.Fatalf("first change: %v", firstErr)
	}
	for i, err := range errs {
		switch {
		case i == 7 && (err == nil || cloud.IsInvalid(err)):
			t.Errorf("the conflicting change got %v, want CreateRoute's own (not invalid) refusal", err)
		case i != 7 && err != nil:
			t.Errorf("change %d: %v", i, err)
		}
	}
	// 16, then its halves (8 and 8), the bad half's halves (4 and 4), and so on to a
	// pair whose two changes go out as CreateRoute calls. Which half holds the bad change
	// depends on the order the changes arrived in, so the sizes are compared sorted.
	got := f.rec.calls()
	slices.Sort(got)
	if want := []int{2, 2, 4, 4, 8, 8, 16}; !slices.Equal(got, want) {
		t.Errorf("ApplyRoutes calls took %v changes (sorted), want %v", got, want)
	}
	if n := f.cloud.Calls(cloud.OpCreateRoute); n != 3 {
		t.Errorf("CreateRoute calls = %d, want 3 (the first change and the pair holding the bad one)", n)
	}
	if n := len(f.cloud.AllRoutes(testCluster)); n != 17 {
		t.Errorf("the cloud has %d routes, want 17 (theirs, the first and 15 of the 16)", n)
	}

	// Its retry goes out by itself: joining a call, it would make the call fail again.
	calls := len(f.rec.calls())
	if err := f.b.do(t.Context(), bad); err == nil {
		t.Error("the conflicting change's retry succeeded")
	}
	if n := len(f.rec.calls()); n != calls {
		t.Errorf("the retry of a change that failed alone made %d ApplyRoutes calls, want none", n-calls)
	}
	if n := f.cloud.Calls(cloud.OpCreateRoute); n != 4 {
		t.Errorf("CreateRoute calls = %d, want 4 (the retry by itself)", n)
	}
}

// TestBatcherWithoutTheBatchGoesSingle: a cloud that does not implement the batch (an
// older one) gets every change by itself, at once and from then on.
func TestBatcherWithoutTheBatchGoesSingle(t *testing.T) {
	f := startBatcher(t, 100)
	f.cloud.SetError(cloud.OpApplyRoutes, fmt.Errorf("HTTP 404: %w", cloud.ErrNotImplemented))
	var changes []cloud.RouteChange
	for i := range 10 {
		changes = append(changes, createOf(i))
	}
	errs, firstErr := f.behindAHeldCall(t, createOf(10), changes)
	if err := errors.Join(append(errs, firstErr)...); err != nil {
		t.Fatalf("changes to a cloud without the batch: %v", err)
	}
	if err := f.b.do(t.Context(), createOf(11)); err != nil {
		t.Fatal(err)
	}
	if got := f.rec.calls(); len(got) != 1 {
		t.Errorf("ApplyRoutes calls %v, want the one that found the batch missing", got)
	}
	if n := len(f.cloud.AllRoutes(testCluster)); n != 12 {
		t.Errorf("the cloud has %d routes, want 12", n)
	}
}

// TestBatcherAnswersEveryChangeWithATransientError: an error that is not about one
// change (here an outage) answers every change in the call once, with no split.
func TestBatcherAnswersEveryChangeWithATransientError(t *testing.T) {
	f := startBatcher(t, 100)
	outage := errors.New("the route table service is unavailable")
	f.cloud.SetError(cloud.OpApplyRoutes, outage)
	f.cloud.SetError(cloud.OpCreateRoute, outage)
	var changes []cloud.RouteChange
	for i := range 30 {
		changes = append(changes, createOf(i))
	}
	for i, err := range f.doAll(t.Context(), changes) {
		if !errors.Is(err, outage) {
			t.Errorf("change %d: %v, want the outage", i, err)
		}
	}
	calls := f.rec.calls()
	total := 0
	for _, n := range calls {
		total += n
	}
	if total+f.cloud.Calls(cloud.OpCreateRoute) != 30 {
		t.Errorf("ApplyRoutes calls %v and %d CreateRoute calls: every change should be sent once", calls, f.cloud.Calls(cloud.OpCreateRoute))
	}
}

// TestBatcherWithdrawsAChangeWhoseSyncGaveUp: a change still waiting when its context
// ends is not sent, and the batcher goes on with the others.
func TestBatcherWithdrawsAChangeWhoseSyncGaveUp(t *testing.T) {
	f := startBatcher(t, 100)
	f.cloud.Hang(cloud.OpCreateRoute, "n0")
	first := make(chan error, 1)
	go func() { first <- f.b.do(t.Context(), createOf(0)) }()
	until(t, "the first change's call started", func() bool { return f.cloud.InFlight() == 1 })

	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- f.b.do(ctx, createOf(1)) }()
	until(t, "the second change waits", func() bool { return f.pending() == 1 })
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Errorf("withdrawn change: %v, want context.Canceled", err)
	}
	f.cloud.Unhang(cloud.OpCreateRoute, "n0")
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := f.b.do(t.Context(), createOf(2)); err != nil {
		t.Fatalf("a change after the withdrawn one: %v", err)
	}
	var dsts []string
	for _, r := range f.cloud.AllRoutes(testCluster) {
		dsts = append(dsts, r.DestinationCIDR.String())
	}
	if fmt.Sprint(dsts) != "[10.244.0.0/24 10.244.2.0/24]" {
		t.Errorf("routes %v, want the first and the third change's only", dsts)
	}
}

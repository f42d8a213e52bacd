package inventory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

// lister is a programmable InstanceLister that counts calls and can hold a call open.
type lister struct {
	calls atomic.Int32
	mu    sync.Mutex
	insts []cloud.Instance
	err   error
	gate  chan struct{} // when non-nil, each call waits for a receive... close to release all
}

func (l *lister) ListInstances(ctx context.Context) ([]cloud.Instance, error) {
	l.calls.Add(1)
	l.mu.Lock()
	gate, insts, err := l.gate, l.insts, l.err
	l.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return insts, err
}

func (l *lister) set(insts []cloud.Instance, err error) {
	l.mu.Lock()
	l.insts, l.err = insts, err
	l.mu.Unlock()
}

func instance(name string) cloud.Instance {
	return cloud.Instance{ProviderID: "fake://" + name, NodeName: name, Zone: "z1", State: cloud.InstanceRunning}
}

// start runs an inventory over l until the test ends.
func start(t *testing.T, l *lister) *Inventory {
	t.Helper()
	inv, _ := startCountingClockReads(t, l)
	return inv
}

// startCountingClockReads is start with a clock that counts its reads. Every Sync reads
// the clock once when it arrives, and every listing once when it starts, so the count
// tells when all callers have arrived.
func startCountingClockReads(t *testing.T, l *lister) (*Inventory, *atomic.Int32) {
	t.Helper()
	var reads atomic.Int32
	inv := New(l)
	inv.now = func() time.Time { reads.Add(1); return time.Now() }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return inv, &reads
}

func TestLookupAfterSync(t *testing.T) {
	l := &lister{}
	l.set([]cloud.Instance{instance("a"), instance("b")}, nil)
	inv := start(t, l)
	if _, ok := inv.Lookup("", "a"); ok {
		t.Fatal("Lookup before any listing found an instance")
	}
	if err := inv.Sync(context.Background(), 0); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	tests := []struct {
		providerID, name string
		want             bool
	}{
		{"fake://a", "", true},
		{"", "b", true},
		{"fake://a", "b", true}, // provider ID wins over name
		{"fake://c", "", false},
		{"", "c", false},
	}
	for _, tt := range tests {
		in, ok := inv.Lookup(tt.providerID, tt.name)
		if ok != tt.want {
			t.Errorf("Lookup(%q, %q) ok = %v, want %v", tt.providerID, tt.name, ok, tt.want)
		}
		if ok && tt.providerID != "" && in.ProviderID != tt.providerID {
			t.Errorf("Lookup(%q, %q) = %q", tt.providerID, tt.name, in.ProviderID)
		}
	}
	if inv.LastSync().IsZero() {
		t.Error("LastSync is zero after a successful listing")
	}
}

func TestFreshListingIsReused(t *testing.T) {
	l := &lister{}
	l.set([]cloud.Instance{instance("a")}, nil)
	inv := start(t, l)
	for i := 0; i < 10; i++ {
		if err := inv.Sync(context.Background(), time.Hour); err != nil {
			t.Fatalf("Sync: %v", err)
		}
	}
	if got := l.calls.Load(); got != 1 {
		t.Fatalf("10 Syncs within maxAge made %d cloud calls, want 1", got)
	}
	if err := inv.Sync(context.Background(), 0); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if got := l.calls.Load(); got != 2 {
		t.Fatalf("Sync(0) made %d cloud calls in all, want 2", got)
	}
}

func TestConcurrentSyncsShareOneListing(t *testing.T) {
	l := &lister{gate: make(chan struct{})}
	l.set([]cloud.Instance{instance("a")}, nil)
	inv, clockReads := startCountingClockReads(t, l)

	// A first caller starts a listing that is held open.
	first := make(chan error, 1)
	go func() { first <- inv.Sync(context.Background(), 0) }()
	poll.Within(t, 10*time.Second, "the first listing", reaches("cloud calls", &l.calls, 1))

	// 100 callers arriving while it runs all need a listing that starts after them: they
	// must share exactly one more call, not make 100.
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- inv.Sync(context.Background(), 0) }()
	}
	// The first Sync, the held listing and the 100 callers: all have arrived after the
	// held listing started, so none of them may be served by it.
	poll.Within(t, 10*time.Second, "every caller to arrive", reaches("clock reads", clockReads, 2+n))
	close(l.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Sync: %v", err)
		}
	}
	if err := <-first; err != nil {
		t.Fatalf("first Sync: %v", err)
	}
	if got := l.calls.Load(); got != 2 {
		t.Fatalf("%d concurrent Syncs made %d cloud calls, want 2", n+1, got)
	}
}

// TestSyncWaitsForRecentRunningListing checks that callers content with a listing that
// is already running wait for it instead of queueing one more.
func TestSyncWaitsForRecentRunningListing(t *testing.T) {
	l := &lister{gate: make(chan struct{})}
	l.set([]cloud.Instance{instance("a")}, nil)
	inv, clockReads := startCountingClockReads(t, l)

	first := make(chan error, 1)
	go func() { first <- inv.Sync(context.Background(), 0) }()
	poll.Within(t, 10*time.Second, "the first listing", reaches("cloud calls", &l.calls, 1))

	const n = 10
	errs := make(chan error, n)
	for range n {
		go func() { errs <- inv.Sync(context.Background(), time.Hour) }()
	}
	poll.Within(t, 10*time.Second, "every caller to arrive", reaches("clock reads", clockReads, 2+n))
	close(l.gate)
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("Sync: %v", err)
		}
	}
	if err := <-first; err != nil {
		t.Fatalf("first Sync: %v", err)
	}
	inv.mu.Lock()
	requested, pending := inv.requested, len(inv.kick)
	inv.mu.Unlock()
	if got := l.calls.Load(); got != 1 || requested || pending != 0 {
		t.Errorf("after Syncs within maxAge of the running listing: %d cloud calls, listing requested %v, %d kicks pending; want 1, false, 0",
			got, requested, pending)
	}
}

func TestFailedListingKeepsLastGoodView(t *testing.T) {
	l := &lister{}
	l.set([]cloud.Instance{instance("a")}, nil)
	inv := start(t, l)
	if err := inv.Sync(context.Background(), 0); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	boom := errors.New("HTTP 503")
	l.set(nil, boom)
	err := inv.Sync(context.Background(), 0)
	if !errors.Is(err, boom) {
		t.Fatalf("Sync after a failed listing = %v, want it to wrap %v", err, boom)
	}
	if cloud.IsNotFound(err) {
		t.Fatal("a failed listing must never read as NotFound")
	}
	if _, ok := inv.Lookup("", "a"); !ok {
		t.Fatal("a failed listing dropped the last good view")
	}
}

func TestAmbiguousListingRefused(t *testing.T) {
	dupName := instance("a")
	dupName.ProviderID = "fake://other"
	tests := map[string][]cloud.Instance{
		"duplicate provider ID": {instance("a"), instance("a")},
		"duplicate node name":   {instance("a"), dupName},
		"missing provider ID":   {{NodeName: "x"}},
	}
	for name, insts := range tests {
		t.Run(name, func(t *testing.T) {
			l := &lister{}
			l.set(insts, nil)
			inv := start(t, l)
			if err := inv.Sync(context.Background(), 0); err == nil {
				t.Fatal("Sync accepted an ambiguous listing")
			}
			if _, ok := inv.Lookup("", "a"); ok {
				t.Fatal("an ambiguous listing was indexed")
			}
		})
	}
}

func TestSyncHonoursContext(t *testing.T) {
	l := &lister{gate: make(chan struct{})}
	inv := start(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := inv.Sync(ctx, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Sync with a hung cloud = %v, want DeadlineExceeded", err)
	}
	close(l.gate)
}

func BenchmarkLookup(b *testing.B) {
	const n = 5000
	insts := make([]cloud.Instance, n)
	for i := range insts {
		insts[i] = instance(fmt.Sprintf("node-%05d", i))
	}
	l := &lister{}
	l.set(insts, nil)
	inv := New(l)
	inv.list(context.Background())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok := inv.Lookup("", "node-02500"); !ok {
			b.Fatal("not found")
		}
	}
}

// BenchmarkRefresh5000 measures indexing one listing of 5,000 instances.
func BenchmarkRefresh5000(b *testing.B) {
	const n = 5000
	insts := make([]cloud.Instance, n)
	for i := range insts {
		insts[i] = instance(fmt.Sprintf("node-%05d", i))
	}
	l := &lister{}
	l.set(insts, nil)
	inv := New(l)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		inv.list(context.Background())
	}
}

// reaches is a condition for poll: the counter reaches want.
func reaches(what string, c *atomic.Int32, want int32) func() error {
	return func() error {
		if got := c.Load(); got != want {
			return fmt.Errorf("%s = %d, want %d", what, got, want)
		}
		return nil
	}
}

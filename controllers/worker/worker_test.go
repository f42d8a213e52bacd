package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/manager"
)

// recorder counts syncs per key and answers each from a script.
type recorder struct {
	mu     sync.Mutex
	calls  map[string][]time.Time
	answer func(key string, n int) (Result, error)
}

func (r *recorder) sync(_ context.Context, key string) (Result, error) {
	r.mu.Lock()
	r.calls[key] = append(r.calls[key], time.Now())
	n := len(r.calls[key])
	r.mu.Unlock()
	return r.answer(key, n)
}

func (r *recorder) times(key string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.calls[key]...)
}

// waitCalls waits until key was synced n times, failing after a generous deadline.
func (r *recorder) waitCalls(t *testing.T, key string, n int) []time.Time {
	t.Helper()
	var got []time.Time
	poll.Eventually(t, fmt.Sprintf("%d syncs of %q", n, key), func() error {
		if got = r.times(key); len(got) < n {
			return fmt.Errorf("synced %d times", len(got))
		}
		return nil
	})
	return got
}

func start(t *testing.T, cfg Config) *Worker {
	t.Helper()
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return w
}

func TestResults(t *testing.T) {
	const wait = 200 * time.Millisecond
	tests := []struct {
		name string
		// answer is the first sync's result; later syncs succeed.
		first     func() (Result, error)
		wantCalls int
		// minGap is the least time between the first and second sync.
		minGap time.Duration
	}{
		{"success is not synced again", func() (Result, error) { return Result{}, nil }, 1, 0},
		{"requeue after", func() (Result, error) { return Result{RequeueAfter: wait}, nil }, 2, wait},
		{"terminal error is not retried", func() (Result, error) { return Result{}, Terminal(errors.New("bad spec")) }, 1, 0},
		{"throttled waits for Retry-After", func() (Result, error) {
			return Result{}, cloud.Throttled(wait, errors.New("429"))
		}, 2, wait},
		{"other errors are retried with backoff", func() (Result, error) { return Result{}, errors.New("boom") }, 2, 0},
		{"fenced cloud calls are not retried: the controller is stopping", func() (Result, error) {
			return Result{}, fmt.Errorf("ensuring load balancer: %w", cloud.ErrFenced)
		}, 1, 0},
	}
	for _, prioritized := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/prioritized=%v", tt.name, prioritized), func(t *testing.T) {
				r := &recorder{calls: map[string][]time.Time{}, answer: func(_ string, n int) (Result, error) {
					if n == 1 {
						return tt.first()
					}
					return Result{}, nil
				}}
				w := start(t, Config{Name: "test", Sync: r.sync, Workers: 2, Prioritized: prioritized,
					Retry: Retry{MinDelay: time.Millisecond, MaxDelay: time.Second, QPS: -1}})
				w.Add("k")
				calls := r.waitCalls(t, "k", tt.wantCalls)
				if tt.wantCalls > 1 {
					if gap := calls[1].Sub(calls[0]); gap < tt.minGap {
						t.Errorf("second sync %v after the first, want at least %v", gap, tt.minGap)
					}
				}
				// A key that is done is not synced again: give a wrongly queued retry the
				// time to show (the longest wait above, with room), then count.
				w.Add("marker")
				r.waitCalls(t, "marker", 1)
				time.Sleep(2 * wait)
				if got := len(r.times("k")); got != tt.wantCalls {
					t.Errorf("key synced %d times, want %d", got, tt.wantCalls)
				}
			})
		}
	}
}

func TestCriticalKeysGoFirstAndRetryAsCritical(t *testing.T) {
	var mu sync.Mutex
	var order []string
	gate := make(chan struct{})
	var w *Worker
	sync := func(ctx context.Context, key string) (Result, error) {
		mu.Lock()
		order = append(order, key)
		n := len(order)
		mu.Unlock()
		switch {
		case key == "gate":
			<-gate
		case key == "critical" && n == 2:
			return Result{}, errors.New("first attempt fails")
		case key == "refine-1":
			// Hold the only worker until the failed critical key is back in the queue
			// (its retry waits 200ms: long enough that the worker has taken refine-1
			// first even on a loaded machine), so that the next pick chooses between
			// it and refine-2.
			if err := poll.Until(ctx, poll.Timeout, func(context.Context) error {
				if w.Len() < 2 {
					return errors.New("the critical key's retry is not queued yet")
				}
				return nil
			}); err != nil {
				return Result{}, err
			}
		}
		return Result{}, nil
	}
	w = start(t, Config{Name: "prio", Sync: sync, Workers: 1, Prioritized: true,
		Retry: Retry{MinDelay: 200 * time.Millisecond, MaxDelay: time.Second, QPS: -1}})
	w.Add("gate")
	poll.Eventually(t, "the gate key in work", func() error {
		if w.Len() != 0 {
			return errors.New("still queued")
		}
		return nil
	})
	w.Add("refine-1")
	w.Add("refine-2")
	w.AddCritical("critical")
	close(gate)
	want := []string{"gate", "critical", "refine-1", "critical", "refine-2"}
	poll.Eventually(t, "every key synced", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(order) < len(want) {
			return fmt.Errorf("synced %v", order)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("sync order %v, want %v", order, want)
	}
}

func TestAddCriticalWithoutPrioritiesIsAdd(t *testing.T) {
	r := &recorder{calls: map[string][]time.Time{}, answer: func(string, int) (Result, error) { return Result{}, nil }}
	w := start(t, Config{Name: "plain", Sync: r.sync, Workers: 1})
	w.AddCritical("k")
	r.waitCalls(t, "k", 1)
}

func TestProgressAndPending(t *testing.T) {
	p := manager.NewProgress("test", time.Hour)
	release := make(chan struct{})
	r := &recorder{calls: map[string][]time.Time{}, answer: func(string, int) (Result, error) {
		<-release
		return Result{}, nil
	}}
	w := start(t, Config{Name: "test", Sync: r.sync, Workers: 1, Health: p})
	p.Started()
	w.Add("a")
	w.Add("b")
	r.waitCalls(t, "a", 1)
	if got := w.Len(); got != 1 {
		t.Errorf("Len with one key in work and one waiting = %d, want 1", got)
	}
	close(release)
	r.waitCalls(t, "b", 1)
	if err := p.Check(); err != nil {
		t.Errorf("Check after progress: %v", err)
	}
}

func TestLoopsRunAfterSyncAndStop(t *testing.T) {
	synced := make(chan struct{})
	ran := make(chan struct{})
	stopped := make(chan struct{})
	w, err := New(Config{
		Name: "loops",
		Synced: []cache.InformerSynced{func() bool {
			select {
			case <-synced:
				return true
			default:
				return false
			}
		}},
		Loops: []Loop{func(ctx context.Context) {
			close(ran)
			<-ctx.Done()
			close(stopped)
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-ran:
		t.Fatal("a loop ran before the caches synced")
	case <-time.After(300 * time.Millisecond):
	}
	close(synced)
	<-ran
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	select {
	case <-stopped:
	default:
		t.Error("Run returned before its loop did")
	}
}

func TestStopBeforeSyncIsClean(t *testing.T) {
	w, err := New(Config{Name: "never", Sync: func(context.Context, string) (Result, error) { return Result{}, nil }, Workers: 1,
		Synced: []cache.InformerSynced{func() bool { return false }}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := w.Run(ctx); err != nil {
		t.Errorf("Run stopped before the caches synced = %v, want nil", err)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	sync := func(context.Context, string) (Result, error) { return Result{}, nil }
	for _, cfg := range []Config{
		{Sync: sync, Workers: 1},
		{Name: "x", Sync: sync},
		{Name: "x"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

func TestTerminal(t *testing.T) {
	base := errors.New("bad")
	err := Terminal(base)
	if !IsTerminal(err) || !errors.Is(err, base) || IsTerminal(base) || Terminal(nil) != nil {
		t.Errorf("Terminal/IsTerminal do not round-trip: %v", err)
	}
	if IsTerminal(errors.Join(errors.New("retry me"), err)) {
		t.Error("a join with a retryable error is terminal")
	}
	if !IsTerminal(fmt.Errorf("wrapped: %w", errors.Join(err, Terminal(errors.New("also bad"))))) {
		t.Error("a wrapped join of terminal errors is not terminal")
	}
}

func TestPriorityFIFOOrderAndNoStarvation(t *testing.T) {
	tests := []struct {
		name     string
		refine   []string
		critical []string
		want     []string
	}{
		{"refine only is FIFO", []string{"r1", "r2", "r3"}, nil, []string{"r1", "r2", "r3"}},
		{"critical first", []string{"r1", "r2"}, []string{"c1", "c2"}, []string{"c1", "c2", "r1", "r2"}},
		{"one refine in every RefineEvery pops while both wait",
			[]string{"r1", "r2"}, []string{"c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"},
			[]string{"c1", "c2", "c3", "c4", "r1", "c5", "c6", "c7", "c8", "r2", "c9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newPriorityFIFO()
			for _, k := range tt.refine {
				q.Push(k)
			}
			for _, k := range tt.critical {
				q.mark(k)
				q.Push(k)
			}
			var got []string
			for q.Len() > 0 {
				got = append(got, q.Pop())
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("pops %v, want %v", got, tt.want)
			}
		})
	}
	// A queued refining key marked later moves behind the critical keys already queued.
	q := newPriorityFIFO()
	q.Push("r1")
	q.Push("r2")
	q.mark("c1")
	q.Push("c1")
	q.mark("r2")
	q.Touch("r2")
	var got []string
	for q.Len() > 0 {
		got = append(got, q.Pop())
	}
	if want := "[c1 r2 r1]"; fmt.Sprint(got) != want {
		t.Errorf("pops after a touch %v, want %v", got, want)
	}
	if !q.finish("r2") || q.finish("r1") {
		t.Error("finish does not tell the keys popped as critical from the others")
	}
}

func TestDrainForgetsCriticalKeys(t *testing.T) {
	w, err := New(Config{Name: "drain", Sync: func(context.Context, string) (Result, error) { return Result{}, nil }, Workers: 1, Prioritized: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.ShutDown()
	w.Add("refine")
	w.AddCritical("critical")
	var got []string
	if n := w.Drain(func(k string) { got = append(got, k) }); n != 2 || fmt.Sprint(got) != "[critical refine]" {
		t.Errorf("Drain took %d keys %v, want [critical refine]", n, got)
	}
	if w.prio.finish("critical") {
		t.Error("a drained critical key is still remembered as popped")
	}
}

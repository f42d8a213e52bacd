package worker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/manager"
)

// Result says what a successful sync wants next.
type Result struct {
	// RequeueAfter, when positive, syncs the key again after this long. It is not a
	// failure: the key's backoff is reset.
	RequeueAfter time.Duration
}

// SyncFunc brings the object named by key in line with what it asks for.
type SyncFunc func(ctx context.Context, key string) (Result, error)

// Loop is work a controller runs beside its workers until ctx is done, such as a
// periodic drift check. It starts after the caches have synced.
type Loop func(ctx context.Context)

// Config describes one controller's worker.
type Config struct {
	// Name names the queue (its metrics) and the controller in errors. Required.
	Name string
	// Sync handles one key. Nil means the controller has no queue and runs only Loops.
	Sync SyncFunc
	// Workers is how many keys are synced at once; at least 1 when Sync is set.
	Workers int
	// Retry bounds how failing keys are retried; its zero fields take client-go's
	// defaults (DefaultRetry).
	Retry Retry
	// Synced are the informer registrations to wait for before any work starts, besides
	// those Watch adds.
	Synced []cache.InformerSynced
	// Loops run beside the workers.
	Loops []Loop
	// Health receives a progress report after each key for /readyz, and the queue's
	// length as the pending work; nil reports nothing. A controller without Sync
	// reports its own progress.
	Health *manager.Progress
	// Logger logs retries and terminal errors; the zero value discards.
	Logger logr.Logger
	// Metrics is where the worker registers its metrics, shared by every controller's
	// worker on the registry: the queue's under client-go's workqueue_* names with the
	// worker's Name as their name label, and each unit of work's result and duration
	// (nephele_controller_syncs_total, nephele_controller_sync_errors_total,
	// nephele_controller_sync_duration_seconds) by controller. Nil registers nothing.
	Metrics prometheus.Registerer
	// Prioritized queues keys by priority: a key added with AddCritical goes before
	// the keys added with Add, first come first served within each, though never so
	// long that the others starve (see cloud.RefineEvery). A retry keeps the
	// priority the key was synced with.
	Prioritized bool
}

// Retry bounds how a controller retries failing keys: each key backs off exponentially
// from MinDelay to MaxDelay, and the retries of all keys together are queued no faster
// than QPS (with Burst), so that a failure of the whole cloud does not become a storm of
// retries. The one vocabulary for every controller's retry limits: a controller's Config
// carries a Retry and hands it on to the worker.
type Retry struct {
	// MinDelay is a key's wait after its first failure; it doubles with each failure
	// after that.
	MinDelay time.Duration
	// MaxDelay caps a key's wait; a MaxDelay below MinDelay is taken as MinDelay.
	MaxDelay time.Duration
	// QPS bounds how fast the retries of all keys are queued, together; negative means
	// no overall bound, only each key's backoff.
	QPS float64
	// Burst is how many retries may be queued at once within QPS.
	Burst int
}

// DefaultRetry is client-go's default controller rate limiter, which upstream's
// controllers use: 5ms doubling to 1000s per key, 10 retries/s (burst 100) overall. A
// zero field of Config.Retry takes its value from here.
func DefaultRetry() Retry {
	return Retry{MinDelay: 5 * time.Millisecond, MaxDelay: 1000 * time.Second, QPS: 10, Burst: 100}
}

// Or returns r with each zero field set from def's.
func (r Retry) Or(def Retry) Retry {
	if r.MinDelay == 0 {
		r.MinDelay = def.MinDelay
	}
	if r.MaxDelay == 0 {
		r.MaxDelay = def.MaxDelay
	}
	if r.QPS == 0 {
		r.QPS = def.QPS
	}
	if r.Burst == 0 {
		r.Burst = def.Burst
	}
	return r
}

// check returns an error naming the first field of r that can never work.
func (r Retry) check() error {
	switch {
	case r.MinDelay < 0, r.MaxDelay < 0:
		return fmt.Errorf("retry delays %s and %s: must not be negative", r.MinDelay, r.MaxDelay)
	case math.IsNaN(r.QPS) || math.IsInf(r.QPS, 0):
		return fmt.Errorf("retry QPS %v: must be a number", r.QPS)
	case r.QPS > 0 && r.Burst < 1:
		return fmt.Errorf("retry burst %d: must be at least 1 with a retry QPS of %v", r.Burst, r.QPS)
	}
	return nil
}

// rateLimiter builds client-go's limiter for r, whose fields are all set.
func (r Retry) rateLimiter() workqueue.TypedRateLimiter[string] {
	perKey := workqueue.NewTypedItemExponentialFailureRateLimiter[string](r.MinDelay, max(r.MaxDelay, r.MinDelay))
	if r.QPS < 0 {
		return perKey
	}
	return workqueue.NewTypedMaxOfRateLimiter(perKey,
		&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(r.QPS), r.Burst)})
}

// Worker runs a controller's queue. Create it with New before registering event
// handlers (they call Add), and run it once with Run.
type Worker struct {
	cfg     Config
	metrics *metrics // nil without Config.Metrics
	queue   workqueue.TypedRateLimitingInterface[string]
	// prio orders queue when Config.Prioritized is set; nil otherwise.
	prio *priorityFIFO
}

// New checks cfg and builds the worker with its queue.
func New(cfg Config) (*Worker, error) {
	switch {
	case cfg.Name == "":
		return nil, errors.New("worker: Config.Name is empty")
	case cfg.Sync != nil && cfg.Workers < 1:
		return nil, fmt.Errorf("worker %s: %d workers: want at least 1", cfg.Name, cfg.Workers)
	case cfg.Sync == nil && len(cfg.Loops) == 0:
		return nil, fmt.Errorf("worker %s: neither Sync nor Loops: nothing to run", cfg.Name)
	}
	cfg.Retry = cfg.Retry.Or(DefaultRetry())
	if err := cfg.Retry.check(); err != nil {
		return nil, fmt.Errorf("worker %s: %w", cfg.Name, err)
	}
	rl := cfg.Retry.rateLimiter()
	w := &Worker{cfg: cfg}
	// client-go's queues measure themselves through a MetricsProvider; without one they
	// report to a process-wide provider nobody set, that is nowhere.
	var provider workqueue.MetricsProvider
	if cfg.Metrics != nil {
		m, err := newMetrics(cfg.Metrics)
		if err != nil {
			return nil, fmt.Errorf("worker %s: %w", cfg.Name, err)
		}
		w.metrics, provider = m, m
	}
	qc := workqueue.TypedRateLimitingQueueConfig[string]{Name: cfg.Name, MetricsProvider: provider}
	if cfg.Prioritized {
		w.prio = newPriorityFIFO()
		qc.DelayingQueue = workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{
			Name:            cfg.Name,
			MetricsProvider: provider,
			Queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{
				Name: cfg.Name, MetricsProvider: provider, Queue: w.prio,
			}),
		})
	}
	w.queue = workqueue.NewTypedRateLimitingQueueWithConfig(rl, qc)
	return w, nil
}

// Add queues key for a sync. Keys already queued are synced once; in a prioritized
// worker, at the higher of the priorities they were added with.
func (w *Worker) Add(key string) { w.queue.Add(key) }

// AddCritical queues key ahead of every key added with Add, in a worker with
// Config.Prioritized; in another it is Add. It is for work that keeps something
// unusable until it is done (a Service without its load balancer), as against work
// that only refines what already serves.
func (w *Worker) AddCritical(key string) {
	if w.prio != nil {
		_ = w.prio.mark(key)
	}
	w.queue.Add(key)
}

// AddAfter queues key after d.
func (w *Worker) AddAfter(key string, d time.Duration) { w.queue.AddAfter(key, d) }

// ShutDown releases the queue of a worker that will never Run (its controller was built
// but not started). Run shuts the queue down itself.
func (w *Worker) ShutDown() { w.queue.ShutDown() }

// NumRequeues returns how many times key has failed since it last succeeded: the
// exponent of its backoff. A key that succeeded, or was marked terminal, has 0.
func (w *Worker) NumRequeues(key string) int { return w.queue.NumRequeues(key) }

// Drain takes every queued key off the queue as a worker would, calling fn for each
// instead of syncing it, and returns how many it took. It is for benchmarks and tests
// of a controller's event handling, which run without Run.
func (w *Worker) Drain(fn func(key string)) int {
	n := 0
	for w.queue.Len() > 0 {
		key, quit := w.queue.Get()
		if quit {
			break
		}
		fn(key)
		if w.prio != nil {
			w.prio.finish(key)
		}
		w.queue.Forget(key)
		w.queue.Done(key)
		n++
	}
	return n
}

// Workers returns how many keys are synced at once.
func (w *Worker) Workers() int { return w.cfg.Workers }

// Len returns how many keys wait for a worker.
func (w *Worker) Len() int { return w.queue.Len() }

// Watch registers handler with informer and makes Run wait, besides Config.Synced, until
// the registration has synced. A controller calls it after New and before Run: an
// informer that already runs (a controller built once its manager leads) hands a new
// handler everything it holds at once, so the handler must find the queue there. On an
// error the caller shuts the worker down.
func (w *Worker) Watch(informer cache.SharedInformer, handler cache.ResourceEventHandler) error {
	reg, err := informer.AddEventHandler(handler)
	if err != nil {
		return err
	}
	w.cfg.Synced = append(w.cfg.Synced, reg.HasSynced)
	return nil
}

// Run waits for the caches, then runs the workers and loops until ctx is done, and
// returns once all of them have returned. It returns nil after a clean stop, including
// a stop before the caches synced.
func (w *Worker) Run(ctx context.Context) error {
	defer w.queue.ShutDown()
	if w.cfg.Sync != nil {
		w.cfg.Health.SetPending(w.queue.Len)
	}
	if !cache.WaitForNamedCacheSyncWithContext(ctx, w.cfg.Synced...) {
		return nil // ctx ended first: a clean stop
	}
	var wg sync.WaitGroup
	if w.cfg.Sync != nil {
		for range w.cfg.Workers {
			wg.Go(func() {
				for w.processNext(ctx) {
				}
			})
		}
	}
	for _, loop := range w.cfg.Loops {
		wg.Go(func() { loop(ctx) })
	}
	<-ctx.Done()
	w.queue.ShutDown()
	wg.Wait()
	return nil
}

// processNext syncs one key; it returns false once the queue is shut down.
func (w *Worker) processNext(ctx context.Context) bool {
	key, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(key)
	start := time.Now()
	res, err := w.cfg.Sync(ctx, key)
	w.record(ctx, start, res, err)
	// A retry of critical work stays critical: marked before it is queued again, the
	// mark taken back when it is not (unless an event marked it meanwhile).
	ours := w.prio != nil && w.prio.finish(key) && !w.prio.mark(key)
	if !w.handle(ctx, key, res, err) && ours {
		w.prio.unmark(key)
	}
	w.cfg.Health.Progressed()
	return true
}

// Observe counts one unit of work a controller did outside the queue, in a Loop (the
// lifecycle controller's rounds, say), under the same metrics as the queue's syncs: it
// began at start and ended with res and err. Controllers whose work all goes through
// Sync never call it.
func (w *Worker) Observe(ctx context.Context, start time.Time, res Result, err error) {
	w.record(ctx, start, res, err)
}

// record counts a unit of work that began at start.
func (w *Worker) record(ctx context.Context, start time.Time, res Result, err error) {
	if w.metrics != nil {
		w.metrics.record(w.cfg.Name, time.Since(start), resultOf(ctx.Err(), res, err), err)
	}
}

// handle decides when key is synced again, and returns whether it queued key again.
func (w *Worker) handle(ctx context.Context, key string, res Result, err error) (requeued bool) {
	log := w.cfg.Logger
	switch {
	case err == nil:
		w.queue.Forget(key)
		if res.RequeueAfter > 0 {
			w.queue.AddAfter(key, res.RequeueAfter)
		}
	case ctx.Err() != nil:
		// Stopping: the next leader starts from its own informers.
	case errors.Is(err, cloud.ErrFenced):
		// The lease guarding this controller may have expired: the manager is stopping
		// it. Retrying would only be refused again; the next leader starts afresh.
		log.V(2).Info("Cloud calls are fenced, not retrying: the controller is stopping", "key", key, "reason", err.Error())
		w.queue.Forget(key)
	case IsTerminal(err):
		log.Error(err, "Not retrying until the object changes", "key", key)
		w.queue.Forget(key)
	default:
		if after, ok := cloud.RetryAfter(err); ok {
			log.V(2).Info("Cloud throttled the sync, retrying after its Retry-After", "key", key, "retryAfter", after)
			w.queue.AddAfter(key, after)
			return true
		}
		log.Error(err, "Sync failed, will retry", "key", key, "retries", w.queue.NumRequeues(key))
		w.queue.AddRateLimited(key)
		return true
	}
	return err == nil && res.RequeueAfter > 0
}

// terminalError marks a failure that retrying cannot fix.
type terminalError struct{ err error }

func (e *terminalError) Error() string { return e.err.Error() }
func (e *terminalError) Unwrap() error { return e.err }

// Terminal marks err as one that retrying cannot fix: the worker logs it and does not
// retry the key until its next event. Terminal(nil) is nil.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err}
}

// IsTerminal reports whether err was marked with Terminal, directly or wrapped. A
// joined error (errors.Join) is terminal only when every error in it is: one failure
// that a retry can fix is reason enough to retry.
func IsTerminal(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case *terminalError:
		return true
	case interface{ Unwrap() []error }:
		errs := e.Unwrap()
		for _, err := range errs {
			if !IsTerminal(err) {
				return false
			}
		}
		return len(errs) > 0
	}
	return IsTerminal(errors.Unwrap(err))
}

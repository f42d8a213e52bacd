package worker

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/promreg"
)

// The results a sync is counted under, the values of the result label of
// nephele_controller_syncs_total: the worker's vocabulary (see the package comment).
const (
	ResultSuccess   = "success"   // done
	ResultRequeue   = "requeue"   // done, and asked to be synced again later (Result.RequeueAfter)
	ResultTerminal  = "terminal"  // failed; not retried until the object changes
	ResultThrottled = "throttled" // the cloud throttled it; retried after its Retry-After (or with backoff)
	ResultFenced    = "fenced"    // its cloud calls were fenced; dropped
	ResultCanceled  = "canceled"  // the controller stopped during the sync
	ResultError     = "error"     // failed; retried with backoff
)

// metrics are the worker's collectors. Every controller's worker registers the same
// collectors (promreg shares them), so that all controllers are measured under one
// scheme and one name, told apart by a label, as controller-runtime records every
// controller's reconciles in one place.
type metrics struct {
	// The work queue's, under client-go's (and upstream's) names.
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	queueLatency, workDuration *prometheus.HistogramVec

	// The syncs', by controller.
	syncs        *prometheus.CounterVec
	syncErrors   *prometheus.CounterVec
	syncDuration *prometheus.HistogramVec
}

// queueBuckets are client-go's (component-base's) work queue buckets: 10ns to 10s.
var queueBuckets = prometheus.ExponentialBuckets(10e-9, 10, 10)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	name := []string{"name"}
	m := &metrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_depth", Help: "Current depth of workqueue",
		}, name),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_adds_total", Help: "Total number of adds handled by workqueue",
		}, name),
		queueLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workqueue_queue_duration_seconds", Help: "How long in seconds an item stays in workqueue before being requested.",
			Buckets: queueBuckets,
		}, name),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workqueue_work_duration_seconds", Help: "How long in seconds processing an item from workqueue takes.",
			Buckets: queueBuckets,
		}, name),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_unfinished_work_seconds",
			Help: "How many seconds of work has done that is in progress and hasn't been observed by work_duration. " +
				"Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
		}, name),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_longest_running_processor_seconds",
			Help: "How many seconds has the longest running processor for workqueue been running.",
		}, name),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_retries_total", Help: "Total number of retries handled by workqueue",
		}, name),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nephele_controller_syncs_total",
			Help: "Units of work a controller finished (a key synced, or a round of a controller without a queue), by result: " +
				"success, requeue, terminal, throttled, fenced, canceled, error.",
		}, []string{"controller", "result"}),
		syncErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nephele_controller_sync_errors_total",
			Help: "Units of work that failed, by controller and reason: the controller's (worker.WithReason) or the cloud error's class.",
		}, []string{"controller", "reason"}),
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nephele_controller_sync_duration_seconds",
			Help:    "Time a controller took for one unit of work, whatever its result.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 17), // 1ms to about 65s
		}, []string{"controller"}),
	}
	var err error
	if m.depth, err = promreg.Register(reg, m.depth); err != nil {
		return nil, err
	}
	if m.unfinished, err = promreg.Register(reg, m.unfinished); err != nil {
		return nil, err
	}
	if m.longest, err = promreg.Register(reg, m.longest); err != nil {
		return nil, err
	}
	if m.adds, err = promreg.Register(reg, m.adds); err != nil {
		return nil, err
	}
	if m.retries, err = promreg.Register(reg, m.retries); err != nil {
		return nil, err
	}
	if m.queueLatency, err = promreg.Register(reg, m.queueLatency); err != nil {
		return nil, err
	}
	if m.workDuration, err = promreg.Register(reg, m.workDuration); err != nil {
		return nil, err
	}
	if m.syncs, err = promreg.Register(reg, m.syncs); err != nil {
		return nil, err
	}
	if m.syncErrors, err = promreg.Register(reg, m.syncErrors); err != nil {
		return nil, err
	}
	if m.syncDuration, err = promreg.Register(reg, m.syncDuration); err != nil {
		return nil, err
	}
	return m, nil
}

// The workqueue.MetricsProvider: the queue asks for each metric by its name, the
// controller's.

func (m *metrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return m.depth.WithLabelValues(name)
}

func (m *metrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return m.adds.WithLabelValues(name)
}

func (m *metrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return m.queueLatency.WithLabelValues(name)
}

func (m *metrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return m.workDuration.WithLabelValues(name)
}

func (m *metrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.unfinished.WithLabelValues(name)
}

func (m *metrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.longest.WithLabelValues(name)
}

func (m *metrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return m.retries.WithLabelValues(name)
}

// record counts one unit of work of controller that took d and ended with result (and
// err, when it failed).
func (m *metrics) record(controller string, d time.Duration, result string, err error) {
	m.syncs.WithLabelValues(controller, result).Inc()
	m.syncDuration.WithLabelValues(controller).Observe(d.Seconds())
	if err != nil && result != ResultCanceled && result != ResultFenced {
		m.syncErrors.WithLabelValues(controller, ReasonOf(err)).Inc()
	}
}

// reasonError carries the reason a controller gives a failure.
type reasonError struct {
	reason string
	err    error
}

func (e *reasonError) Error() string { return e.err.Error() }
func (e *reasonError) Unwrap() error { return e.err }

// WithReason returns err carrying reason, the value of the reason label under which
// the worker counts the failure in nephele_controller_sync_errors_total. reason must
// be one of a small fixed set (a label value), such as "invalid_spec" or "api_error".
// WithReason(r, nil) is nil.
func WithReason(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &reasonError{reason: reason, err: err}
}

// ReasonOf returns the reason a failure is counted under: the innermost reason given
// with WithReason, or else the class of the cloud error it wraps (cloud.Classify:
// throttled, not_found, invalid, timeout, ...), which is "error" for an error that
// says nothing more.
func ReasonOf(err error) string {
	var re *reasonError
	if errors.As(err, &re) {
		return re.reason
	}
	return string(cloud.Classify(err))
}

// resultOf is the result a sync that returned res and err, in a worker whose context
// is ctxErr, is counted under.
func resultOf(ctxErr error, res Result, err error) string {
	switch {
	case err == nil && res.RequeueAfter > 0:
		return ResultRequeue
	case err == nil:
		return ResultSuccess
	case ctxErr != nil:
		return ResultCanceled
	case cloud.IsFenced(err):
		return ResultFenced
	case IsTerminal(err):
		return ResultTerminal
	case cloud.IsThrottled(err):
		return ResultThrottled
	default:
		return ResultError
	}
}

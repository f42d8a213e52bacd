package worker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/metrictest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

// TestMetricsOneSchemeForEveryController runs two workers on one registry, as the
// manager runs its controllers, and checks that each key's result, failure reason and
// duration are counted under the worker's names with the controller's name, and that
// each queue reports client-go's workqueue_* metrics under its own name.
func TestMetricsOneSchemeForEveryController(t *testing.T) {
	reg := prometheus.NewRegistry()
	answers := map[string]func(n int) (Result, error){
		"ok":        func(int) (Result, error) { return Result{}, nil },
		"later":     func(n int) (Result, error) { return Result{RequeueAfter: time.Hour}, nil },
		"terminal":  func(int) (Result, error) { return Result{}, Terminal(errors.New("bad spec")) },
		"throttled": func(int) (Result, error) { return Result{}, cloud.Throttled(time.Hour, nil) },
		"fenced":    func(int) (Result, error) { return Result{}, fmt.Errorf("ensuring: %w", cloud.ErrFenced) },
		"reason":    func(int) (Result, error) { return Result{}, Terminal(WithReason("api_error", errors.New("conflict"))) },
		// Fails once, then succeeds: one error, one retry, one success.
		"flaky": func(n int) (Result, error) {
			if n == 1 {
				return Result{}, cloud.NotFoundf("instance i-1")
			}
			return Result{}, nil
		},
	}
	r := &recorder{calls: map[string][]time.Time{}, answer: func(key string, n int) (Result, error) { return answers[key](n) }}
	a := start(t, Config{Name: "ctrl-a", Sync: r.sync, Workers: 2, Metrics: reg,
		Retry: Retry{MinDelay: time.Millisecond, MaxDelay: time.Millisecond, QPS: -1}})
	b := start(t, Config{Name: "ctrl-b", Sync: r.sync, Workers: 1, Metrics: reg, Prioritized: true})
	for key := range answers {
		a.Add(key)
	}
	b.AddCritical("ok")
	r.waitCalls(t, "flaky", 2)

	syncs := func(controller, result string) float64 {
		return metrictest.Value(t, reg, "nephele_controller_syncs_total", map[string]string{"controller": controller, "result": result})
	}
	// Each count lands a moment after the sync: the worker's after it returns, the
	// queue's work duration when the key is Done, and ctrl-b's sync is not waited for
	// above.
	poll.Eventually(t, "every sync counted", func() error {
		if got := metrictest.Value(t, reg, "nephele_controller_sync_duration_seconds", map[string]string{"controller": "ctrl-a"}); got != 8 {
			return fmt.Errorf("%v syncs of ctrl-a timed, want 8", got)
		}
		for _, q := range []struct {
			name string
			want float64
		}{{"ctrl-a", 8}, {"ctrl-b", 1}} {
			if got := metrictest.Value(t, reg, "workqueue_work_duration_seconds", map[string]string{"name": q.name}); got != q.want {
				return fmt.Errorf("%v keys of %s done, want %v", got, q.name, q.want)
			}
		}
		if got := syncs("ctrl-b", ResultSuccess); got != 1 {
			return fmt.Errorf("%v syncs of ctrl-b succeeded, want 1", got)
		}
		return nil
	})
	for _, tt := range []struct {
		controller, result string
		want               float64
	}{
		{"ctrl-a", ResultSuccess, 2}, // ok, and flaky's second sync
		{"ctrl-a", ResultRequeue, 1},
		{"ctrl-a", ResultTerminal, 2},
		{"ctrl-a", ResultThrottled, 1},
		{"ctrl-a", ResultFenced, 1},
		{"ctrl-a", ResultError, 1},
		{"ctrl-b", ResultSuccess, 1},
	} {
		if got := syncs(tt.controller, tt.result); got != tt.want {
			t.Errorf("nephele_controller_syncs_total{controller=%q,result=%q} = %v, want %v", tt.controller, tt.result, got, tt.want)
		}
	}
	for reason, want := range map[string]float64{
		"api_error":                     1, // the controller's own reason
		"error":                         1, // Terminal(errors.New): says nothing more
		string(cloud.ResultThrottled):   1,
		string(cloud.ResultNotFound):    1,
		string(cloud.ResultSuccess):     0,
		"fenced (never an error count)": 0,
	} {
		if got := metrictest.Value(t, reg, "nephele_controller_sync_errors_total", map[string]string{"controller": "ctrl-a", "reason": reason}); got != want {
			t.Errorf("nephele_controller_sync_errors_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	if got := metrictest.Value(t, reg, "nephele_controller_sync_errors_total", nil); got != 4 {
		t.Errorf("nephele_controller_sync_errors_total = %v in all, want 4 (a fenced sync is not a failure)", got)
	}
	for _, tt := range []struct {
		name, queue string
		want        float64
	}{
		{"workqueue_adds_total", "ctrl-a", 8}, // seven keys and flaky's retry; throttled's and later's are an hour away
		{"workqueue_adds_total", "ctrl-b", 1},
		{"workqueue_retries_total", "ctrl-a", 3}, // flaky's backoff, throttled's Retry-After, later's RequeueAfter (client-go counts every delayed add)
		{"workqueue_work_duration_seconds", "ctrl-a", 8},
		{"workqueue_queue_duration_seconds", "ctrl-b", 1},
		{"workqueue_depth", "ctrl-a", 0},
	} {
		if got := metrictest.Value(t, reg, tt.name, map[string]string{"name": tt.queue}); got != tt.want {
			t.Errorf("%s{name=%q} = %v, want %v", tt.name, tt.queue, got, tt.want)
		}
	}
	for _, name := range []string{"workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds"} {
		if !hasSeries(t, reg, name, "ctrl-b") {
			t.Errorf("%s has no series for queue ctrl-b", name)
		}
	}
}

// TestObserveCountsLoopWork checks that a unit of work done in a loop is counted with
// the queue's.
func TestObserveCountsLoopWork(t *testing.T) {
	reg := prometheus.NewRegistry()
	w, err := New(Config{Name: "rounds", Loops: []Loop{func(context.Context) {}}, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer w.ShutDown()
	ctx := t.Context()
	w.Observe(ctx, time.Now(), Result{}, nil)
	w.Observe(ctx, time.Now(), Result{}, WithReason("cloud_errors", errors.New("listing failed")))
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	w.Observe(canceled, time.Now(), Result{}, canceled.Err())
	for result, want := range map[string]float64{ResultSuccess: 1, ResultError: 1, ResultCanceled: 1} {
		if got := metrictest.Value(t, reg, "nephele_controller_syncs_total", map[string]string{"controller": "rounds", "result": result}); got != want {
			t.Errorf("result %s: %v, want %v", result, got, want)
		}
	}
	if got := metrictest.Value(t, reg, "nephele_controller_sync_errors_total", map[string]string{"controller": "rounds", "reason": "cloud_errors"}); got != 1 {
		t.Errorf("errors with reason cloud_errors: %v, want 1", got)
	}
}

// hasSeries reports whether metric name has a series for queue.
func hasSeries(t *testing.T, g prometheus.Gatherer, name, queue string) bool {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == queue {
					return true
				}
			}
		}
	}
	return false
}

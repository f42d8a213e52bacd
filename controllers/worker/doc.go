// Package worker is the one loop every queue-driven cloud controller runs: wait for the
// informer caches, run N workers over a typed rate-limited queue, run the controller's
// extra loops beside them (a node batcher, a drift check), report progress to /readyz,
// and stop cleanly, waiting for every goroutine it started.
//
// A controller's sync returns a Result and an error in one small vocabulary, as
// controller-runtime's reconcile.Result and TerminalError do:
//
//   - nil error: done; Result.RequeueAfter > 0 asks to be synced again after that wait,
//     which is not a failure and resets the key's backoff.
//   - Terminal(err): retrying cannot help until the object changes (its next event
//     queues it again); logged, not retried.
//   - an error the cloud throttled with a Retry-After: synced again after that wait.
//     The manager's cloud call path has already capped the wait (it is the one
//     Retry-After mechanism, shared by every controller); the worker only schedules.
//   - an error wrapping cloud.ErrFenced: the manager's cloud call path refused the
//     call because the leader lease guarding the controller may have expired. The
//     manager is stopping the controller; the key is dropped, as when the context ends,
//     and the next leader starts from its own informers.
//   - any other error: retried with the queue's per-key exponential backoff.
//
// Keys are strings (namespace/name or a name), as client-go's queues use.
//
// # Metrics
//
// With Config.Metrics, every controller's worker is measured the same way, on one
// registry, told apart by the controller's name:
//
//	workqueue_depth, workqueue_adds_total, workqueue_queue_duration_seconds,
//	workqueue_work_duration_seconds, workqueue_unfinished_work_seconds,
//	workqueue_longest_running_processor_seconds, workqueue_retries_total {name}
//	    client-go's queue metrics under client-go's (and upstream's) names.
//	nephele_controller_syncs_total{controller,result}
//	    Units of work by result: success, requeue, terminal, throttled, fenced,
//	    canceled, error. A unit is a key synced, or a round a Loop reports (Observe).
//	nephele_controller_sync_errors_total{controller,reason}
//	    Failures by reason: the controller's (WithReason), or the cloud error's class.
//	nephele_controller_sync_duration_seconds{controller}
//	    Time of each unit of work.
package worker

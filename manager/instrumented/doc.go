// Package instrumented is the one path every cloud call of the manager goes through.
// It wraps a cloud.Provider so that each call, per controller and per operation, is
// counted and timed, bounded by a timeout, paced by a client-side rate limit shared by
// all controllers, and held back while the cloud has asked (with Retry-After) not to be
// called. The cloud's quota is one, so the limit and the Retry-After are shared.
//
// A call may also be fenced (Cloud.ForFenced): refused, with an error wrapping
// ErrFenced, while a Fence is closed, and cut off when it closes. The manager fences
// each controller's calls on the leader lease that guards it, so that a replica whose
// lease may have expired (it was paused, or lost the apiserver) makes no cloud call
// while another may be leading.
//
// It is the manager's runtime, not part of the provider contract: the manager wraps the
// provider once and hands each controller its capabilities through this path, so a
// provider never imports it and a controller never bypasses it.
//
// # Metrics
//
//	nephele_cloud_requests_total{controller,operation,result}
//	    Calls that reached the provider. result is cloud.Classify of the error:
//	    success, not_found, throttled, not_implemented, invalid, timeout, canceled, error.
//	nephele_cloud_request_duration_seconds{controller,operation}
//	    Time spent in the provider, waits excluded.
//	nephele_cloud_requests_in_flight{controller,operation}
//	    Calls in the provider now. A value that stays up points at a hung call.
//	nephele_cloud_throttle_wait_seconds_total{controller,reason}
//	    Time calls spent waiting before reaching the provider: reason "retry_after" for
//	    a Retry-After the cloud asked for, "rate_limit" for the client-side limit.
//	nephele_cloud_fenced_total{controller,operation}
//	    Calls refused by the fence; they never reached the provider.
//
// A call whose context ends while it waits never reaches the provider and is not
// counted in requests_total; its wait is counted in throttle_wait_seconds_total.
//
// The operation label is one of the Op constants: instance_metadata, list_instances,
// get_load_balancer, ensure_load_balancer, update_load_balancer_backends,
// ensure_load_balancer_deleted, list_routes, create_route, delete_route.
package instrumented

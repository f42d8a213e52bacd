// Package instrumented is the one path every cloud call of the manager goes through.
// It wraps a cloud.Provider so that each call, per controller and per operation, is
// counted and timed, bounded by a timeout, paced by a client-side budget shared by
// all controllers, and held back while the cloud has asked (with Retry-After) not to be
// called. The cloud's quota is one, so the budget and the Retry-After are shared.
//
// # The budget
//
// The budget is a token bucket whose rate adapts, as the AWS SDKs' adaptive retry mode
// does: it rises along a CUBIC-like curve while the cloud answers, is cut to CubicBeta
// of the rate on a throttled answer (once per episode: answers to calls sent before
// the cut do not cut again), and stays between a floor and a ceiling (Options.MinQPS,
// MaxQPS). With MinQPS == MaxQPS it is a fixed rate. Calls waiting for a token are
// served by cloud.Class: a waiting cloud.ClassCritical call goes first, and
// cloud.ClassRefine calls get at least one token in cloud.RefineEvery while both wait,
// so neither starves. A controller tags a call with cloud.WithClass; untagged calls take
// their operation's DefaultClass.
//
// A call may also be fenced (Cloud.ForFenced): refused, with an error wrapping
// cloud.ErrFenced, while a Fence is closed, and cut off when it closes. The manager fences
// each controller's calls on the leader lease that guards it, so that a replica whose
// lease may have expired (it was paused, or lost the apiserver) makes no cloud call
// while another may be leading.
//
// It is the manager's runtime, not part of the provider contract: the manager wraps the
// provider once and hands each controller its capabilities through this path, so a
// provider never imports it and a controller never bypasses it. What a controller says
// to this path (a call's class) and hears from it (a fenced call) is in package cloud,
// beside the other errors and cloud.RetryAfter, so no controller imports this package.
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
//	nephele_cloud_class_requests_total{class,result}
//	    Calls that reached the provider, by priority class; result as above.
//	nephele_cloud_budget_wait_seconds{class}
//	    Time each call waited for its budget token, by priority class.
//	nephele_cloud_budget_rate
//	    The budget's rate now, in calls per second.
//	nephele_cloud_budget_cuts_total
//	    Times a throttled answer cut the rate.
//	cloudprovider_<provider>_api_request_duration_seconds{request}
//	cloudprovider_<provider>_api_request_errors{request}
//	    The upstream providers' names (cloudprovider_aws_..., cloudprovider_gce_...),
//	    with <provider> the provider's name (UpstreamMetricPrefix) and request the
//	    operation: time in the provider, and calls that failed (not found included, as
//	    upstream's count).
//
// A call whose context ends while it waits never reaches the provider and is not
// counted in requests_total; its wait is counted in throttle_wait_seconds_total.
//
// The operation label is one of the Op constants: instance_metadata, list_instances,
// get_load_balancer, ensure_load_balancer, update_load_balancer_backends,
// ensure_load_balancer_deleted, list_routes, create_route, delete_route,
// apply_routes.
package instrumented

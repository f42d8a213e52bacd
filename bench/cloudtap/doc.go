// Package cloudtap is a reverse proxy the benchmarks put between the controllers and the
// local cloud. It lets every request through unchanged and, on the way:
//
//   - records, per load balancer, how many ensure and backend-update requests were
//     issued and the backends the cloud last confirmed (from its answers), with the
//     time they last changed; so the harness learns when every load balancer has every
//     node without polling the cloud, which would spend the cloud's rate limit;
//   - records when the cloud first confirmed a route to each destination, so the
//     harness learns when every node has its route, likewise;
//   - can hold the requests for chosen load balancers (by Service) until the client
//     gives up or the hold is released: a cloud whose calls for one load balancer hang.
//
// Faults that apply to whole operations (latency, rate limits) stay with the local cloud's
// own fault knobs; the tap adds only what those cannot target, one load balancer.
package cloudtap

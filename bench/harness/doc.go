// Package harness runs the scale scenarios against one configuration (a row) at a time:
// nephele's controllers, upstream's controllers with nephele's values for the knobs both
// have ("upstream tuned"), and upstream's controllers at their defaults.
//
// Every row gets the same world, built fresh: a real control plane from bin/ (etcd,
// kube-apiserver, kwok managing the Nodes), the local cloud in this process with a fixed
// latency on every call and an account-wide rate limit set through its fault knobs, and
// a cloudtap proxy in front of it. The controllers run as a separate process (package
// ccm, started through Config.ControllerCommand) so that its memory is its own.
//
// The scenarios run in order on that world:
//
//  1. init: N nodes join at once (their instances created just before, then their
//     Nodes with the uninitialized taint); time until every one is initialized.
//  2. services: S LoadBalancer Services are created; time until each has its VIP.
//  3. fan-out: M more nodes join in a burst; backend updates issued per load balancer
//     and time until every load balancer has every new node.
//  4. head-of-line: the cloud holds every call for one new Service's load balancer
//     until the client gives up; time for K other new Services to get theirs.
//  5. steady state (and routes): after a quiet period, cloud calls by operation over a
//     window, extrapolated per node and hour.
//  6. memory: the controller process's peak resident set (VmHWM from /proc) and the Go
//     heap it samples itself, over the whole run.
//
// The harness itself makes no cloud calls while a scenario is measured: it creates the
// instances of joining nodes just before their burst with the cloud's faults briefly
// off, and learns load balancer contents from the tap.
package harness

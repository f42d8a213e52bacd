// Package controllers lists nephele's cloud controllers for a manager: node
// initialization, node lifecycle, service load balancers and routes. A provider binary
// passes Default() to manager.NewCommand.
//
// Every controller package has the same shape, so that what is shared is changed in
// one place and a new controller starts from it rather than from a sibling's copy:
//
//   - doc.go: what the controller does and where it differs from upstream's.
//   - controller.go: Config, New (which builds the controller's worker.Worker, then
//     registers the informer handlers with Worker.Watch, so that an informer already
//     running finds the queue), Run and the event handlers.
//   - manager.go: Spec, how the manager builds the controller from its
//     ControllerContext, and when it declines to run.
//   - sync.go: the work of one key (or, for the lifecycle controller, one round),
//     returning controllers/worker's (Result, error).
//   - events.go: the Event reasons the controller records.
//   - metrics.go: its own metrics (cloud calls are counted by the manager's call path).
//   - other files are named for the one job they hold (backends.go, refresh.go, …).
//
// Shared pieces: controllers/worker (the queue loop and the result vocabulary),
// controllers/taints (reading taints; the keys are k8s.io/cloud-provider/api's), and
// manager.DefaultControllerConfig (every default).
package controllers

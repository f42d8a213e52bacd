// Package handover reads a running cluster to move its cloud controllers from one
// component to another without a window in which both, or neither, run them: from
// kube-controller-manager with an in-tree cloud provider, or from another
// cloud-controller-manager built on k8s.io/cloud-provider, to nephele's, and back. It is
// the logic behind `nephele migrate plan|status|check` (docs/migration.md).
//
//   - Survey reads what the API shows: Nodes (provider IDs, the uninitialized taint),
//     the Leases in kube-system and who holds them, the control plane's workloads and
//     static pods with their flags, and Services of type LoadBalancer. It only reads.
//   - NewRunbook turns a Snapshot into the ordered steps of one move: the
//     LeaderMigrationConfiguration each side reads, with controller names spelled as
//     each side matches them, the flags to change on kube-apiserver,
//     kube-controller-manager, the old and the new cloud-controller-manager and the
//     kubelets, and what to check after each step.
//   - NewStatus says who runs which controller: each lease, its holder, when it was
//     renewed, whether it is stale, and which controllers it guards.
//   - Check gives the verdict after a move: every Node has a provider ID, none stays
//     uninitialized too long, every LoadBalancer Service is served, and the old
//     component holds nothing.
//
// Who holds a lease is told by identity: a controller manager campaigns for its main
// lease and the migration lease under one identity, so the migration lease's holder is
// the component whose main lease has the same holder.
//
// Controller names differ by side and by version. Since v1.28 (kubernetes#115813)
// kube-controller-manager and k8s.io/cloud-provider name the cloud controllers
// service-lb-controller, node-route-controller and cloud-node-lifecycle-controller (and
// cloud-node-controller), and before that service, route and cloud-node-lifecycle (and
// cloud-node). Both match a LeaderMigrationConfiguration's entries by their own current
// name only; nephele matches any of them through its aliases. So each side is given a
// configuration in its own spelling, all naming one lease.
package handover

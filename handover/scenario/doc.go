// Package scenario proves the handover of the cloud controllers under fire: each test
// runs nephele's cloud-controller-manager as real processes (the test binary re-executed
// as the manager, with the local provider and the default controllers) against a real
// kube-apiserver and a local cloud, breaks something on purpose, and judges the outcome
// from what reached the cloud, as seen by a recording proxy in front of it per replica,
// and from the Leases and Services in the apiserver.
//
//   - TestCrashAtEveryStep kills the manager (SIGKILL) at seeded random points of load
//     balancer creation, backend update and deletion: before a call reaches the cloud,
//     after the cloud applied it but before the manager heard back, and a random moment
//     after the answer (amid the finalizer and status writes); after each restart
//     everything converges with no load balancer leaked and no finalizer stuck.
//   - TestPartitionedLeader cuts the leader off the apiserver, not off the cloud, for
//     longer than its lease: no call of it may reach the cloud once its lease may have
//     expired by its own clock, and it comes back as a follower.
//   - TestLeaderKillLoop runs three replicas and kills the leader with SIGKILL again and
//     again while Services come and go: no two replicas call the cloud in overlapping
//     terms, each takeover stays within the bound docs/manager.md states, and nothing is
//     leaked or stuck at the end. TestLeaderKillLoopInCluster does the same to replicas
//     installed in a cluster of real kubelets (package localcluster's in-cluster mode).
//   - TestKubeControllerManagerAndBackOnRealNodes moves the cloud controllers from a
//     kube-controller-manager v1.35 to nephele and back on real kubelets, by the
//     runbook's files, with a LoadBalancer Service of real pods answering throughout.
//
// The real-kubelet tests need root, as every real-node test does.
//
// The kit they share is exported for scenarios elsewhere (bench's move from upstream's
// cloud-controller-manager): Witness, a local cloud (its own, or a cluster's) behind
// recording proxies that name each call's caller, and CutProxy, a TCP proxy that
// partitions one caller from a server.
//
// The loops are seeded: -scenario.seed picks the kill points, -scenario.runs and
// -scenario.kills how many. docs/migration.md has the measured results.
package scenario

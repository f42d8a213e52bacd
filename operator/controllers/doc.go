// Package controllers holds nephele-operator's three controllers, all reconciling the
// one CloudControllerManager named "cluster":
//
//   - Operand (operand.go): renders the platform profile (operator/profiles, which uses
//     deploy/render for the CCM's own objects), applies every object with server-side
//     apply under its own field manager, recreates a Deployment or DaemonSet whose
//     selector changed, prunes what the profile no longer renders, and reports
//     Available, Progressing, Degraded and Upgradeable.
//   - CloudConfigSync (cloudconfig.go): copies the user's cloud config from any
//     namespace into the CCM's, transformed as the profile says; CloudConfigSynced.
//   - TrustedCASync (trustedca.go): writes one CA bundle from the operator's system
//     bundle, the user's CAs and the cloud config's own CA; TrustedCABundleSynced.
//
// Each controller writes only its own conditions, through server-side apply of the
// status with a field manager of its own, so none overwrites another's. As in
// OpenShift's cluster-cloud-controller-manager-operator, a transient error (the API
// server refused a write) turns Degraded only after it has lasted DegradedAfter (two
// minutes), and a terminal one (an unknown platform, a missing Secret, a spec the
// profile cannot run) at once; unlike it, the health is on the resource itself rather
// than on an OpenShift ClusterOperator.
package controllers

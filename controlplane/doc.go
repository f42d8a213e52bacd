// Package controlplane starts a real Kubernetes control plane on this machine: etcd and
// kube-apiserver, and on request kube-controller-manager, kube-scheduler and kwok, from the
// binaries `make tools` builds into bin/ (or $NEPHELE_BIN_DIR, or Options.BinDir).
//
// Three kinds of program run on it, so all of them meet the same control plane with the
// same flags:
//   - `nephele up` (cmd/nephele), which starts it in a known directory (Options.Dir) and adds
//     the local cloud and the cloud-controller-manager with StartProcess;
//   - the integration tests, through internal/testkit/testenv, which adds what needs a *testing.T
//     (one control plane per package, per-test scopes, logs printed when a test fails);
//   - the benchmarks in bench/ and the example provider's end-to-end test, which are modules
//     of their own and cannot import internal/testkit/testenv.
//
// The apiserver runs as a real cluster's does: Node and RBAC authorization, the
// NodeRestriction admission plugin, an admin bearer token in group system:masters,
// client certificates signed by the Env's CA (IssueClientCertificate: a kubelet's
// system:node:<name> in system:nodes), a client certificate of its own toward kubelets
// (for logs and exec, which reach a node by its InternalIP), service account keys and a
// serving certificate generated for each Env, and the Service range 10.96.0.0/16 (or
// Options.ServiceCIDR), on free ports of 127.0.0.1 (or of Options.Address, an address
// real nodes in other network namespaces reach). Every Env has its own directory, ports
// and processes, so several can run at once.
//
// Every process (the control plane's own, and those added with StartProcess or
// StartCommand) runs in a process group of its own, logs to a file in Env.Dir and is ended
// by Env.Stop, latest first and etcd last, with SIGTERM, a bounded wait, then SIGKILL to the
// whole group. On Linux the kernel also kills them should the starting program die without
// stopping them.
//
// A missing binary is a *MissingBinaryError telling to run make tools. Callers must report
// it, never skip: integration tests that silently do not run would let CI pass without them.
//
//	env, err := controlplane.Start(ctx, controlplane.Options{Kwok: true})
//	if err != nil {
//		return err // a *StartError names the directory kept with the logs
//	}
//	defer env.Stop()
//	nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
//
// Components can also be started and stopped while the control plane runs, for example to
// stop a leader and watch another take over:
//
//	kcm, err := env.StartControllerManager(ctx, "--leader-elect=true")
//	...
//	err = kcm.Stop()
package controlplane

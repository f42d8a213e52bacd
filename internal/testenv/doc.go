// Package testenv starts a real Kubernetes control plane for integration tests: etcd and
// kube-apiserver, and on request kube-controller-manager, kube-scheduler and kwok, from the
// binaries `make tools` builds into bin/ (or $NEPHELE_BIN_DIR).
//
// The apiserver runs with RBAC on, an admin bearer token in group system:masters, service
// account keys generated for the env, and the Service range 10.96.0.0/16. Every env has
// its own temporary directory, free ports and processes, so test packages can run in
// parallel. Each process runs in its own process group and logs to a file in Env.Dir.
//
// `nephele up` runs its cluster on the same code: Options.Dir puts the env in a known
// directory, and StartProcess adds the local cloud and the cloud-controller-manager to
// the processes Stop ends (first, before the control plane they talk to).
//
// A missing binary is an error telling to run make tools, never a skip: integration
// tests that silently do not run would let CI pass without them.
//
// One env per test:
//
//	func TestSomething(t *testing.T) {
//		env := testenv.New(t, testenv.Options{Kwok: true})
//		_, err := env.Client.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{})
//		...
//	}
//
// New stops the env when the test ends, and when the test failed keeps Env.Dir and logs
// the end of every component's log.
//
// Starting a control plane costs about five seconds, so a package with many tests shares
// one env through TestMain. Tests sharing an env must not depend on each other's objects:
// give each test its own namespace or object names.
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) {
//		var err error
//		env, err = testenv.Start(context.Background(), testenv.Options{Scheduler: true})
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		code := m.Run()
//		if code != 0 {
//			err = env.StopKeepingLogs()
//			fmt.Fprintf(os.Stderr, "control plane logs kept in %s\n", env.Dir)
//		} else {
//			err = env.Stop()
//		}
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//		}
//		os.Exit(code)
//	}
//
// Components can also be started and stopped while the env runs, for example to stop a
// leader mid-test and watch another take over:
//
//	kcm, err := env.StartControllerManager(ctx, "--leader-elect=true")
//	...
//	err = kcm.Stop()
package testenv

// Package testenv is the test glue on top of package controlplane: what a real control
// plane needs to serve integration tests, all of it tied to a *testing.T or *testing.M.
// Starting, stopping and the processes themselves are controlplane's; nothing here runs
// outside tests.
//
// A package whose tests share one control plane (most do: starting one costs seconds)
// declares a Shared and lets it stop the control plane after the last test, keeping the
// directory with the logs when a test failed:
//
//	var shared = testenv.Shared{Options: controlplane.Options{Kwok: true}}
//
//	func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		env := shared.Env(t) // started on first use; a failure to start fails t
//		scope := testenv.NewScope(t, env.Client, "nephele.dev/test")
//		...
//	}
//
// Tests that share a control plane must not see each other's objects. A Scope gives one
// test an ID for its object names, a label for its Nodes, informers that see only those
// Nodes, and an event recorder; when the test ends its Nodes are deleted.
//
// A test that needs a control plane of its own (it stops components, or checks what is
// left behind) uses New, which stops it when the test ends and, when the test failed, logs
// the end of every process's log and keeps the directory:
//
//	env := testenv.New(t, controlplane.Options{ControllerManager: true})
//
// A missing binary fails the test with "run make tools", never skips it.
package testenv

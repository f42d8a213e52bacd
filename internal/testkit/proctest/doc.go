// Package proctest runs the program under test as a real process from its own test
// binary: TestMain hands Main the program's entry point, and Start re-executes the test
// binary with arguments, which then runs that entry point instead of the tests. A test
// gets the real main path (flag parsing, exit codes, signal handling, what the program
// prints) without building a binary first.
//
//	func TestMain(m *testing.M) {
//		proctest.Main(func() int { main(); return 0 })
//		os.Exit(m.Run())
//	}
//
//	p := proctest.Start(t, "cloud-controller-manager", "--cloud-provider=local", ...)
//	p.WaitOutput(t, "started", proctest.Timeout)
//	p.Signal(syscall.SIGTERM)
//	if code := p.Wait(t, proctest.Timeout); code != 0 { ... }
//
// Exec runs another binary (one the test built) with the same handling.
//
// A process is killed and reaped when its test ends, and its output is logged when the
// test failed, so a test leaves no process behind and a failure shows what the program
// said.
package proctest

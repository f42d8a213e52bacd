package testenv

import "syscall"

// sysProcAttr puts each component in its own process group, so stopping it reaches its
// children too, and has the kernel kill it should the test binary die without cleaning up
// (a test timeout, a SIGKILL), so no etcd or kube-apiserver outlives the tests.
//
// Pdeathsig fires when the OS thread that started the child exits. The Go runtime only
// ends threads whose goroutine exited while locked to them with runtime.LockOSThread, which
// test code using this package does not do.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

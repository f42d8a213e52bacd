package controlplane

import "syscall"

// sysProcAttr puts each component in its own process group, so stopping it reaches its
// children too, and has the kernel kill it should the program that started it die without
// cleaning up (a test timeout, a SIGKILL of nephele up), so no etcd or kube-apiserver
// outlives it.
//
// Pdeathsig fires when the OS thread that started the child exits. The Go runtime only
// ends a thread whose goroutine exited while locked to it with runtime.LockOSThread, and
// any thread may have started a child earlier: so no goroutine of a program that starts
// components may exit locked to its thread. One that enters a network namespace goes back
// and unlocks (nsrun.In); one that exited locked killed a test's kube-scheduler.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

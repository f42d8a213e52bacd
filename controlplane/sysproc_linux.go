package controlplane

import "syscall"

// sysProcAttr puts each component in its own process group, so stopping it reaches its
// children too, and has the kernel kill it should the program that started it die without
// cleaning up (a test timeout, a SIGKILL of nephele up), so no etcd or kube-apiserver
// outlives it.
//
// Pdeathsig fires when the OS thread that started the child exits. The Go runtime only
// ends threads whose goroutine exited while locked to them with runtime.LockOSThread, so a
// process must not be started from such a goroutine (one that enters a network namespace,
// say); no caller of this package does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

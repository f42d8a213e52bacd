// Package nsrun runs a function with a thread of its own inside another Linux network or
// mount namespace, and brings the thread back before handing it to the Go runtime again.
//
// setns(2) moves one thread, so the function runs on a goroutine locked to its thread.
// That thread must not end: a child process started with Pdeathsig (as package
// controlplane starts etcd and kube-apiserver) is killed when the thread that forked it
// exits, and the runtime ends a thread whose goroutine exits locked to it. So the thread
// returns to the namespace it came from and is unlocked; only when it cannot return does
// it stay locked and end, so that no other goroutine runs in the namespace. The local
// cloud's hosts detach a stale /proc in a host's mount namespace with it, and tests open
// sockets inside a host's network namespace (hoststest.InNetNS).
package nsrun

//go:build unix && !linux

package controlplane

import "syscall"

// sysProcAttr puts each component in its own process group, so stopping it reaches its
// children too.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

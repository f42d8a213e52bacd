// Command pause is the sandbox ("pause") container of nephele's real nodes: the process
// that holds a pod's namespaces. It is the first process of the pod, so it reaps the
// zombies the pod's other processes leave to it, and it exits 0 on SIGTERM or SIGINT.
// It is a static Go binary packed into an image by package images (no registry, no
// docker), in the role of registry.k8s.io/pause.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("nephele pause")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		os.Exit(0)
	}
}

// reap collects every child that has exited; signals coalesce, so one SIGCHLD may stand
// for several.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

package kubenode

import "time"

// The bounds of a stop's steps, which add up to ShutdownBudget.
const (
	// Grace periods of the components, before SIGKILL (then killWait).
	proxyGrace      = 5 * time.Second
	kubeletGrace    = 15 * time.Second
	containerdGrace = 10 * time.Second
	// removeTimeout bounds killing and deleting what kubelet left in containerd.
	removeTimeout = 15 * time.Second
	// cleanupTimeout bounds the rest: the processes left in the node's cgroups, its
	// iptables chains, its mounts and its cgroups.
	cleanupTimeout = 15 * time.Second
)

// ShutdownBudget is the longest a node takes to stop after SIGTERM, every step taking
// as long as it may: the components' grace periods and the wait after each SIGKILL,
// removing containers, and the cleanup. A host must give its boot command at least this
// long before it kills it (localcloud's --host-stop-timeout, whose default,
// hosts.DefaultStopTimeout, is longer), or a loaded node is killed mid-stop.
const ShutdownBudget = proxyGrace + kubeletGrace + containerdGrace + 3*killWait + removeTimeout + cleanupTimeout

// killWait is how long a stop waits for a component to go after SIGKILL.
const killWait = 5 * time.Second

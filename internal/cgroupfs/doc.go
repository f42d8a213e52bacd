// Package cgroupfs works on the machine's cgroup file systems, in every hierarchy at
// once: cgroup v1 (one hierarchy per controller set, and named ones such as
// name=systemd), the unified v2 hierarchy, or both (hybrid). It finds the hierarchies
// (Discover), creates a cgroup so that processes can join it (Create, Join), lists and
// kills the processes of a subtree (Procs, Kill), and removes a subtree bottom-up
// (Remove, RemoveDir). A process's own place can be read and restored (Locate, Place).
//
// The local cloud's hosts (localcloud/hosts) give each host a cgroup and kill and remove
// it when the host stops; the node runtime (kubenode) running inside a host creates its
// own subtree there, joins a leaf of it and cleans up what kubelet and containerd leave.
// Both use this package, so a cgroup is made and taken down one way.
//
// The rules it keeps:
//   - Paths are cgroup paths ("/nephele/br/id"), absolute, clean and never the root: a
//     kill or remove of "/" would take the whole machine, so every call refuses it.
//   - In a v1 cpuset hierarchy a new cgroup has no CPUs and memory nodes and takes no
//     process: Create copies its parent's. (In v2 an empty cpuset means the parent's.)
//   - In v2, Create delegates to each new level the controllers its parent has, in the
//     ancestors of the cgroup below the hierarchy's root; the root's own delegation is
//     the machine's (its init's) choice, and is never changed.
//   - Kill uses v2's cgroup.kill, which also takes processes forked meanwhile, for every
//     part of the subtree that holds no process to spare, and SIGKILL for the rest,
//     until no process is listed. PID 0, which cgroup.procs shows for a process outside
//     the reader's PID namespace, is never signalled (kill(0) is the caller's group).
//   - The kernel frees a cgroup a moment after its last process died: removal retries
//     while the cgroup is busy with processes, until the context ends, but does not
//     wait for a cgroup that has child cgroups (ErrNotEmpty).
//
// A hierarchy mounted more than once (the same device) counts once, at a mount of its
// whole tree where there is one. The package needs root for everything but reading.
package cgroupfs

// Package mountinfo reads a process's mount table, /proc/<pid>/mountinfo (proc(5)): one
// Mount a line, with the paths unescaped.
//
// It is the one parser of the mount table for the node runtime (kubenode: which mounts a
// node left, in which order to take them down, where the cgroup hierarchies are) and the
// local cloud's hosts (is a namespace file mounted). It is strict: a line it cannot read
// is an error naming the line, not a mount silently left out, because the callers decide
// what to unmount or remove from what it returns.
//
// Only Linux has the file; elsewhere Read fails, and Parse works on any input.
package mountinfo
